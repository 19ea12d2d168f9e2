"""The pycocoevalcap drop-in with SPICE: the example flow both ways on 12 Flickr8k-Expert images,
pycocoevalcap's ``COCOEvalCap`` with its own ``Spice.compute_score`` running the original
``spice-1.0.jar`` (tests/plugins/spice_reference.py: only its ``java`` call adapted to Java 17, as
pycocoevalcap's Spice cannot run here otherwise: it downloads CoreNLP) against capmetrics'
``COCOEvalCap``, whose SPICE key comes from the ``spice`` metric. Every number is compared."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.integrations import pycocoevalcap as compat

from tests.compat.test_pycocoevalcap import _example_flow, _flickr8k_coco_files, _same
from tests.plugins.coco_reference import needs_coco, needs_flickr8k


def _spice_problem() -> str | None:
    from capmetrics.plugins.spice import _resources

    try:
        problems = _resources.check(original_jar=True)
    except MetricError as err:
        return str(err)
    return "; ".join(map(str, problems)) or None


pytestmark = [
    needs_coco,
    needs_flickr8k,
    pytest.mark.java,
    pytest.mark.skipif(
        _spice_problem() is not None, reason=f"SPICE is not set up: {_spice_problem()}"
    ),
]


class _JarSpice:
    """pycocoevalcap's own ``Spice.compute_score`` flow with the original jar (no download)."""

    def compute_score(self, gts, res):  # type: ignore[no-untyped-def]
        from capmetrics.plugins.spice._resources import find_corenlp, find_js_engine

        from tests.plugins.spice_reference import coco_spice

        order = sorted(gts)
        average, scores = coco_spice(
            [res[i][0] for i in order],
            [gts[i] for i in order],
            find_corenlp()[0].parent,
            find_js_engine()[0],
        )
        return np.float64(average), scores  # pycocoevalcap's np.mean

    def method(self) -> str:
        return "SPICE"


@pytest.mark.slow(
    full=True,
    reason=(
        "the whole pycocoevalcap flow with SPICE's jar on both sides (~50 s); SPICE parity "
        "runs in CI in tests/plugins/test_spice.py (expert40) and the flow without SPICE in "
        "test_pycocoevalcap.py"
    ),
)
def test_example_flow_with_spice_gives_pycocoevalcaps_numbers(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pycocoevalcap.eval as reference
    from capmetrics.plugins.spice._resources import find_corenlp

    files = _flickr8k_coco_files(tmp_path, n_images=12)
    monkeypatch.setenv("CAPMETRICS_CORENLP_DIR", str(find_corenlp()[0].parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # capmetrics parses cold
    monkeypatch.setattr(reference, "Spice", _JarSpice)
    theirs = _example_flow(reference.COCOEvalCap, *files)
    ours = _example_flow(compat.COCOEvalCap, *files)
    assert compat.spice_available() and "SPICE" in ours.eval and len(ours.imgToEval) == 12
    assert list(theirs.imgToEval[0]["SPICE"]) == list(compat.SPICE_CATEGORIES)
    assert list(theirs.imgToEval[0]["SPICE"]["All"]) == list(compat.SPICE_FIELDS)
    _same(ours.eval, theirs.eval, "eval")
    _same(ours.imgToEval, theirs.imgToEval, "imgToEval")
    for n, (a, b) in enumerate(zip(ours.evalImgs, theirs.evalImgs)):
        _same(a, b, f"evalImgs[{n}]")
