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
    """64 keys in a 512-slot table, half with the last slot as home (their probes wrap around to
    slot 0), half with slot 0: every key is found after the others."""
    candidates = np.arange(1, 400_000, dtype=np.int64)
    home = (candidates.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15) >> np.uint64(64 - 9)).view(
        np.int64
    )
    keys = np.concatenate([candidates[home == 511][:32], candidates[home == 0][:32]])
    table = IntTable(keys, np.arange(1, 65))
    assert table.bits == 9 and len(set(table._home(keys).tolist())) == 2
    assert table.get(keys[::-1]).tolist() == list(range(64, 0, -1))
    assert table.get(keys + 400_000).tolist() == [0] * 64


def test_bad_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        IntTable(np.array([3, 3]), np.array([1, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        IntTable(np.array([-3]), np.array([1]))


def test_packed_slots_give_what_two_arrays_give() -> None:
    """Keys and values that fit in 62 bits together share one int64 a slot; wider ones, float
    or negative values keep two arrays. Both answer alike, negative and absent keys with 0."""
    rng = np.random.default_rng(3)
    keys = rng.choice(2**46, size=3000, replace=False).astype(np.int64)  # df-like: 4-gram keys
    counts = rng.integers(1, 6001, size=3000)  # document frequencies
    packed = IntTable(keys, counts)
    assert packed.packed and packed.value_bits == 13
    assert not IntTable(keys, counts << 20).packed  # 46 + 33 bits
    assert not IntTable(keys, counts.astype(float)).packed
    assert not IntTable(keys, counts - 3000).packed
    queries = np.concatenate([keys, rng.integers(0, 2**46, 500), [-1, -5, 0, 2**62]])
    want = dict(zip(keys.tolist(), counts.tolist()))
    expected = [want.get(q, 0) for q in queries.tolist()]
    assert packed.get(queries).tolist() == expected
    assert IntTable(keys, counts.astype(float)).get(queries).tolist() == expected
    assert packed.get(queries).dtype == counts.dtype
    stored_keys, stored_values = packed.items()
    assert dict(zip(stored_keys.tolist(), stored_values.tolist())) == want
