"""Flickr8k-Expert and Flickr8k-CF as coco-caption sees them: texts tokenised once with
pycocoevalcap's PTBTokenizer (Java), and pycocoevalcap's own scores; cached per test session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from capmetrics.components.base import Distance, Scores
from capmetrics.data.flickr8k import load_crowdflower, load_expert

FLICKR8K = Path(
    os.environ.get(
        "CAPMETRICS_FLICKR8K", Path(__file__).resolve().parents[3] / "shared" / "data" / "flickr8k"
    )
)
LOADERS = {"expert": load_expert, "cf": load_crowdflower}

needs_flickr8k = pytest.mark.skipif(
    not (FLICKR8K / "Flickr8k.token.txt").is_file(), reason=f"Flickr8k not found in {FLICKR8K}"
)


def _has_pycocoevalcap() -> bool:
    try:
        import pycocoevalcap.tokenizer.ptbtokenizer  # noqa: F401
    except ImportError:
        return False
    return True


needs_coco = pytest.mark.skipif(
    shutil.which("java") is None or not _has_pycocoevalcap(), reason="needs java and pycocoevalcap"
)


@cache
def raw(name: str) -> tuple[list[str], list[tuple[str, ...]], np.ndarray]:
    """Candidates, reference lists and human ratings of a Flickr8k benchmark."""
    dataset, ratings = LOADERS[name](FLICKR8K)
    return [it.candidates[0] for it in dataset], [it.references for it in dataset], ratings


@cache
def _ptb_all() -> dict[str, str]:
    """Every Flickr8k caption (normalised) -> pycocoevalcap's tokenisation, one Java run."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    texts = sorted(
        {
            t
            for name in LOADERS
            for c, refs, _ in [raw(name)]
            for t in (*c, *(r for rs in refs for r in rs))
        }
    )
    out = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
    return {t: out[i][0] for i, t in enumerate(texts)}


@cache
def tokenized(name: str) -> tuple[list[str], list[list[str]]]:
    """Candidates and reference lists of a benchmark, tokenised by pycocoevalcap."""
    table = _ptb_all()
    cands, refs, _ = raw(name)
    return [table[c] for c in cands], [[table[r] for r in rs] for rs in refs]


def coco(
    scorer: str, candidates: list[str], references: list[list[str]]
) -> tuple[object, np.ndarray]:
    """pycocoevalcap's ``compute_score`` on pre-tokenised strings: (corpus, per caption)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    make = {"bleu": lambda: Bleu(4), "rouge": Rouge, "cider": Cider}[scorer]
    gts = {i: list(r) for i, r in enumerate(references)}
    res = {i: [c] for i, c in enumerate(candidates)}
    corpus, per_caption = make().compute_score(
        gts, res, **({"verbose": 0} if scorer == "bleu" else {})
    )
    return corpus, np.asarray(per_caption, dtype=float)


@cache
def coco_scores(name: str, scorer: str, every: int = 1) -> tuple[object, np.ndarray]:
    """pycocoevalcap's scores on the tokenised benchmark (every ``every``-th item)."""
    cands, refs = subset(name, every)
    return coco(scorer, cands, refs)


def subset(name: str, every: int = 1) -> tuple[list[str], list[list[str]]]:
    """Every ``every``-th item of the tokenised benchmark."""
    cands, refs = tokenized(name)
    return cands[::every], refs[::every]


def random_captions(
    seed: int, n: int, max_len: int, vocab: str = "abcdefgh"
) -> tuple[list[str], list[list[str]]]:
    """Random pre-tokenised captions over a small vocabulary, empty ones included."""
    rng = np.random.default_rng(seed)
    words = list(vocab)
    caption = lambda: " ".join(rng.choice(words, int(rng.integers(0, max_len))))
    return [caption() for _ in range(n)], [
        [caption() for _ in range(int(rng.integers(1, 6)))] for _ in range(n)
    ]


