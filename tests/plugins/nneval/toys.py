"""Toy features, training sets and images shared by the NNEval tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from capmetrics import Distance, Embedder, Scores, hookimpl
from capmetrics.data.judgments import Judgments
from capmetrics.data.model import Dataset, Item
from capmetrics.plugins.nneval.training_data import TrainingSet

from tests.conftest import FLICKR8K

needs_flickr8k = pytest.mark.skipif(
    not (FLICKR8K / "Flickr8k.token.txt").is_file(), reason="Flickr8k not found"
)


class Overlap(Distance):
    """Test feature: share of candidate words found in the references; counts its calls."""

    name = "test-overlap"
    calls = 0

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        type(self).calls += 1
        v = np.array(
            [
                sum(w in {x for r in refs for x in r.split()} for w in c.split())
                / max(len(c.split()), 1)
                for c, refs in zip(candidates, references)
            ]
        )
        return Scores(v, float(v.mean()) if v.size else float("nan"))


class Length(Distance):
    """Test feature: candidate length; NaN for the candidate "nan" (a non-finite feature)."""

    name = "test-length"

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        v = np.array([np.nan if c == "nan" else float(len(c.split())) for c in candidates])
        return Scores(v, 0.0)


class WordCounts(Embedder):
    """Test sentence embedder: word counts over ``w0 .. w29`` (one more column for other words)."""

    name = "test-word-counts"

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 31))
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, int(word[1:]) if word[1:].isdigit() and int(word[1:]) < 30 else 30] += 1
        return out


class Features:
    @hookimpl
    def register_distances(self, register):  # type: ignore[no-untyped-def]
        register(Overlap)
        register(Length)

    @hookimpl
    def register_embedders(self, register):  # type: ignore[no-untyped-def]
        register(WordCounts)


FEATURES = ["test-overlap", "test-length"]


def toy_training(n: int = 200, seed: int = 0) -> TrainingSet:
    """Human candidates share words with the references; machine ones mostly do not."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    cands, refs, labels = [], [], []
    for i in range(n):
        ref = " ".join(rng.choice(words, 6))
        human = i % 2 == 0
        pool = ref.split() if human else words
        cands.append(" ".join(rng.choice(pool, int(rng.integers(3, 8)))))
        refs.append((ref,))
        labels.append(int(human))
    return TrainingSet(cands, refs, np.array(labels), [str(i) for i in range(n)])


def toy_judgments(training: TrainingSet) -> Judgments:
    items = [
        Item(str(i), r, (c,))
        for i, (c, r) in enumerate(zip(training.candidates, training.references))
    ]
    ratings = np.column_stack([training.labels * 3 + 1, training.labels * 2 + 1])
    return Judgments.from_ratings(Dataset(items), ratings)


def toy_images(n: int = 12) -> Dataset:
    topics = ["dog", "cat", "man", "girl", "car", "boat"]
    actions = ["runs fast", "sits down", "plays outside", "looks happy", "jumps high"]
    return Dataset(
        [
            Item(f"img{i}", tuple(f"a {topics[i % 6]} {a} id{i}" for a in actions), ())
            for i in range(n)
        ]
    )


def toy_ratings(
    n: int = 120, seed: int = 0, source: str = "toy.jsonl", scale: float = 3.0
) -> Judgments:
    """Rated candidates of n/2 images (2 each): the rating (``1 + scale * share``, 2 raters) grows
    with the share of the candidate's words found in its reference, so ``test-overlap`` predicts
    it."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    items, ratings = [], []
    for i in range(n):
        ref = " ".join(rng.choice(words, 6))
        share = rng.uniform()
        cand = [
            rng.choice(ref.split()) if rng.uniform() < share else rng.choice(words)
            for _ in range(6)
        ]
        items.append(Item(str(i), (ref,), (" ".join(cand),)))
        ratings.append([1 + scale * share, 1 + scale * min(1.0, share + 0.1)])
    dataset = Dataset(items, source)
    return Judgments.from_ratings(
        dataset, np.array(ratings), groups=[f"img{i // 2}" for i in range(n)]
    )
