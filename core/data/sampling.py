"""Draw k candidates or references per item (``--sample``), reproducibly.

Each item's draw is seeded by the seed and the item's id, so it does not depend on the order
of the items, and two systems compared on the same items get the same reference sample.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from capmetrics.data.model import Dataset, Item, ItemId
from capmetrics.errors import MetricError


def _rng(seed: int, item_id: ItemId, role: str) -> np.random.Generator:
    digest = hashlib.blake2b(
        f"{type(item_id).__name__}:{item_id}\x00{role}".encode(), digest_size=16
    )
    words = np.frombuffer(digest.digest(), dtype=np.uint32).tolist()
    return np.random.default_rng(np.random.SeedSequence([seed & 0xFFFFFFFF, *words]))


def _draw(texts: Sequence[Any], k: int | None, rng: np.random.Generator) -> tuple[Any, ...]:
    if k is None or len(texts) <= k:
        return tuple(texts)
    chosen = np.sort(rng.choice(len(texts), size=k, replace=False))
    return tuple(texts[i] for i in chosen)


def _sample_item(item: Item, candidates: int | None, references: int | None, seed: int) -> Item:
    """``item`` with its drawn captions; everything else it carries (its image) is kept, and
    per-caption fields (scene graphs, one per caption) are drawn with their captions."""
    picked: dict[str, Any] = {}
    for role, k in (("references", references), ("candidates", candidates)):
        texts = getattr(item, role)
        index = _draw(range(len(texts)), k, _rng(seed, item.id, role))
        picked[role] = tuple(texts[i] for i in index)
        graphs = getattr(item, f"{role[:-1]}_graphs", None)
        if graphs is not None and len(graphs) == len(texts):
            picked[f"{role[:-1]}_graphs"] = tuple(graphs[i] for i in index)
    return dataclasses.replace(item, **picked)


def sample_dataset(
    dataset: Dataset, candidates: int | None = None, references: int | None = None, seed: int = 0
) -> Dataset:
    """A dataset with at most ``candidates`` candidates and ``references`` references per item,
    drawn without replacement (in their original order); smaller sets are kept whole."""
    for name, k in (("candidates", candidates), ("references", references)):
        if k is not None and k < 1:
            raise MetricError(f"the number of sampled {name} must be at least 1, got {k}")
    items = [_sample_item(item, candidates, references, seed) for item in dataset]
    return Dataset(items, dataset.source, list(dataset.skipped))
