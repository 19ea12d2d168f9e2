"""A fixed hash table from non-negative int64 keys to values, looked up a whole array at a time.

Open addressing with linear probing, at most a quarter full up to 2^22 slots (64 MB) and at most
half full beyond (slots of 16 bytes): a look-up reads one or two slots for most keys, where a
binary search (``np.searchsorted``) into a table of 10^5 keys makes ~17 dependent reads, the last
ones out of cache. (A quarter full, Flickr8k's df look-ups take ~25% less time than half full.)
"""

from __future__ import annotations

import numpy as np

EMPTY = -1
LARGE_BITS = 22  # tables larger than 2^LARGE_BITS slots are filled up to half, not a quarter
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: 2^64 / golden ratio, odd


class IntTable:
    """``keys[i] -> values[i]`` for distinct non-negative int64 ``keys``; absent keys give 0."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, distinct: bool = False) -> None:
        """``distinct``: the caller guarantees distinct keys (made by ``np.unique``), so they are
        not checked again (the check is most of the build's time)."""
        keys, values = np.asarray(keys, dtype=np.int64), np.asarray(values)
        if len(keys) and keys.min() < 0:
            raise ValueError("IntTable keys must be non-negative")
        if not distinct and len(np.unique(keys)) != len(keys):
            raise ValueError("IntTable keys must be distinct")
        self.bits = max(4, (4 * len(keys)).bit_length())
        if self.bits > LARGE_BITS:
            self.bits = max(LARGE_BITS, (2 * len(keys)).bit_length())
        self.mask = (1 << self.bits) - 1
        self.keys = np.full(1 << self.bits, EMPTY, dtype=np.int64)
        self.values = np.zeros(1 << self.bits, dtype=values.dtype)
        pending, at = np.arange(len(keys)), self._home(keys)
        while len(pending):
            free = self.keys[at] == EMPTY
            self.keys[at[free]] = keys[pending[free]]  # of keys after the same slot, one wins
            placed = self.keys[at] == keys[pending]
            self.values[at[placed]] = values[pending[placed]]
            pending, at = pending[~placed], (at[~placed] + 1) & self.mask

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored keys and their values (in slot order)."""
        used = self.keys != EMPTY
        return self.keys[used], self.values[used]

    def _home(self, keys: np.ndarray) -> np.ndarray:
        """The first slot tried for each key: the top ``bits`` bits of key x multiplier (mod 2^64)."""
        return (keys.view(np.uint64) * _MULTIPLIER >> np.uint64(64 - self.bits)).view(np.int64)

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The value of each key (0 when absent; negative keys are absent)."""
        keys = np.asarray(keys, dtype=np.int64)
        out = np.zeros(len(keys), dtype=self.values.dtype)
        todo, at = np.arange(len(keys)), self._home(keys)
        while len(todo):
            found = self.keys[at]
            hit = found == keys
            out[todo[hit]] = self.values[at[hit]]
            go_on = ~hit & (found != EMPTY)
            todo, at, keys = todo[go_on], (at[go_on] + 1) & self.mask, keys[go_on]
        return out