#: The test vector of ALGORITHMS.md §3.5 (pre-tokenised).
GTS = [
    ["a man is riding a horse", "a person rides a brown horse", "a man on a horse in a field"],
    [
        "two dogs play in the snow",
        "dogs running through snow",
        "two dogs are playing outside in the snow",
    ],
    ["a plate of food with broccoli", "a white plate topped with food", "food on a plate"],
]
RES = ["a man is riding a brown horse", "a dog runs in the snow", "a plate"]

#: Edge cases as pre-tokenised text: empty candidate, long caption, non-ASCII, empty reference.
EDGE_CANDIDATES = [
    "",
    "a dog",
    " ".join(["a", "man", "rides", "a", "horse"] * 2000),
    "un café à paris ☕ 東京",
    "dog",
]
EDGE_REFERENCES = [
    ["a dog runs", "two dogs"],
    ["a dog", ""],
    ["a man rides a horse", "a man on a horse in a field"],
    ["un café à paris", "東京 ☕ café"],
    ["dog"],
]

full_parity = pytest.mark.slow(
    full=True, reason="full Flickr8k-CF parity takes minutes in pycocoevalcap"
)


def assert_same(
    scorer: str, ours: Scores, corpus: object, per_caption: np.ndarray, tol: float = 0.0
) -> None:
    """Our per-caption and corpus values equal pycocoevalcap's (all four orders for BLEU)."""
    if scorer == "bleu":
        values, total, per_caption = (
            ours.details["by_order"],
            ours.details["corpus_by_order"],
            per_caption.T,
        )
    else:
        values, total = ours.values, ours.corpus
    np.testing.assert_allclose(values, per_caption, rtol=0, atol=tol)
    np.testing.assert_allclose(total, corpus, rtol=0, atol=tol)


def assert_matches_coco(
    metric: Distance, scorer: str, candidates: list[str], references: list[list[str]]
) -> None:
    """``metric`` (on pre-tokenised text) equals pycocoevalcap's scorer on the same input."""
    assert_same(scorer, metric.score(candidates, references), *coco(scorer, candidates, references))


def assert_flickr8k_parity(metric: Distance, scorer: str, name: str, every: int) -> None:
    """``metric`` equals pycocoevalcap on (every ``every``-th item of) a Flickr8k benchmark."""
    cands, refs = subset(name, every)
    assert_same(scorer, metric.score(cands, refs), *coco_scores(name, scorer, every))


def coco_parity_tests(make: Callable[[], Distance], scorer: str) -> dict[str, Callable[..., None]]:
    """A metric's parity tests against pycocoevalcap, by name (``globals().update`` them): the
    edge cases, text without tokens, Flickr8k-Expert and every 10th Flickr8k-CF item, and (with
    CAPMETRICS_SLOW=1) all of Flickr8k-CF."""

    @needs_coco
    def test_edge_cases_match_coco() -> None:
        assert_matches_coco(make(), scorer, EDGE_CANDIDATES, EDGE_REFERENCES)

    def test_text_without_tokens_scores_as_empty() -> None:
        default = type(make())()  # the default tokenizer, ptb, drops punctuation
        refs = [["a dog runs", "two dogs"], ["a man rides a horse"]]
        empty = make().score(["", ""], refs).values
        np.testing.assert_array_equal(default.score([" . ", "... ;"], refs).values, empty)

    @needs_flickr8k
    @needs_coco
    @pytest.mark.parametrize(("name", "every"), [("expert", 1), ("cf", 10)])
    def test_flickr8k_parity(name: str, every: int) -> None:
        assert_flickr8k_parity(make(), scorer, name, every)

    @full_parity
    @needs_flickr8k
    @needs_coco
    def test_flickr8k_cf_full_parity() -> None:
        assert_flickr8k_parity(make(), scorer, "cf", 1)

    tests = (
        test_edge_cases_match_coco,
        test_text_without_tokens_scores_as_empty,
        test_flickr8k_parity,
        test_flickr8k_cf_full_parity,
    )
    return {t.__name__: t for t in tests}
