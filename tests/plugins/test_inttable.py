"""The vectorised int64 hash table behind fixed CIDEr document frequencies."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.plugins.ngram.inttable import IntTable


@pytest.mark.parametrize("n", [0, 1, 7, 5000])
def test_get_equals_a_dict(n: int) -> None:
    rng = np.random.default_rng(n)
    keys = rng.choice(2**62, size=n, replace=False).astype(np.int64)
    values = rng.integers(1, 1000, size=n)
    table = IntTable(keys, values)
    queries = np.concatenate([keys, rng.integers(0, 2**62, size=300), [-1, -5, 0]])
    want = dict(zip(keys.tolist(), values.tolist()))
    assert table.get(queries).tolist() == [want.get(q, 0) for q in queries.tolist()]


def test_colliding_keys_probe_past_each_other() -> None:
    keys = np.arange(0, 64 * 2**40, 2**40, dtype=np.int64)  # many share a home slot
    table = IntTable(keys, np.arange(1, 65))
    assert table.get(keys[::-1]).tolist() == list(range(64, 0, -1))
    assert table.get(keys + 1).tolist() == [0] * 64


def test_bad_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        IntTable(np.array([3, 3]), np.array([1, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        IntTable(np.array([-3]), np.array([1]))
