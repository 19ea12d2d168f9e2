"""Empty candidates are scored as coco-caption scores them (docs/usage/formats.md, "Empty
candidates"): the values against pycocoevalcap on Flickr8k-Expert with blanked candidates, every
bundled distance and statistic on an empty candidate, the warning, the JSON field, the strict
policy and components that refuse them."""

from __future__ import annotations

import json
import math
import warnings

import capmetrics
import numpy as np
import pytest
from capmetrics import Distance, Scores
from capmetrics.cli import app
from capmetrics.data import from_gts_res
from capmetrics.engine.scoring import refuses_empty_candidates
from capmetrics.errors import DataError, MetricError
from capmetrics.registry import get_registry
from typer.testing import CliRunner

from tests.plugins.coco_reference import coco, needs_coco, needs_flickr8k, raw, tokenized

BLANKED = {3: "", 17: "   ", 40: "\n", 41: ""}


def _blanked(n: int = 120) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """Raw and pycocoevalcap-tokenised Expert candidates/references, some candidates blanked."""
    cands, refs, _ = raw("expert")
    tcands, trefs = tokenized("expert")
    cands, tcands = list(cands[:n]), list(tcands[:n])
    for i, text in BLANKED.items():
        cands[i], tcands[i] = text, ""
    return cands, [list(r) for r in refs[:n]], tcands, trefs[:n]


@needs_flickr8k
@needs_coco
def test_values_equal_coco_caption_with_empty_candidates() -> None:
    cands, refs, tcands, trefs = _blanked()
    data = from_gts_res({i: r for i, r in enumerate(refs)}, {i: [c] for i, c in enumerate(cands)})
    with pytest.warns(
        UserWarning, match=r"4 empty candidate\(s\) scored .* item\(s\) 3 \(candidate 0\), 17 "
    ):
        res = capmetrics.score(data, ["bleu-4", "rouge-l", "cider-d"])
    assert res.empty_candidates == [(i, 0) for i in BLANKED]
    corpus, per = coco("bleu", tcands, trefs)
    np.testing.assert_allclose(res["bleu-4"].item_values, per[3], rtol=0, atol=1e-12)
    assert res["bleu-4"].corpus == pytest.approx(corpus[3], abs=1e-12)
    for name, scorer in (("rouge-l", "rouge"), ("cider-d", "cider")):
        corpus, per = coco(scorer, tcands, trefs)
        np.testing.assert_allclose(res[name].item_values, per, rtol=0, atol=1e-12)
        assert res[name].corpus == pytest.approx(corpus, abs=1e-12)
    for name in ("bleu-4", "rouge-l", "cider-d"):
        assert all(res[name].item_values[i] == 0.0 for i in BLANKED)
    assert res.to_json_dict()["data"]["empty_candidates"] == [
        {"item": i, "candidate": 0} for i in BLANKED
    ]


def _documented(name: str) -> float | None:
    """The documented value of an empty candidate (docs/usage/formats.md), None = model-defined."""
    if name.startswith(("bleu-", "rouge", "cider")) or name in ("meteor", "wmd"):
        return 0.0
    return {"wembsim": -1.0}.get(name)


DISTANCES = [
    e.name
    for e in get_registry().components("distance")
    if e.name not in ("spice", "nneval") and not e.cls.needs_images
]  # image metrics: test_clip_score.py
STATISTICS = [
    "trm(distance=bleu-4)",
    "trm(distance=rouge-l)",
    "over-candidates(distance=cider-d)",
    "mmd",
    "frechet",
]


