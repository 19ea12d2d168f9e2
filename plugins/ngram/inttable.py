"""A fixed hash table from non-negative int64 keys to values, looked up a whole array at a time.

Open addressing with linear probing, at most a quarter full up to 2^22 slots (64 MB) and at most
half full beyond (slots of 16 bytes): a look-up reads one or two slots for most keys, where a
binary search (``np.searchsorted``) into a table of 10^5 keys makes ~17 dependent reads, the last
ones out of cache. (A quarter full, Flickr8k's df look-ups take ~25% less time than half full.)
When every key and value fit in 62 bits together (a df table: n-gram keys and counts), each slot
is one int64, ``key << value_bits | value``: a look-up then reads one cache line, not two, and
the table is half the size (8 bytes a slot, 16 MB for self-critical's Flickr8k df).
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
        self.dtype = values.dtype
        top = int(keys.max()) if len(keys) else 0
        integral = values.dtype.kind in "iu" and (len(values) == 0 or int(values.min()) >= 0)
        self.value_bits = max(1, int(values.max()).bit_length()) if len(values) else 1
        # packed: one int64 a slot (-1: empty); else keys and values in two arrays
        self.packed = integral and top.bit_length() + self.value_bits <= 62
        slot_keys = np.full(1 << self.bits, EMPTY, dtype=np.int64)
        slot_values = np.zeros(1 << self.bits, dtype=values.dtype)
        pending, at = np.arange(len(keys)), self._home(keys)
        while len(pending):
            free = slot_keys[at] == EMPTY
            slot_keys[at[free]] = keys[pending[free]]  # of keys after the same slot, one wins
            placed = slot_keys[at] == keys[pending]
            slot_values[at[placed]] = values[pending[placed]]
            pending, at = pending[~placed], (at[~placed] + 1) & self.mask
        if self.packed:
            self.slots = np.where(
                slot_keys == EMPTY,
                EMPTY,
                (slot_keys << self.value_bits) | slot_values.astype(np.int64),
            )
        else:
            self.keys, self.values = slot_keys, slot_values

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """The stored keys and their values (in slot order)."""
        if self.packed:
            used = self.slots[self.slots != EMPTY]
            values = used & ((1 << self.value_bits) - 1)
            return used >> self.value_bits, values.astype(self.dtype)
        used = self.keys != EMPTY
        return self.keys[used], self.values[used]

    def _home(self, keys: np.ndarray) -> np.ndarray:
        """The first slot tried for each key: the top ``bits`` bits of key x multiplier (mod
        2^64)."""
        return (keys.view(np.uint64) * _MULTIPLIER >> np.uint64(64 - self.bits)).view(np.int64)

    def get(self, keys: np.ndarray) -> np.ndarray:
        """The value of each key (0 when absent; negative keys are absent)."""
        keys = np.asarray(keys, dtype=np.int64)
        if not self.packed:
            out = np.zeros(len(keys), dtype=self.values.dtype)
            todo, at = np.arange(len(keys)), self._home(keys)
            while len(todo):
                found = self.keys[at]
                hit = found == keys
                out[todo[hit]] = self.values[at[hit]]
                go_on = ~hit & (found != EMPTY)
                todo, at, keys = todo[go_on], (at[go_on] + 1) & self.mask, keys[go_on]
            return out
        out = np.zeros(len(keys), dtype=np.int64)
        todo = np.flatnonzero(keys >= 0)
        keys = keys[todo]
        at, bits, slots = self._home(keys), self.value_bits, self.slots
        while len(todo):
            found = slots[at]
            hit = (found >> bits) == keys  # an empty slot (-1) gives -1: never a key
            out[todo[hit]] = found[hit]
            go_on = ~hit & (found != EMPTY)
            todo, at, keys = todo[go_on], (at[go_on] + 1) & self.mask, keys[go_on]
        out &= (1 << bits) - 1
        return out.astype(self.dtype, copy=False)
