"""Draw k candidates or references per item (``--sample``), reproducibly.

Each item's draw is seeded by the seed and the item's id, so it does not depend on the order
of the items, and two systems compared on the same items get the same reference sample.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from capmetrics.data.model import Dataset, Item, ItemId
from capmetrics.errors import MetricError


def _rng(seed: int, item_id: ItemId, role: str) -> np.random.Generator:
    digest = hashlib.blake2b(f"{type(item_id).__name__}:{item_id}\x00{role}".encode(), digest_size=16)
    words = np.frombuffer(digest.digest(), dtype=np.uint32).tolist()
    return np.random.default_rng(np.random.SeedSequence([seed & 0xFFFFFFFF, *words]))


def _draw(texts: Sequence[str], k: int | None, rng: np.random.Generator) -> tuple[str, ...]:
    if k is None or len(texts) <= k:
        return tuple(texts)
    chosen = np.sort(rng.choice(len(texts), size=k, replace=False))
    return tuple(texts[i] for i in chosen)


def sample_dataset(dataset: Dataset, candidates: int | None = None, references: int | None = None,
                   seed: int = 0) -> Dataset:
    """A dataset with at most ``candidates`` candidates and ``references`` references per item,
    drawn without replacement (in their original order); smaller sets are kept whole."""
    for name, k in (("candidates", candidates), ("references", references)):
        if k is not None and k < 1:
            raise MetricError(f"the number of sampled {name} must be at least 1, got {k}")
    items = [
        Item(item.id, _draw(item.references, references, _rng(seed, item.id, "references")),
             _draw(item.candidates, candidates, _rng(seed, item.id, "candidates")))
        for item in dataset
    ]
    return Dataset(items, dataset.source, list(dataset.skipped))
