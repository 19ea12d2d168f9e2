"""Build the paraphrase arrays from ``paraphrase-en.gz`` streaming, in bounded memory.

The table is 62 MB gzipped, 272 MB of text, 5.3 million entries (a probability line, a reference
phrase, a paraphrase) over 2.6 million distinct phrases. Reading it whole (text, lines, a dict of
phrase strings) peaked at 1.8 GB; here it is read a few MB at a time and only integer arrays are
kept: each distinct phrase is found by its text's 64-bit SipHash (Python's ``hash``) and checked
against a second, independent key (its CRC-32 and length: a phrase whose first key matches a known
phrase but not its second is an error, never a silent merge); only new phrases are split into
words, and each stores its word numbers once.

The arrays are the same, byte for byte, as numbering phrases by first appearance among all
reference phrases in file order, then among the paraphrases, and words by first appearance in those
phrases (the layout ``_resources`` documents): the stream numbers them as they come, and the
numbers are put in that order at the end.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from itertools import repeat
from pathlib import Path

import numpy as np
from capmetrics.errors import MetricError

#: Decompressed bytes read at a time.
BLOCK = 4 << 20
#: Bytes after which a block's phrases may not be single spaces between words (Java's
#: StringTokenizer splits on space, tab, newline, carriage return and form feed; other spaces are
#: letters to it, and phrases are split on single spaces here): such blocks are normalised with
#: ``java_split``, which changes nothing in a regular phrase.
_ODD = (b"\t", b"\f", b"\r", b"  ", b" \n", b"\n ")
_UNSEEN = np.iinfo(np.int32).max


def _irregular(block: bytes) -> bool:
    """Whether a phrase in ``block`` may hold whitespace other than single spaces between words."""
    return block.startswith(b" ") or any(odd in block for odd in _ODD)


def _text_blocks(table: Path, advance: Callable[[int], None]) -> Iterator[tuple[str, bool]]:
    """The table's text in blocks that end at a line end (the last may not), each with whether
    it is irregular; ``advance`` gets the compressed bytes read."""
    raw = table.open("rb")
    with raw, gzip.GzipFile(fileobj=raw) as f:
        carry, read = b"", 0
        while block := f.read(BLOCK):
            advance(raw.tell() - read)
            read = raw.tell()
            block = carry + block
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                yield block[:cut].decode("utf-8", "replace"), _irregular(block[:cut])
        if carry:
            yield carry.decode("utf-8", "replace"), _irregular(carry)


def _entries(
    table: Path,
    split_lines: Callable[[str], list[str]],
    normal: Callable[[str], str],
    advance: Callable[[int], None],
) -> Iterator[tuple[list[str], list[str]]]:
    """(reference phrases, paraphrases) of consecutive entries, a block at a time; phrases are
    whitespace-normalised (``normal``) where the block's text is irregular."""
    pending: list[str] = []
    pending_odd = False
    for text, irregular in _text_blocks(table, advance):
        lines = pending + split_lines(text)
        whole = len(lines) - len(lines) % 3
        odd = irregular or pending_odd
        pending, pending_odd = lines[whole:], odd and whole < len(lines)
        refs, pars = lines[1:whole:3], lines[2:whole:3]
        if odd:
            refs, pars = [normal(p) for p in refs], [normal(p) for p in pars]
        if refs:
            yield refs, pars


