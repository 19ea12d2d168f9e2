"""Character and word n-gram counts of many texts at once, and their clipped matches.

Every n-gram becomes an integer code, order by order: the code of its (n-1)-gram prefix times
the alphabet size plus its last symbol (renumbered densely only if codes would overflow).
No Python loop runs per n-gram, only per order.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Punctuation that chrF++'s word tokenizer splits off the start or end of a word.
PUNCTUATION = frozenset(string.punctuation)

#: Upper bound on the n-gram rows handled at once when matching pairs (bounds the memory).
ROWS_PER_CHUNK = 1 << 21

#: N-gram codes and table keys stay below this bound (int64 with room to spare).
CODE_LIMIT = 1 << 62


def split_words(text: str) -> list[str]:
    """chrF++'s word tokenizer: split on whitespace, then detach one punctuation mark from the
    end of a word or, failing that, from its start (single characters stay whole)."""
    words: list[str] = []
    for word in text.split():
        if len(word) > 1 and word[-1] in PUNCTUATION:
            words += [word[:-1], word[-1]]
        elif len(word) > 1 and word[0] in PUNCTUATION:
            words += [word[0], word[1:]]
        else:
            words.append(word)
    return words


def sequence_ngrams(
    symbols: np.ndarray, lengths: np.ndarray, max_order: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """N-grams of orders 1..``max_order`` of concatenated sequences of dense symbol ids.

    Args:
        symbols: the sequences' symbols (ids ``0..k-1``), one sequence after the other.
        lengths: the length of each sequence.
        max_order: the highest order.

    Returns:
        one ``(owner, code)`` pair of arrays per order: the sequence each n-gram occurrence
        belongs to and a non-negative integer code that equal n-grams share.
    """
    symbols = np.asarray(symbols, dtype=np.int64)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    end = np.repeat(np.cumsum(lengths), lengths)
    start = np.arange(len(symbols))
    base = int(symbols.max()) + 1 if len(symbols) else 1
    code = symbols.copy()  # code of the n-gram starting at each position, where one fits
    out = []
    for n in range(1, max_order + 1):
        fits = np.flatnonzero(start + n <= end)
        if n > 1 and len(fits):
            if int(code[fits].max()) >= CODE_LIMIT // base:
                code[fits] = _dense(code[fits])  # keep codes in int64 range
            code[fits] = code[fits] * base + symbols[fits + n - 1]
        out.append((owner[fits], code[fits]))
    return out


def _dense(codes: np.ndarray) -> np.ndarray:
    """Renumber codes as 0..k-1, equal codes staying equal."""
    return np.unique(codes, return_inverse=True)[1].reshape(-1)


def char_ngrams(texts: Sequence[str], max_order: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Character n-grams of each text with all whitespace removed."""
    squeezed = ["".join(t.split()) for t in texts]
    lengths = np.fromiter(map(len, squeezed), dtype=np.int64, count=len(squeezed))
    codepoints = np.frombuffer("".join(squeezed).encode("utf-32-le"), dtype="<u4").astype(np.int64)
    present = np.bincount(codepoints) > 0
    symbols = (np.cumsum(present) - 1)[codepoints]  # dense character ids
    return sequence_ngrams(symbols, lengths, max_order)


def word_ngrams(texts: Sequence[str], max_order: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Word n-grams of each text, words split by :func:`split_words`."""
    vocabulary: dict[str, int] = {}
    ids: list[int] = []
    lengths = np.zeros(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        words = split_words(text)
        ids += [vocabulary.setdefault(w, len(vocabulary)) for w in words]
        lengths[i] = len(words)
    return sequence_ngrams(np.asarray(ids, dtype=np.int64), lengths, max_order)


@dataclass(frozen=True)
class NgramTable:
    """The n-gram counts of a list of texts.

    One row per distinct (text, order, n-gram), sorted by ``key = (text * orders + order) *
    width + ngram_id``, so the rows of a text are contiguous and any (text, order, n-gram) is
    found by binary search.
    """

    keys: np.ndarray
    counts: np.ndarray
    first_row: np.ndarray  # first row of text t is first_row[t], its last is first_row[t + 1] - 1
    totals: np.ndarray  # (texts, orders): number of n-gram occurrences
    orders: int
    width: int

    @classmethod
    def build(cls, texts: Sequence[str], char_order: int, word_order: int) -> NgramTable:
        """Count the character n-grams of orders 1..``char_order`` of every text, then its
        word n-grams of orders 1..``word_order``."""
        per_order = char_ngrams(texts, char_order)
        if word_order > 0:
            per_order += word_ngrams(texts, word_order)
        orders = len(per_order)
        if len(texts) * orders * _width(per_order) >= CODE_LIMIT:
            per_order = [(owner, _dense(codes)) for owner, codes in per_order]
        width = _width(per_order)
        flat = [(owner * orders + o) * width + codes for o, (owner, codes) in enumerate(per_order)]
        keys, counts = np.unique(np.concatenate(flat), return_counts=True)
        totals = np.stack(
            [np.bincount(owner, minlength=len(texts)) for owner, _ in per_order], axis=1
        )
        bounds = np.arange(len(texts) + 1, dtype=np.int64) * orders * width
        first_row = np.searchsorted(keys, bounds)
        return cls(keys, counts.astype(np.int64), first_row, totals.astype(np.int64), orders, width)

    def matches(self, hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Clipped n-gram matches of text ``hyp[p]`` against text ``ref[p]``: (pairs, orders)."""
        sizes = self.first_row[hyp + 1] - self.first_row[hyp]
        ends = np.cumsum(sizes)
        cuts = np.searchsorted(
            ends, np.arange(ROWS_PER_CHUNK, int(ends[-1]) if len(ends) else 0, ROWS_PER_CHUNK)
        )
        out = np.zeros((len(hyp), self.orders), dtype=np.int64)
        for part in np.split(np.arange(len(hyp)), np.unique(cuts)):
            if len(part):
                out[part] = self._matches_chunk(hyp[part], ref[part], sizes[part])
        return out

    def _matches_chunk(self, hyp: np.ndarray, ref: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        pair = np.repeat(np.arange(len(hyp)), sizes)
        offset_in_pair = np.arange(len(pair)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        rows = self.first_row[hyp][pair] + offset_in_pair
        # the same (order, n-gram) in the reference text: move the key to that text's block
        wanted = self.keys[rows] + (ref - hyp)[pair] * (self.orders * self.width)
        found = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        hit = self.keys[found] == wanted
        clipped = np.where(hit, np.minimum(self.counts[rows], self.counts[found]), 0)
        order = (self.keys[rows] // self.width) % self.orders
        cells = np.bincount(
            pair * self.orders + order, weights=clipped, minlength=len(hyp) * self.orders
        )
        return np.rint(cells).astype(np.int64).reshape(len(hyp), self.orders)


def _width(per_order: list[tuple[np.ndarray, np.ndarray]]) -> int:
    """One more than the largest n-gram code."""
    return max((int(codes.max()) + 1 for _, codes in per_order if len(codes)), default=1)