#: meteor-jar's run here is its JVM's start (~10 s) for what CI checks elsewhere: an empty
#: candidate scored 0 as pycocoevalcap does (tests/plugins/test_meteor.py::
#: test_edge_cases_equal_pycocoevalcap), one that tokenizes to nothing (test_awkward_text), the
#: kit's empty candidate (tests/test_conformance.py, meteor-jar-check_edge_inputs); the warning is
#: the engine's, checked here for every other distance.
JVM_REPEAT = pytest.mark.slow(
    full=True,
    reason=(
        "a METEOR JVM start; CI covers its empty candidates in test_meteor.py "
        "(test_edge_cases_equal_pycocoevalcap, test_awkward_text) and "
        "test_conformance.py (meteor-jar-check_edge_inputs)"
    ),
)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[JVM_REPEAT] if n == "meteor-jar" else []) for n in DISTANCES]
)
def test_every_bundled_distance_scores_an_empty_candidate(name: str) -> None:
    if name == "meteor":
        pytest.importorskip("pycocoevalcap")
    data = from_gts_res(
        {"x": ["a dog runs on the grass", "two dogs play"], "y": ["a red car"]},
        {"x": ["", "a dog on grass"], "y": ["  "]},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = capmetrics.score(data, [name])
    assert any("2 empty candidate(s)" in str(w.message) for w in caught)
    values = res[name].candidate_values
    empty = [values[0][0], values[1][0]]
    assert all(math.isfinite(v) for v in empty) and math.isfinite(values[0][1])
    if _documented(name) is not None:
        assert empty == [_documented(name)] * 2


@pytest.mark.parametrize("spec", STATISTICS)
def test_every_bundled_statistic_scores_an_empty_candidate(spec: str) -> None:
    refs = ["a dog runs on the grass", "two dogs play", "a brown dog outside", "dogs on a lawn"]
    data = from_gts_res(
        {"x": refs, "y": refs[::-1]},
        {"x": ["", "a dog runs", "a cat sleeps", "a dog"], "y": ["a dog", "dogs", "a lawn", " "]},
    )
    with pytest.warns(UserWarning, match="2 empty candidate"):
        res = capmetrics.score(data, [spec])
    assert np.isfinite(res[spec].item_values).all()


def test_the_other_bundled_components_declare_their_policy() -> None:
    registry = get_registry()
    assert registry.lookup(
        "nneval", ["distance"]
    ).cls.accepts_empty_candidates  # P(human) of empty-aware features
    assert registry.lookup(
        "spice", ["distance"]
    ).cls.accepts_empty_candidates  # the jar scores them 0
    assert refuses_empty_candidates(capmetrics.compose("trm(distance=spice)")) is None
    assert refuses_empty_candidates(capmetrics.compose("trm(distance=bleu-4)")) is None


class _Strict(Distance):
    name = "strict-test"

    def score(self, candidates, references):  # type: ignore[no-untyped-def]
        return Scores(np.ones(len(candidates)), 1.0)


def test_a_component_that_refuses_them_names_the_items() -> None:
    data = from_gts_res({"a": ["a dog"], "b": ["a cat"]}, {"a": ["a dog"], "b": [""]})
    with pytest.raises(
        MetricError, match=r"strict-test does not score empty candidates.*'b' \(candidate 0\)"
    ):
        capmetrics.score(data, [_Strict()])
    assert (
        capmetrics.score(from_gts_res({"a": ["a dog"]}, {"a": ["a dog"]}), [_Strict()])[
            "strict-test"
        ].corpus
        == 1.0
    )


def test_strict_policy_refuses_them_and_references_stay_an_error() -> None:
    data = from_gts_res({"a": ["a dog"], "b": ["a cat"]}, {"a": [" "], "b": ["a cat"]})
    with pytest.raises(DataError, match=r"item 'a': candidate 0 is empty or whitespace-only"):
        capmetrics.score(data, ["bleu-4"], empty_candidates="error")
    with pytest.raises(MetricError, match="empty_candidates must be 'score' or 'error'"):
        capmetrics.score(data, ["bleu-4"], empty_candidates="zero")
    with pytest.raises(DataError, match="reference 0 is empty"):
        from_gts_res({"a": [""]}, {"a": ["a dog"]})


def test_cli_counts_them_and_error_keeps_the_strict_behaviour(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "data.jsonl"
    path.write_text(
        '{"id": "a", "references": ["a dog runs"], "candidates": ["", "a dog"]}\n'
        '{"id": "b", "references": ["a cat"], "candidates": ["a cat"]}\n'
    )
    runner = CliRunner()
    out = tmp_path / "scores.json"
    with pytest.warns(UserWarning, match="1 empty candidate"):
        result = runner.invoke(app, ["score", str(path), "-m", "rouge-l", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["data"]["empty_candidates"] == [{"item": "a", "candidate": 0}]
    assert written["metrics"][0]["items"][0]["candidates"][0] == 0.0
    with pytest.warns(UserWarning, match="1 empty candidate"):
        table = runner.invoke(app, ["score", str(path), "-m", "bleu-4", "-q"])
    assert "1 empty candidate(s) scored" in table.output
    strict = runner.invoke(app, ["score", str(path), "-m", "bleu-4", "--empty-candidates=error"])
    assert (
        strict.exit_code == 1
        and "item 'a': candidate 0 is empty or whitespace-only" in strict.output
    )
    skipped = runner.invoke(
        app,
        [
            "score",
            str(path),
            "-m",
            "rouge-l",
            "--empty-candidates=error",
            "--skip-invalid",
            "--format",
            "json",
            "-q",
        ],
    )
    assert skipped.exit_code == 0 and [
        m["id"] for m in json.loads(skipped.stdout)["metrics"][0]["items"]
    ] == ["b"]
    bad = runner.invoke(app, ["score", str(path), "--empty-candidates=zero"])
    assert bad.exit_code == 2 and "use score or error" in bad.output