class _Words:
    """Word numbers in order of first sight (temporary: renumbered at the end)."""

    def __init__(self) -> None:
        self.number: dict[str, int] = {}

    def rows(self, phrases: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The word numbers of ``phrases`` (flat) and their offsets."""
        if not phrases:
            return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
        lengths = (
            np.fromiter(map(str.count, phrases, repeat(" ")), dtype=np.int64, count=len(phrases))
            + 1
        )
        words = " ".join(phrases).split(" ")
        if "" in phrases:  # an empty phrase has no words (its "" is dropped)
            lengths[[i for i, p in enumerate(phrases) if not p]] = 0
            words = [w for w in words if w]
        get = self.number.get
        ids = np.fromiter(map(get, words, repeat(-1)), dtype=np.int64, count=len(words))
        for at in np.flatnonzero(ids < 0).tolist():
            ids[at] = self.number.setdefault(words[at], len(self.number))
        offsets = np.zeros(len(phrases) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return ids, offsets


class _Phrases:
    """Distinct phrases by key: temporary numbers in order of first sight, their words, and the
    first entry in which each is a reference and a paraphrase."""

    def __init__(self) -> None:
        self.sorted_keys = np.zeros(0, dtype=np.int64)
        self.sorted_ids = np.zeros(0, dtype=np.int32)
        self.checks = np.zeros(0, dtype=np.int64)  # the second key of each phrase
        self.first_ref = np.zeros(0, dtype=np.int32)
        self.first_par = np.zeros(0, dtype=np.int32)
        self.words: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []

    def number(self, phrases: list[str], words: _Words, entry0: int, as_ref: bool) -> np.ndarray:
        """The temporary numbers of ``phrases`` (the reference or paraphrase of entries
        ``entry0..``)."""
        keys = np.fromiter(map(hash, phrases), dtype=np.int64, count=len(phrases))
        checks = _checks(phrases)
        distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        at = np.searchsorted(self.sorted_keys, distinct)
        known = at < len(self.sorted_keys)
        known[known] = self.sorted_keys[at[known]] == distinct[known]
        numbers = np.empty(len(distinct), dtype=np.int32)
        numbers[known] = self.sorted_ids[at[known]]
        new = np.flatnonzero(~known)  # in key order
        sight = new[np.argsort(first[new], kind="stable")]  # numbered in order of sight
        numbers[sight] = np.arange(len(self.checks), len(self.checks) + len(sight))
        self._add(phrases, first[sight], words, checks, entry0, as_ref)
        self.sorted_keys = np.insert(self.sorted_keys, at[new], distinct[new])
        self.sorted_ids = np.insert(self.sorted_ids, at[new], numbers[new])
        result = numbers[inverse.ravel()]
        if not np.array_equal(self.checks[result], checks):
            raise MetricError(
                "meteor: two paraphrase-table phrases share a 64-bit key; "
                "please report this (the table cannot be built)"
            )
        self._mark_first(result, entry0, as_ref)
        return result

    def _add(
        self,
        phrases: list[str],
        rows: np.ndarray,
        words: _Words,
        checks: np.ndarray,
        entry0: int,
        as_ref: bool,
    ) -> None:
        """Store new phrases (rows of this block, in order of sight)."""
        ids, offsets = words.rows([phrases[r] for r in rows.tolist()])
        self.words.append(ids.astype(np.int32))
        self.lengths.append(np.diff(offsets).astype(np.int32))
        self.checks = np.concatenate((self.checks, checks[rows]))
        unseen = np.full(len(rows), _UNSEEN, dtype=np.int32)
        here = (rows + entry0).astype(np.int32)
        self.first_ref = np.concatenate((self.first_ref, here if as_ref else unseen))
        self.first_par = np.concatenate((self.first_par, unseen if as_ref else here))

    def _mark_first(self, numbers: np.ndarray, entry0: int, as_ref: bool) -> None:
        """Record the first entry in which known phrases appear in this role."""
        target = self.first_ref if as_ref else self.first_par
        unset = np.flatnonzero(target[numbers] == _UNSEEN)
        if len(unset):
            phrase, first = np.unique(numbers[unset], return_index=True)
            target[phrase] = unset[first] + entry0


def _checks(phrases: list[str]) -> np.ndarray:
    """The second key of each phrase: the CRC-32 of its UTF-8 and its length."""
    crcs = np.fromiter(
        map(zlib.crc32, map(str.encode, phrases)), dtype=np.int64, count=len(phrases)
    )
    return (crcs << 31) | np.fromiter(map(len, phrases), dtype=np.int64, count=len(phrases))


def _first_sight(values: np.ndarray, count: int, chunk: int = 1 << 20) -> np.ndarray:
    """The numbers ``0..count-1`` in order of first appearance in ``values`` (all must appear)."""
    first = np.full(count, len(values), dtype=np.int64)
    for start in range(0, len(values), chunk):
        part = values[start : start + chunk]
        fresh = np.flatnonzero(first[part] == len(values))
        if len(fresh):
            ids, at = np.unique(part[fresh], return_index=True)
            first[ids] = fresh[at] + start
    return np.argsort(first, kind="stable")


def _reordered(
    values: np.ndarray, lengths: np.ndarray, order: np.ndarray, chunk: int = 1 << 18
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a ragged array (``values`` split by ``lengths``) taken in ``order`` (offsets,
    values), gathered a chunk of rows at a time to bound the index arrays."""
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths[order], out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=values.dtype)
    for at in range(0, len(order), chunk):
        rows = order[at : at + chunk]
        taken = lengths[rows].astype(np.int64)
        begin, end = offsets[at], offsets[min(at + chunk, len(order))]
        out[begin:end] = values[
            np.repeat(starts[rows] - offsets[at : at + len(rows)], taken) + np.arange(begin, end)
        ]
    return offsets, out


