"""ChrF against sacrebleu's CHRF: sentence and corpus values on Flickr8k captions and edge cases."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from capmetrics import DataError, MetricError
from capmetrics_chrf import ChrF, ngrams

sacrebleu_chrf = pytest.importorskip(
    "sacrebleu.metrics.chrf", reason="needs the test extra (sacrebleu)"
)

FLICKR8K = Path("/work/shared/data/flickr8k/Flickr8k.token.txt")
SETTINGS = [
    {},
    {"word_order": 2},
    {"beta": 1.0},
    {"char_order": 3, "beta": 3.0},
    {"char_order": 9, "word_order": 1, "beta": 0.5},
]


def reference_scores(
    settings: dict, candidates: list[str], references: list[list[str]]
) -> tuple[np.ndarray, float]:
    """sacrebleu's sentence chrF of each candidate and its corpus chrF."""
    metric = sacrebleu_chrf.CHRF(**settings)
    sentence = np.array([metric.sentence_score(c, r).score for c, r in zip(candidates, references)])
    width = max(map(len, references))
    streams = [[refs[j] if j < len(refs) else None for refs in references] for j in range(width)]
    return sentence, metric.corpus_score(candidates, streams).score


def assert_parity(settings: dict, candidates: list[str], references: list[list[str]]) -> None:
    ours = ChrF(**settings).score(candidates, references)
    sentence, corpus = reference_scores(settings, candidates, references)
    np.testing.assert_allclose(ours.values, sentence, rtol=0, atol=1e-9)
    assert ours.corpus == pytest.approx(corpus, abs=1e-9)


@pytest.fixture(scope="module")
def flickr_items() -> tuple[list[str], list[list[str]]]:
    """The first 400 lines of Flickr8k: each caption as candidate against its image's other four."""
    if not FLICKR8K.exists():
        pytest.skip(f"{FLICKR8K} is missing")
    groups: dict[str, list[str]] = defaultdict(list)
    with FLICKR8K.open(encoding="utf-8") as f:
        for _, line in zip(range(400), f):
            key, caption = line.rstrip("\n").split("\t")
            groups[key.split("#")[0]].append(caption)
    candidates, references = [], []
    for captions in groups.values():
        for i, caption in enumerate(captions):
            candidates.append(caption)
            references.append(captions[:i] + captions[i + 1 :])
    return candidates, references


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
def test_flickr8k_parity(settings: dict, flickr_items: tuple[list[str], list[list[str]]]) -> None:
    assert_parity(settings, *flickr_items)


EDGE_CASES = [
    (["", "a", "   "], [["a cat"], [""], ["x"]]),  # empty texts on either side
    (["ab", "abcdefgh"], [["abc", "ab"], ["abcdefgh", "hgfedcba"]]),  # texts shorter than the order
    (
        ["Ein Hund läuft über die Straße .", "犬が走る"],
        [["Der Hund läuft.", "ein hund"], ["犬が 走る", "猫"]],
    ),
    (["(hi) there, friend!", "a-b c."], [["hi there friend !", "(hi)"], ["a - b c .", "a-b c."]]),
    (
        ["the cat", "the cat"],
        [["the dog", "the dog", "cat the"], ["xyz", "the cat"]],
    ),  # ties and repeats
    (["aaaa aa", "abab"], [["aaa", "aaaaaa"], ["ab ab ab", "ba"]]),  # clipping of repeated n-grams
]


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
def test_edge_case_parity(settings: dict, case: int) -> None:
    assert_parity(settings, *EDGE_CASES[case])


def test_details_and_best_reference() -> None:
    scores = ChrF().score(["a black dog"], [["a cat", "a black dog runs", "dog"]])
    assert scores.details["best_reference"].tolist() == [1]
    stats = scores.details["statistics"]
    assert stats.shape == (1, 6, 3)
    assert stats[0, 0].tolist() == [9, 13, 9]  # "ablackdog" vs "ablackdogruns": characters


def test_identical_texts_score_100_and_distance_0() -> None:
    texts = ["a dog runs", "two children play"]
    distances = ChrF().pairwise(texts, texts)
    np.testing.assert_allclose(np.diag(distances), 0.0, atol=1e-12)
    assert (distances[~np.eye(2, dtype=bool)] > 0).all()


def test_pairwise_matches_single_reference_scores() -> None:
    a, b = ["a dog runs", "a cat"], ["dogs run", "a cat sits", "x"]
    expected = [[100 - reference_scores({}, [x], [[y]])[0][0] for y in b] for x in a]
    np.testing.assert_allclose(ChrF().pairwise(a, b), expected, atol=1e-9)


def test_empty_input() -> None:
    scores = ChrF().score([], [])
    assert scores.values.shape == (0,) and scores.corpus == 0.0


@pytest.mark.parametrize("limit", [1 << 62, 1 << 20])
def test_small_chunks_and_code_renumbering_change_nothing(
    monkeypatch: pytest.MonkeyPatch, limit: int, flickr_items: tuple[list[str], list[list[str]]]
) -> None:
    candidates, references = flickr_items[0][:50], flickr_items[1][:50]
    expected = ChrF(char_order=8).score(candidates, references)
    monkeypatch.setattr(ngrams, "ROWS_PER_CHUNK", 97)
    monkeypatch.setattr(ngrams, "CODE_LIMIT", limit)
    got = ChrF(char_order=8).score(candidates, references)
    np.testing.assert_array_equal(got.values, expected.values)
    assert got.corpus == expected.corpus


def test_input_errors_name_the_item() -> None:
    with pytest.raises(DataError, match="item 1: no references"):
        ChrF().score(["a", "b"], [["a"], []])
    with pytest.raises(DataError, match="2 candidates but 1 reference lists"):
        ChrF().score(["a", "b"], [["a"]])
    with pytest.raises(DataError, match="item 0: reference 1 is NoneType"):
        ChrF().score(["a"], [["a", None]])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"char_order": -1}, "char_order must be a non-negative integer"),
        ({"char_order": 0}, "nothing to count"),
        ({"beta": -1.0}, "beta must be a non-negative number"),
    ],
)
def test_parameter_errors(params: dict, message: str) -> None:
    with pytest.raises(MetricError, match=message):
        ChrF(**params).score(["a"], [["a"]])
