"""BLEU-1..4: the ALGORITHMS.md §3.5 test vector, edge cases, pairwise, and exact parity with
pycocoevalcap's ``Bleu(4)`` on Flickr8k-Expert and Flickr8k-CF."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins import ngram
from capmetrics.plugins.ngram import bleu
from capmetrics.plugins.ngram.bleu import Bleu1, Bleu2, Bleu3, Bleu4
from capmetrics.plugins.tokenizers import WhitespaceTokenizer

from tests.plugins import coco_reference as cr

WS = WhitespaceTokenizer()
globals().update(cr.coco_parity_tests(lambda: Bleu4(tokenizer=WS), "bleu"))

CORPUS = [0.7484055879255069, 0.7246405945549761, 0.6486443152057437, 0.5196964015278296]
PER_IMAGE = [
    [0.9999999998571429, 0.4999999998333335, 0.36787944080356333],
    [0.9999999998452381, 0.44721359534343336, 0.3678794407115936],
    [0.9283177665648892, 0.368403149726911, 0.0036787944080356343],
    [0.7952707286160441, 6.389431039880334e-05, 0.0003678794408495482],
]


@pytest.mark.parametrize("cls", [Bleu1, Bleu2, Bleu3, Bleu4])
def test_vector(cls: type[bleu.Bleu]) -> None:
    scores = cls(tokenizer=WS).score(cr.RES, cr.GTS)
    n = cls.order
    # pycocoevalcap's numbers to the last bit
    assert scores.corpus == CORPUS[n - 1]
    assert scores.values.tolist() == PER_IMAGE[n - 1]
    assert scores.details["corpus_by_order"] == CORPUS[:n]


def test_registers_the_four_orders() -> None:
    names: list[str] = []
    ngram.register_distances(lambda cls, aliases=(): names.append(cls.name))
    assert names[:4] == ["bleu-1", "bleu-2", "bleu-3", "bleu-4"]
    assert Bleu4.distance_offset == 1.0 and Bleu4.higher_is_better


def test_empty_candidate_scores_zero_and_short_one_gets_the_epsilon() -> None:
    scores = Bleu4(tokenizer=WS).score(["", "   ", "a"], [["a dog"], ["a dog"], ["a"]])
    assert scores.values[:2].tolist() == [0.0, 0.0]  # brevity penalty exp(1 - huge)
    # one unigram matched, no 2/3/4-grams: (1 * 1e-6**3)**(1/4)
    assert scores.values[2] == pytest.approx((1e-15 / 1e-9) ** 0.75, rel=1e-6)


@cr.needs_coco
@pytest.mark.parametrize("seed", [0, 1])
def test_random_captions_match_coco(seed: int) -> None:
    cr.assert_matches_coco(
        Bleu4(tokenizer=WS), "bleu", *cr.random_captions(seed, 300, 30, vocab="abcd")
    )


def test_pairwise_scores_each_pair_alone() -> None:
    metric = Bleu2(tokenizer=WS)
    a, b = cr.RES, cr.GTS[0] + ["a plate"]
    expected = [[metric.score([x], [[y]]).values[0] for y in b] for x in a]
    np.testing.assert_allclose(metric.pairwise(a, b), 1.0 - np.array(expected), rtol=0, atol=1e-15)
    assert metric.pairwise([], b).shape == (0, 4)


def test_errors_name_the_problem() -> None:
    metric = Bleu4(tokenizer=WS)
    with pytest.raises(MetricError, match="2 candidates but 1 reference"):
        metric.score(["a", "b"], [["a"]])
    with pytest.raises(MetricError, match=r"item\(s\) \[1\]"):
        metric.score(["a", "b"], [["a"], []])
    with pytest.raises(MetricError, match=r"item\(s\) \[0\]"):
        metric.score(["a"], ["a dog"])  # a string, not a list of references


def test_default_tokenizer_is_ptb() -> None:
    scores = Bleu4().score(["A dog.", "A DOG , running!"], [["a dog"], ["a dog running"]])
    assert (
        scores.values.tolist()
        == Bleu4(tokenizer=WS)
        .score(["a dog", "a dog running"], [["a dog"], ["a dog running"]])
        .values.tolist()
    )
