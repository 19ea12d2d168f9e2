"""ROUGE-L: the ALGORITHMS.md §3.5 test vector, the bit-parallel LCS, edge cases, pairwise, and
exact parity with pycocoevalcap's ``Rouge`` on Flickr8k-Expert and Flickr8k-CF."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.plugins import ngram
from capmetrics.plugins.ngram.rouge import RougeL, lcs_bigint
from capmetrics.plugins.tokenizers import WhitespaceTokenizer

from tests.plugins import coco_reference as cr

WS = WhitespaceTokenizer()
globals().update(cr.coco_parity_tests(lambda: RougeL(tokenizer=WS), "rouge"))


def lcs_table(a: list[int], b: list[int]) -> int:
    """Textbook dynamic programme."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def test_vector() -> None:
    scores = RougeL(tokenizer=WS).score(cr.RES, cr.GTS)
    assert scores.corpus == pytest.approx(0.6883091201518706, rel=1e-14)
    np.testing.assert_allclose(
        scores.values, [0.9360613810741688, 0.5, 0.6288659793814433], rtol=1e-14
    )


def test_registers_rouge_l() -> None:
    names: list[str] = []
    ngram.register_distances(lambda cls, aliases=(): names.append(cls.name))
    assert "rouge-l" in names and RougeL.distance_offset == 1.0


def test_bigint_lcs_equals_the_table() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        a, b = rng.integers(0, 4, rng.integers(0, 90)), rng.integers(0, 4, rng.integers(0, 90))
        assert lcs_bigint(a, b) == lcs_table(a.tolist(), b.tolist())


@cr.needs_coco
@pytest.mark.parametrize(("seed", "max_len", "n"), [(0, 20, 200), (1, 70, 100), (2, 300, 30)])
def test_random_captions_match_coco(seed: int, max_len: int, n: int) -> None:
    """Short texts take the uint64 path, > 64-token references and > 256-token candidates the
    Python-integer one."""
    cr.assert_matches_coco(
        RougeL(tokenizer=WS), "rouge", *cr.random_captions(seed, n, max_len, vocab="abcde")
    )


def test_empty_texts_follow_the_split_quirk() -> None:
    """``"".split(" ")`` is one empty token: an empty candidate fully matches an empty reference."""
    scores = RougeL(tokenizer=WS).score(["", "", "a b"], [[""], ["a"], [""]])
    assert scores.values.tolist() == [1.0, 0.0, 0.0]


def test_beta_changes_the_weighting() -> None:
    # LCS 2 of candidate length 2 and reference length 4: P = 1, R = 0.5
    assert RougeL(tokenizer=WS, beta=1.0).score(["a b"], [["a x b y"]]).values[0] == pytest.approx(
        2 / 3
    )


def test_pairwise_scores_each_pair_alone() -> None:
    metric = RougeL(tokenizer=WS)
    a, b = cr.RES + [""], cr.GTS[1] + [""]
    expected = [[metric.score([x], [[y]]).values[0] for y in b] for x in a]
    np.testing.assert_allclose(metric.pairwise(a, b), 1.0 - np.array(expected), rtol=0, atol=1e-15)
