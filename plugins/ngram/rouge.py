"""ROUGE-L exactly as coco-caption's ``Rouge`` computes it (β = 1.2).

Tokens come from ``str.split(" ")`` of the tokenised text, so an empty text is one empty token.
Precision and recall are maximised over the references separately. The longest common
subsequences are computed bit-parallel (Hyyrö 2004): each reference of up to 64 tokens is a
``uint64`` pattern, and all (candidate, reference) pairs advance together one candidate token
per step; longer texts fall back to the same algorithm on Python integers.
"""

from __future__ import annotations

import numpy as np
from capmetrics import Scores, Tokenizer
from capmetrics.plugins.ngram.counts import PTB, Batch, BatchDistance, Sentences, expand_ranges

WORD = 64  # the longest reference handled by the uint64 path
LONG_CANDIDATE = 256  # candidates longer than this take the Python-integer path


def lcs_bigint(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common subsequence of two id sequences, on Python integers."""
    if len(a) > len(b):
        a, b = b, a
    pattern: dict[int, int] = {}
    for i, token in enumerate(a.tolist()):
        pattern[token] = pattern.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b.tolist():
        u = v & pattern.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _low_bits(n: np.ndarray) -> np.ndarray:
    """``2**n - 1`` as uint64, for 0 <= n <= 64."""
    shift = np.minimum(n, WORD - 1).astype(np.uint64)
    low = (np.uint64(1) << shift) - np.uint64(1)
    return np.where(n >= WORD, np.uint64(~np.uint64(0)), low)


def _reference_masks(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """Keys (set * vocab + token) and, per key, the positions of that token in each slot's
    reference as a bit mask (references longer than 64 tokens are left out)."""
    s: Sentences = batch.sentences
    set_idx, slot_idx = np.nonzero(batch.slots >= 0)
    sent = batch.slots[set_idx, slot_idx]
    keep = s.lengths[sent] <= WORD
    set_idx, slot_idx, sent = set_idx[keep], slot_idx[keep], sent[keep]
    n = s.lengths[sent]
    pos = expand_ranges(s.offsets[sent], n)
    bit = np.uint64(1) << (pos - np.repeat(s.offsets[sent], n)).astype(np.uint64)
    keys, row = np.unique(np.repeat(set_idx, n) * len(s.vocab) + s.ids[pos], return_inverse=True)
    masks = np.zeros(len(keys) * batch.width, dtype=np.uint64)
    np.bitwise_or.at(masks, row * batch.width + np.repeat(slot_idx, n), bit)
    return keys, masks.reshape(len(keys), batch.width)


def _lcs_words(batch: Batch, items: np.ndarray) -> np.ndarray:
    """LCS lengths of ``items`` (short references and candidates) with every slot."""
    s = batch.sentences
    keys, masks = _reference_masks(batch)
    order = items[np.argsort(-batch.cand_lengths[items], kind="stable")]
    lengths = batch.cand_lengths[order]
    pos = expand_ranges(s.offsets[batch.cand[order]], lengths)
    c_keys = np.repeat(batch.refset[order], lengths) * len(s.vocab) + s.ids[pos]
    pattern = np.zeros((len(pos), batch.width), dtype=np.uint64)
    if len(keys):
        at = np.minimum(np.searchsorted(keys, c_keys), len(keys) - 1)
        hit = keys[at] == c_keys
        pattern[hit] = masks[at[hit]]
    start = np.cumsum(lengths) - lengths
    v = np.full((len(order), batch.width), ~np.uint64(0), dtype=np.uint64)
    longest = int(lengths.max(initial=0))
    active = len(order) - np.cumsum(np.bincount(lengths, minlength=longest + 1))  # len > t
    for t in range(longest):
        a = active[t]
        va = v[:a]
        u = va & pattern[start[:a] + t]
        v[:a] = (va + u) | (va - u)
    zeros = np.bitwise_count(~v & _low_bits(batch.ref_lengths[order]))
    out = np.zeros((len(items), batch.width), dtype=np.int64)
    out[np.searchsorted(items, order)] = zeros
    return out


def lcs_lengths(batch: Batch) -> np.ndarray:
    """LCS length of each item's candidate with each of its references (n_items x width)."""
    ref_lengths = batch.ref_lengths
    slow = (batch.cand_lengths > LONG_CANDIDATE) | (ref_lengths > WORD).any(axis=1)
    fast = np.flatnonzero(~slow)
    out = np.zeros((len(batch), batch.width), dtype=np.int64)
    out[fast] = _lcs_words(batch, fast)
    tokens = batch.sentences.tokens
    for i in np.flatnonzero(slow):
        for j, sent in enumerate(batch.item_slots[i]):
            if sent >= 0:
                out[i, j] = lcs_bigint(tokens(batch.cand[i]), tokens(sent))
    return out


class RougeL(BatchDistance):
    """ROUGE-L F-measure with β = 1.2, as coco-caption computes it."""

    name = "rouge-l"
    distance_offset = 1.0

    def __init__(self, tokenizer: Tokenizer = PTB, beta: float = 1.2) -> None:
        self.tokenizer = tokenizer
        self.beta = beta

    @staticmethod
    def split(text: str) -> list[str]:
        return text.split(" ")

    def f_measure(self, precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
        """(1 + β²)·P·R / (R + β²·P), or 0 where P or R is 0."""
        b2 = self.beta**2
        nonzero = (precision != 0) & (recall != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = ((1 + b2) * precision * recall) / (recall + b2 * precision)
        return np.where(nonzero, value, 0.0)

    def precision_recall(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """Per-slot precision and recall (0 past an item's last reference)."""
        lcs = lcs_lengths(batch).astype(float)
        precision = lcs / batch.cand_lengths[:, None]
        recall = lcs / np.maximum(batch.ref_lengths, 1)
        return precision, recall

    def score_batch(self, batch: Batch) -> Scores:
        precision, recall = self.precision_recall(batch)
        values = self.f_measure(precision.max(axis=1), recall.max(axis=1))
        return Scores(values, float(np.mean(values)))

    def slot_scores(self, batch: Batch) -> np.ndarray:
        return self.f_measure(*self.precision_recall(batch))
