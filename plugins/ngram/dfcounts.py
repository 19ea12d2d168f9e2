"""Document frequencies as integer keys: one part of a corpus (:class:`DfCounts`), the sum of
parts, and a digest of a table that does not depend on how it was counted.

An n-gram of order n is the base-``len(words) + 1`` number whose digits are its words' ids
(counted from 1 in ``words``' order), as :class:`~capmetrics.plugins.ngram.cider.DfIndex` keys
it. Parts count on workers and come back as a few int64 arrays (they pickle as bytes, where
the n-gram strings of a 6,000-item fit are 350,000 Python strings); summing them maps each
part's word ids onto one vocabulary and adds the counts of equal keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

MAX_N = 4


def fits_int64(n_words: int, max_n: int = MAX_N) -> bool:
    """Whether keys of ``n_words`` words (base ``n_words + 1``) of order ``max_n`` fit in int64."""
    return (n_words + 1) ** max_n < 2**63


@dataclass
class DfCounts:
    """One part's document frequencies: ``keyed[n - 1]`` holds the distinct keys of order n
    (base ``len(words) + 1``) and how many of the part's images have that n-gram."""

    words: list[str]
    keyed: list[tuple[np.ndarray, np.ndarray]]
    n_images: int


def digits(keys: np.ndarray, base: int, order: int) -> np.ndarray:
    """The word ids of each key, first word first (len(keys) x order)."""
    out = np.empty((len(keys), order), dtype=np.int64)
    rest = np.asarray(keys, dtype=np.int64).copy()
    for t in range(order - 1, -1, -1):
        out[:, t] = rest % base
        rest //= base
    return out


def compose(ids: np.ndarray, base: int) -> np.ndarray:
    """The keys of rows of word ids (the inverse of :func:`digits`)."""
    key = np.zeros(len(ids), dtype=np.int64)
    for t in range(ids.shape[1]):
        key = key * base + ids[:, t]
    return key


def merge(parts: Iterable[DfCounts]) -> DfCounts | None:
    """The sum of the parts, over the union of their words (in order of first appearance);
    None when its keys would overflow int64 (more than ~55,000 distinct words)."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    if not parts:  # nothing counted: an empty table, as fit_states([]) gives
        empty = np.zeros(0, dtype=np.int64)
        return DfCounts([], [(empty, empty)] * MAX_N, 0)
    words = list(dict.fromkeys(w for part in parts for w in part.words))
    if not fits_int64(len(words)):
        return None
    ids = {w: i + 1 for i, w in enumerate(words)}
    base = len(words) + 1
    keyed = []
    for n in range(1, MAX_N + 1):
        keys, counts = [], []
        for part in parts:
            to_global = np.fromiter(map(ids.__getitem__, part.words), np.int64, len(part.words))
            part_keys, part_counts = part.keyed[n - 1]
            local = digits(part_keys, len(part.words) + 1, n)
            keys.append(compose(np.insert(to_global, 0, 0)[local], base))
            counts.append(np.asarray(part_counts, dtype=np.int64))
        distinct, inverse = np.unique(np.concatenate(keys), return_inverse=True)
        keyed.append(
            (
                distinct,
                np.bincount(inverse.ravel(), np.concatenate(counts), len(distinct)).astype(
                    np.int64
                ),
            )
        )
    return DfCounts(words, keyed, sum(part.n_images for part in parts))


def from_strings(df: Mapping[str, int]) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """The words of a string table (in order of first appearance), and per order the word ids
    (from 1) of its n-grams (rows) and their counts."""
    grams = list(df)
    flat = " ".join(grams).split(" ") if grams else []
    words = list(dict.fromkeys(flat))
    ids = {w: i + 1 for i, w in enumerate(words)}
    orders = np.fromiter(map(str.count, grams, repeat(" ")), np.int64, len(grams)) + 1
    word = np.fromiter(map(ids.__getitem__, flat), np.int64, len(flat))
    starts = np.cumsum(orders) - orders
    counts = np.fromiter(map(df.__getitem__, grams), np.int64, len(grams))
    rows, values = [], []
    for n in range(1, int(orders.max(initial=0)) + 1):
        at = np.flatnonzero(orders == n)
        rows.append(word[starts[at][:, None] + np.arange(n)])
        values.append(counts[at])
    return words, rows, values


def digest(
    words: Sequence[str], rows: Sequence[np.ndarray], counts: Sequence[np.ndarray], n_images: int
) -> str:
    """SHA-256 of a table in a form that does not depend on the order of its words or n-grams:
    the image count and the sorted words used (JSON), then per order the n-grams as rows of
    their words' ranks in that sorted list, sorted, with their counts (little-endian int64).
    ``rows[n - 1]``: the word ids (from 1 in ``words``) of the order-n n-grams."""
    used = np.unique(np.concatenate([r.ravel() for r in rows])) if rows else np.zeros(0, np.int64)
    used = used[used > 0]
    names = [words[i - 1] for i in used.tolist()]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.zeros(len(words) + 1, dtype=np.int64)
    rank[used[order]] = np.arange(1, len(order) + 1)
    h = hashlib.sha256(json.dumps([n_images, [names[i] for i in order]]).encode())
    for r, c in zip(rows, counts):
        ranked = rank[r]
        if fits_int64(len(names), ranked.shape[1]):  # one key per row: one sort, not one per column
            at = np.argsort(compose(ranked, len(names) + 1))
        else:
            at = np.lexsort(ranked.T[::-1]) if len(ranked) else np.zeros(0, np.int64)
        h.update(f"|{ranked.shape[1]}:{len(at)}|".encode())
        h.update(ranked[at].astype("<i8").tobytes())
        h.update(np.asarray(c, dtype=np.int64)[at].astype("<i8").tobytes())
    return h.hexdigest()


def counts_digest(part: DfCounts) -> str:
    """:func:`digest` of a :class:`DfCounts`."""
    base = len(part.words) + 1
    rows = [digits(k, base, n) for n, (k, _) in enumerate(part.keyed, 1) if len(k)]
    counts = [c for k, c in part.keyed if len(k)]
    return digest(part.words, rows, counts, part.n_images)


def strings_digest(df: Mapping[str, int], n_images: int) -> str:
    """:func:`digest` of a table of n-gram strings (the same value as :func:`counts_digest` of
    the same frequencies)."""
    words, rows, counts = from_strings(df)
    keep = [i for i, r in enumerate(rows) if len(r)]
    return digest(words, [rows[i] for i in keep], [counts[i] for i in keep], n_images)
