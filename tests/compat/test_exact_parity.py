"""pycocoevalcap's numbers to the last bit: every value compared with ``==``, never a tolerance.

1. aac-metrics' coco-caption compatibility inputs (example_0, example_1, example_2) through the
   ``COCOEvalCap`` flow: every corpus and per-image value of BLEU-1..4, METEOR, ROUGE-L and CIDEr
   against pycocoevalcap 1.2's (stored by tests/data/aac_compat/make_aac_compat.py).
2. All of Flickr8k-Expert and Flickr8k-CF through each scorer's ``compute_score``: corpus values
   and the digest of the per-image values against pycocoevalcap's (stored by
   tests/data/coco_exact/make_flickr8k_digests.py; the METEOR jar takes minutes on CF, the native
   METEOR seconds), and Flickr8k-Expert against pycocoevalcap's BLEU, ROUGE-L and CIDEr run here.
3. The float arithmetic this rests on (capmetrics.plugins.ngram.pyfloat).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from capmetrics.integrations import pycocoevalcap as compat
from capmetrics.plugins.ngram.pyfloat import py_pow, py_square, sum_left_to_right

from tests.plugins.coco_reference import coco_scores, needs_coco, needs_flickr8k, tokenized

DATA = Path(__file__).resolve().parents[1] / "data"
METRICS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr")

#: native METEOR reads its resources from the jar and tables that pycocoevalcap ships
needs_pycocoevalcap = pytest.mark.skipif(
    importlib.util.find_spec("pycocoevalcap") is None,
    reason="METEOR's resources ship in pycocoevalcap",
)


def _read_gz(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _digest(values: object) -> str:
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f8").tobytes()).hexdigest()


# -- 1. aac-metrics' compatibility examples ------------------------------------------------------
@needs_pycocoevalcap
@pytest.mark.parametrize("example", ["example_0", "example_1", "example_2"])
def test_aac_metrics_examples_give_pycocoevalcaps_bits(example: str) -> None:
    inputs = _read_gz(DATA / "aac_compat" / "inputs.json.gz")[example]
    expected = _read_gz(DATA / "aac_compat" / "expected.json.gz")[example]
    cands, refs = inputs["candidates"], inputs["references"]
    annotations = {
        "images": [{"id": i} for i in range(len(cands))],
        "annotations": [
            {"image_id": i, "id": 5 * i + j, "caption": r}
            for i, rs in enumerate(refs)
            for j, r in enumerate(rs)
        ],
    }
    results = [{"image_id": i, "caption": c} for i, c in enumerate(cands)]
    ours = compat.COCOEvalCap(annotations, results, spice=False, verbose=False)
    ours.evaluate()
    assert {m: ours.eval[m] for m in METRICS} == expected["eval"]
    assert list(ours.imgToEval) == expected["image_id"]
    for metric in METRICS:
        got = [table[metric] for table in ours.imgToEval.values()]
        differ = [i for i, (a, b) in enumerate(zip(got, expected["imgToEval"][metric])) if a != b]
        assert differ == [], (
            f"{example} {metric}: {len(differ)} per-image values differ, first at {differ[:5]}"
        )


def test_example_0_cider_is_the_value_aac_metrics_expects() -> None:
    """The corpus CIDEr-D that capmetrics had 2 units in the last place away (issue 30)."""
    expected = _read_gz(DATA / "aac_compat" / "expected.json.gz")["example_0"]["eval"]
    assert expected["CIDEr"] == 1.2768511973334233


# -- 2. all of Flickr8k ---------------------------------------------------------------------------
def _gts_res(name: str) -> tuple[dict, dict]:
    cands, refs = tokenized(name)
    return {i: list(r) for i, r in enumerate(refs)}, {i: [c] for i, c in enumerate(cands)}


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads((DATA / "coco_exact" / "flickr8k.json").read_text(encoding="utf-8"))


@needs_flickr8k
@needs_coco
@pytest.mark.java
@pytest.mark.parametrize("name", ["expert", "cf"])
def test_flickr8k_bleu_rouge_cider_give_the_stored_bits(name: str, stored: dict) -> None:
    gts, res = _gts_res(name)
    table = stored[name]
    assert len(gts) == table["items"]
    corpus, per_image = compat.Bleu(4).compute_score(gts, res)
    assert corpus == table["Bleu"]["corpus"]
    assert _digest(per_image) == table["Bleu"]["sha256"], f"{name}: BLEU per-image values differ"
    for label in ("Rouge", "Cider"):
        corpus, per_image = getattr(compat, label)().compute_score(gts, res)
        assert float(corpus) == table[label]["corpus"], label
        assert _digest(per_image) == table[label]["sha256"], (
            f"{name}: {label} per-image values differ"
        )


@needs_flickr8k
@needs_coco
@pytest.mark.java
@pytest.mark.parametrize("scorer", ["bleu", "rouge", "cider"])
def test_flickr8k_expert_equals_pycocoevalcap_run_here(scorer: str) -> None:
    gts, res = _gts_res("expert")
    theirs_corpus, theirs = coco_scores("expert", scorer)
    label = {"bleu": "Bleu", "rouge": "Rouge", "cider": "Cider"}[scorer]
    ours_corpus, ours = getattr(compat, label)().compute_score(gts, res)
    if scorer == "bleu":
        assert ours_corpus == list(theirs_corpus)
        np.testing.assert_array_equal(np.asarray(ours), theirs)  # 4 x items, both
    else:
        assert ours_corpus == theirs_corpus
        np.testing.assert_array_equal(ours, theirs)


@needs_flickr8k
@needs_coco
@pytest.mark.java
@pytest.mark.parametrize("judgments", ["expert", "cf"])
def test_flickr8k_meteor_gives_the_jars_bits(stored: dict, judgments: str) -> None:
    gts, res = _gts_res(judgments)
    corpus, per_image = compat.Meteor().compute_score(gts, res)
    table = stored[judgments]["Meteor"]
    assert corpus == table["corpus"]
    if "values" in table:  # stored whole for Expert; CF's 47,830 values by their digest only
        np.testing.assert_array_equal(per_image, table["values"])
    assert _digest(per_image) == table["sha256"]


# -- 3. the arithmetic ----------------------------------------------------------------------------
def test_py_square_is_pythons_pow_next_to_rounding_midpoints_too() -> None:
    rng = np.random.default_rng(30)
    x = np.concatenate(
        [
            rng.random(200_000) * rng.random(200_000) * 60,
            rng.integers(1, 6, 50_000)
            * (math.log(40_000) - np.log(rng.integers(1, 9_000, 50_000))),
            [0.0, 1.0, 3.0, 1e-300, 1e150],
        ]
    )
    python = np.array([pow(float(v), 2) for v in x])
    assert (x * x != python).sum() > 10  # the plain product differs somewhere: the test can fail
    np.testing.assert_array_equal(py_square(x), python)


def test_py_pow_and_left_to_right_sums_are_pythons() -> None:
    rng = np.random.default_rng(7)
    x = rng.random((300, 5)) * 1e3
    assert py_pow(x, 0.25).tolist() == [[v**0.25 for v in row] for row in x.tolist()]
    totals = []
    for row in x.tolist():
        total = 0.0
        for v in row:
            total += v
        totals.append(total)
    assert sum_left_to_right(x, axis=1).tolist() == totals
    assert sum_left_to_right(x.T, axis=0).tolist() == totals


def test_numpy_mean_of_four_orders_adds_left_to_right() -> None:
    """CIDEr-D's per-item mean over the four orders is ``np.mean`` in pycocoevalcap and a
    left-to-right sum / 4 here: this NumPy must add four values left to right."""
    rows = np.random.default_rng(3).random((2_000, 4)) * np.logspace(-3, 3, 4)
    assert [np.mean(row) for row in rows] == (sum_left_to_right(rows, axis=1) / 4).tolist()
