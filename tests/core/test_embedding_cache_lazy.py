"""The BERTScore token encoder with warm caches: no tokenizer, no model, no transformers import
when every text is on disk (the encoder's manifest stands in for them), the same bits as a cold
run, and a damaged or stale manifest never gives a wrong number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.io import embedding_cache

from tests.core import test_embedding_cache as cache_tests

# the data and the fresh-process fixture of the cache's metric tests
CANDS, REFS, fresh = cache_tests.CANDS, cache_tests.REFS, cache_tests.fresh


def _score(spec: str = "bertscore", cands: list[str] = CANDS, refs: list[list[str]] = REFS):  # type: ignore[no-untyped-def]
    import capmetrics

    metric = capmetrics.compose(spec, "distance")
    return metric.score(cands, refs), metric.encoder()


def _manifests(root: Path) -> list[Path]:
    return sorted((root / "embeddings" / "encoders").glob("*.json"))


def _same(a, b) -> bool:  # type: ignore[no-untyped-def]
    return all(np.array_equal(a.details[k], b.details[k]) for k in ("precision", "recall", "f1"))


def test_warm_run_loads_neither_tokenizer_nor_model(fresh, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cold, enc = _score()
    assert enc.loaded and len(_manifests(tmp_path)) == 1
    facts = json.loads(_manifests(tmp_path)[0].read_text())
    assert facts["depth"] == enc.depth == 6 and facts["special"] == sorted(enc.special)
    fresh()
    warm, enc = _score()
    assert not enc.loaded and enc._tokenizer is None and enc.forward_passes == 0
    assert _same(warm, cold)
    fresh()  # idf needs token ids: they come with the cached embeddings
    cold_idf, enc = _score("bertscore(idf=true)")
    assert enc._tokenizer is None and not enc.loaded
    fresh()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(embedding_cache.ENABLE_ENV, "0")  # the reference: no cache, no manifest
        uncached_idf, enc = _score("bertscore(idf=true)")
    assert enc.loaded and _same(cold_idf, uncached_idf)


def test_a_new_text_loads_the_model_and_embeds_only_it(fresh) -> None:  # type: ignore[no-untyped-def]
    _score()
    fresh()
    cands = [*CANDS[:3], "a cat sleeps on a sofa"]
    warm, enc = _score(cands=cands)
    assert enc.loaded and enc.texts_embedded == 1
    fresh()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(embedding_cache.ENABLE_ENV, "0")
        reference, _ = _score(cands=cands)
    assert _same(warm, reference)


@pytest.mark.parametrize(
    "damage",
    [
        lambda facts: "{not json",
        lambda facts: json.dumps({**facts, "tokenizer": "0" * 32}),  # not these vocabulary files
        lambda facts: json.dumps({**facts, "special": ["101"]}),
        lambda facts: json.dumps({k: v for k, v in facts.items() if k != "depth"}),
    ],
)
def test_a_damaged_manifest_is_ignored_and_rewritten(fresh, tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    cold, _ = _score()
    (path,) = _manifests(tmp_path)
    facts = json.loads(path.read_text())
    path.write_text(damage(facts))
    fresh()
    again, enc = _score()
    assert enc.loaded and _same(again, cold)
    assert json.loads(path.read_text()) == facts  # rewritten by the load


def test_a_stale_manifest_stops_the_run_and_is_deleted(fresh, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _score()
    (path,) = _manifests(tmp_path)
    facts = json.loads(path.read_text())
    path.write_text(json.dumps({**facts, "depth": 5}))  # valid, but not what the model says
    fresh()
    with pytest.raises(MetricError, match="manifest .* disagrees with its depth; deleted it"):
        _score()  # layer 5 of 5: no text cached under it, so the model loads and disagrees
    assert not path.exists()
    fresh()
    assert _score()[1].depth == 6


def test_a_cached_text_as_long_as_the_maximum_goes_through_the_tokenizer(fresh) -> None:  # type: ignore[no-untyped-def]
    _score()
    fresh()
    _, enc = _score()
    assert enc._tokenizer is None
    assert enc.token_ids(CANDS[:2]) == [list(e[1]) for e in (enc._cache[t] for t in CANDS[:2])]
    assert enc._tokenizer is None  # from the cache
    enc.max_length = 5  # "two children play with a red ball" has more: it may have been cut
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = enc.token_ids(CANDS[:2])
    assert enc._tokenizer is not None and [len(i) for i in ids] == [5, 5]
    assert any("truncated" in str(w.message) for w in caught)


def test_warm_cli_process_imports_no_transformers(fresh, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code = (
        "import sys, capmetrics\n"
        f"r = capmetrics.score(candidates={CANDS!r}, references={REFS!r}, metrics=['bertscore'])\n"
        "print(repr(r['bertscore'].corpus), 'transformers' in sys.modules)\n"
    )
    # transformers' path (a BERT folder takes the light path without it: test_bertscore_light)
    env = {
        **os.environ,
        "CAPMETRICS_CACHE_DIR": str(tmp_path),
        "CAPMETRICS_BERTSCORE_BACKEND": "transformers",
    }
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][1] == "True" and runs[1] == [runs[0][0], "False"]