def build_paraphrase_arrays(
    table: Path,
    split_lines: Callable[[str], list[str]],
    normal: Callable[[str], str],
    advance: Callable[[int], None] = lambda n: None,
    between: Callable[[], None] = lambda: None,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read the table: (vocabulary, phrase word offsets, phrase words, each entry's reference
    phrase number, each entry's paraphrase number), numbered as the module docstring says.
    ``between`` is called after each block and before the arrays are put in order."""
    words, phrases = _Words(), _Phrases()
    ref_numbers, par_numbers = [], []
    entries = 0
    try:
        for refs, pars in _entries(table, split_lines, normal, advance):
            ref_numbers.append(phrases.number(refs, words, entries, as_ref=True))
            par_numbers.append(phrases.number(pars, words, entries, as_ref=False))
            entries += len(refs)
            between()
    except (OSError, EOFError, zlib.error) as e:
        raise MetricError(
            f"meteor: cannot read the paraphrase table: {table} is missing or unreadable; "
            f"reinstall pycocoevalcap (pip install --force-reinstall 'capmetrics[coco]') ({e})"
        ) from None
    between()
    rank = np.where(
        phrases.first_ref != _UNSEEN,
        phrases.first_ref.astype(np.int64),
        entries + phrases.first_par.astype(np.int64),
    )
    stored, lengths = (
        np.concatenate(phrases.words or [np.zeros(0, np.int32)]),
        np.concatenate(phrases.lengths or [np.zeros(0, np.int32)]),
    )
    del phrases
    order = np.argsort(rank, kind="stable").astype(
        np.int32
    )  # temporary number of each final phrase
    del rank
    final = np.empty(len(order), dtype=np.int32)
    final[order] = np.arange(len(order), dtype=np.int32)
    offsets, values = _reordered(stored, lengths, order)
    del stored, lengths, order
    word_order = _first_sight(
        values, len(words.number)
    )  # words by first appearance, phrases in order
    renumber = np.empty(len(word_order), dtype=np.int32)
    renumber[word_order] = np.arange(len(word_order), dtype=np.int32)
    by_number = list(words.number)
    vocab = [by_number[i] for i in word_order.tolist()]
    values = renumber[values]
    refs = final[np.concatenate(ref_numbers)] if ref_numbers else np.zeros(0, dtype=np.int32)
    del ref_numbers
    pars = final[np.concatenate(par_numbers)] if par_numbers else np.zeros(0, dtype=np.int32)
    return vocab, offsets, values, refs, pars
