"""Build the paraphrase arrays from ``paraphrase-en.gz`` streaming, in bounded memory, vectorised.

The table is 62 MB gzipped, 272 MB of text, 5.3 million entries (a probability line, a reference
phrase, a paraphrase) over 2.6 million distinct phrases. It is read 256 KB at a time (larger
blocks leave the heap fragmented: 1 MB blocks peaked ~150 MB higher for no less CPU) and only
integer arrays are kept; nothing is done per phrase in Python. Each block of whole entries is
worked on as raw bytes with numpy: its line ends and spaces are found at once, and every phrase
gets a 64-bit key and an independent 32-bit check, polynomial hashes of its bytes (and length)
taken from the block's running sums. Phrases are numbered through a numpy hash table by key, and
checked (a phrase whose key matches a known phrase but not its check is an error, never a silent
merge); only new phrases are split into words, the same way (words keyed and checked like
phrases, only new words decoded to text), and each stores its word numbers once.

Blocks whose text is not plain (a character below the space other than the line end, two spaces
in a row, a space at a line's start or end, or UTF-8 that does not decode) are read as text
instead: split into lines as Java reads them, each phrase normalised with ``normal`` (Java's
StringTokenizer splits on space, tab, newline, carriage return and form feed), and written back as
plain bytes for the same vectorised steps. The table pycocoevalcap installs has no such block.

The arrays are the same, byte for byte, as numbering phrases by first appearance among all
reference phrases in file order, then among the paraphrases, and words by first appearance in those
phrases (the layout ``_resources`` documents): the stream numbers them as they come, and the
numbers are put in that order at the end.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
from capmetrics.errors import MetricError

#: Decompressed bytes read at a time.
BLOCK = 256 << 10
_UNSEEN = np.iinfo(np.int32).max
_NL, _SPACE = 10, 32
#: The key's and the check's multipliers (odd, so invertible) and the multiples of the length
#: each adds (the key is taken modulo 2**64, the check modulo 2**32).
_KEY_BASE, _KEY_STEP = 0x9E3779B97F4A7C15, 0x165667B19E3779F9
_CHECK_BASE, _CHECK_STEP = 0xC2B2AE3D, 0x27D4EB2F
#: A start position's inverse power is a product of two table entries: its low bits and the rest.
_LOW_BITS = 12
#: Hash table slots: a key's first slot is the top bits of ``key * _SPREAD``.
_SPREAD = 0xD6E8FEB86659FD93
_MIN_SLOT_BITS = 12
#: Growing columns start at 8 MiB, each its own mapping from the start (pages not written to
#: take no memory).
_MIN_COLUMN_BYTES = 8 << 20
_LOW32 = 0xFFFFFFFF
#: The items of a lookup left when they are probed one at a time.
_FEW = 64


def _signed(value: int, bits: int = 64) -> int:
    """A number modulo ``2**bits`` as a signed integer of that width (numpy's int64 and int32
    arithmetic wraps around, and is faster than its unsigned)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _powers(base: int, count: int, dtype: type = np.int64) -> np.ndarray:
    """``base ** i`` modulo 2**64 (2**32 for int32) for ``i < count``."""
    bits = np.dtype(dtype).itemsize * 8
    out = np.full(max(count, 1), _signed(base, bits), dtype=dtype)
    out[0] = 1
    return np.multiply.accumulate(out, out=out)


class _Lane:
    """Polynomial hashes of byte ranges of a block: ``sum(b[j] * base**j) + length * step``
    over a range's bytes ``b``, modulo 2**64 or 2**32 (``dtype``), from the block's running sums
    of ``byte * base**position``."""

    def __init__(self, base: int, step: int, dtype: type) -> None:
        self.base, self.dtype = base, dtype
        bits = np.dtype(dtype).itemsize * 8
        self.step = dtype(_signed(step, bits))
        inverse = pow(base, -1, 1 << bits)
        self.inverse_low = _powers(inverse, 1 << _LOW_BITS, dtype)
        self.inverse_step = pow(inverse, 1 << _LOW_BITS, 1 << bits)
        self.powers = self.inverse_high = self.sums = np.zeros(0, dtype=dtype)

    def load(self, data: np.ndarray) -> None:
        """Take the running sums of a block's bytes."""
        n = len(data)
        if len(self.powers) < n:
            size = n + (n >> 3)  # a longer block (a long carried line) grows them again
            self.powers = _powers(self.base, size, self.dtype)
            self.inverse_high = _powers(self.inverse_step, (size >> _LOW_BITS) + 1, self.dtype)
            self.sums = np.empty(size + 1, dtype=self.dtype)
        self.sums[0] = 0
        run = self.sums[1 : n + 1]
        np.multiply(data, self.powers[:n], out=run)
        np.cumsum(run, out=run)

    def of(
        self, starts: np.ndarray, ends: np.ndarray, low: np.ndarray, high: np.ndarray
    ) -> np.ndarray:
        """The hashes of the ranges ``starts[i]:ends[i]`` (``low`` and ``high``: the low bits of
        the starts and the rest)."""
        key = self.sums[ends]
        key -= self.sums[starts]
        key *= self.inverse_low[low]
        key *= self.inverse_high[high]
        key += (ends - starts).astype(self.dtype) * self.step
        return key


class _Keys:
    """Each byte range's key (64 bits) and check (32 bits, independent of the key)."""

    def __init__(self) -> None:
        self.key = _Lane(_KEY_BASE, _KEY_STEP, np.int64)
        self.check = _Lane(_CHECK_BASE, _CHECK_STEP, np.int32)

    def load(self, data: np.ndarray) -> None:
        self.key.load(data)
        self.check.load(data)

    def of(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        low, high = starts & ((1 << _LOW_BITS) - 1), starts >> _LOW_BITS
        return self.key.of(starts, ends, low, high), self.check.of(starts, ends, low, high)


class _Column:
    """A growing array (amortised appends)."""

    def __init__(self, dtype: type) -> None:
        self.data = np.empty(_MIN_COLUMN_BYTES // np.dtype(dtype).itemsize, dtype=dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > len(self.data):
            grown = np.empty(max(end, 2 * len(self.data)), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : end] = values
        self.size = end

    @property
    def values(self) -> np.ndarray:
        return self.data[: self.size]


class _Chunks:
    """An int32 column in chunks of 8 MiB (each its own mapping: appending neither copies nor
    leaves holes in the heap between the blocks' temporary arrays)."""

    SIZE = 1 << 21

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.used = self.SIZE

    def extend(self, values: np.ndarray) -> None:
        while len(values):
            if self.used == self.SIZE:
                self.chunks.append(np.empty(self.SIZE, dtype=np.int32))
                self.used = 0
            take = min(len(values), self.SIZE - self.used)
            self.chunks[-1][self.used : self.used + take] = values[:take]
            self.used += take
            values = values[take:]

    def __len__(self) -> int:
        return len(self.chunks) * self.SIZE - (self.SIZE - self.used)

    def pop(self, through: np.ndarray | None = None) -> np.ndarray:
        """The values (mapped ``through`` an array), freeing each chunk once copied."""
        out = np.empty(len(self), dtype=np.int32)
        at = 0
        while self.chunks:
            chunk = self.chunks.pop(0)
            part = chunk[: min(self.SIZE, len(out) - at)]
            out[at : at + len(part)] = part if through is None else through[part]
            at += len(part)
            del chunk, part
        self.used = self.SIZE
        return out


class _Table:
    """Distinct byte strings by key, numbered in order of arrival, each with its check: an
    open-addressing hash table (triangular probing: the 1st, 3rd, 6th... slot after the first)
    for many keys at once. A slot is 16 bytes: the
    key, and the number plus one (0: a free slot) above the check."""

    def __init__(self, what: str, bits: int = _MIN_SLOT_BITS) -> None:
        self.what = what
        self.count = 0
        self._allocate(bits)

    def __len__(self) -> int:
        return self.count

    def _allocate(self, bits: int) -> None:
        self.shift = 64 - bits
        self.slots = np.zeros(1 << bits, dtype=np.complex128)  # 16-byte cells, read as int64s
        self.cells = self.slots.view(np.int64)

    def _first_slots(self, keys: np.ndarray) -> np.ndarray:
        """Each key's first slot: the top bits of ``key * _SPREAD``."""
        slots = keys * np.int64(_signed(_SPREAD))
        slots >>= self.shift
        slots &= len(self.slots) - 1
        return slots

    def _one_by_one(
        self,
        todo: np.ndarray,
        keys: np.ndarray,
        checks: np.ndarray,
        slots: np.ndarray,
        steps: np.ndarray,
        numbers: np.ndarray,
        won_by: list[np.ndarray],
    ) -> None:
        """:meth:`number`'s last few items, probed one at a time (each probing round of the
        vectorised loop costs a few dozen numpy calls, however few items are left)."""
        cells, last, new = self.cells, len(self.slots) - 1, []
        for item, key, check, slot, step in zip(
            todo.tolist(), keys.tolist(), checks.tolist(), slots.tolist(), steps.tolist()
        ):
            while True:
                word = int(cells[2 * slot + 1])
                if not word:
                    cells[2 * slot] = key
                    cells[2 * slot + 1] = ((self.count + 1) << 32) | check
                    numbers[item] = self.count
                    self.count += 1
                    new.append(item)
                    break
                if int(cells[2 * slot]) == key:
                    if word & _LOW32 != check:
                        raise MetricError(
                            f"meteor: two paraphrase-table {self.what} share a 64-bit key; "
                            "please report this (the table cannot be built)"
                        )
                    numbers[item] = (word >> 32) - 1
                    break
                step += 1
                slot = (slot + step) & last
        if new:
            won_by.append(np.asarray(new, dtype=np.int64))

    def _claim(self, slots: np.ndarray, claimants: np.ndarray) -> np.ndarray:
        """Of claimants (distinct non-negative) of free slots, which win (one of each slot)."""
        marks = claimants + 1
        self.cells[2 * slots + 1] = marks
        return self.cells[2 * slots + 1] == marks

    def _reserve(self, more: int) -> None:
        """Grow (keeping the table at most half full) if ``more`` keys might not fit."""
        if 4 * (self.count + more) <= 3 * len(self.slots):
            return
        bits = max(_MIN_SLOT_BITS, (2 * (self.count + more) - 1).bit_length())
        held = self.slots[self.cells[1::2] != 0].view(np.int64)
        keys, words = held[0::2].copy(), held[1::2].copy()
        del held
        self._allocate(bits)
        last = len(self.slots) - 1
        todo, slots = np.arange(len(keys)), self._first_slots(keys)
        steps = np.zeros(len(keys), dtype=np.int64)
        while len(todo):  # distinct keys: each takes a free slot
            free = self.cells[2 * slots + 1] == 0
            claim, at = todo[free], slots[free]
            won = self._claim(at, claim)
            claim, at = claim[won], at[won]
            self.cells[2 * at], self.cells[2 * at + 1] = keys[claim], words[claim]
            placed = np.zeros(len(keys), dtype=bool)
            placed[claim] = True
            keep = ~placed[todo]
            todo, slots, steps = todo[keep], slots[keep], steps[keep]
            steps += 1
            slots += steps
            slots &= last

    def number(self, keys: np.ndarray, checks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The numbers of the strings with keys ``keys`` and checks ``checks``, and the items
        that were new (one of each new string, in number order: new strings are numbered from
        ``len(self)``)."""
        self._reserve(len(keys))
        last = len(self.slots) - 1
        checks = checks.astype(np.int64) & _LOW32
        numbers = np.empty(len(keys), dtype=np.int32)
        todo, slots = np.arange(len(keys)), self._first_slots(keys)
        steps = np.zeros(len(keys), dtype=np.int64)
        won_by: list[np.ndarray] = []  # the item that brought each new string, in number order
        cells = self.cells
        while len(todo):
            if len(todo) <= _FEW:
                self._one_by_one(todo, keys, checks, slots, steps, numbers, won_by)
                break
            where = slots * 2
            held, words = cells[where], cells[where + 1]
            del where
            hit = np.flatnonzero((held == keys) & (words != 0))
            if len(hit):
                found = words[hit]
                if not np.array_equal(found & _LOW32, checks[hit]):
                    raise MetricError(
                        f"meteor: two paraphrase-table {self.what} share a 64-bit key; "
                        "please report this (the table cannot be built)"
                    )
                found >>= 32
                found -= 1
                numbers[todo[hit]] = found
            free = np.flatnonzero(words == 0)
            done = np.zeros(len(todo), dtype=bool)
            done[hit] = True
            if len(free):
                claim, at = todo[free], slots[free]
                won = self._claim(at, claim)
                won_at = free[won]
                claim, at = claim[won], at[won]
                fresh = np.arange(self.count, self.count + len(claim), dtype=np.int64)
                cells[2 * at] = keys[won_at]
                cells[2 * at + 1] = ((fresh + 1) << 32) | checks[won_at]
                numbers[claim] = fresh
                won_by.append(claim)
                self.count += len(claim)
                done[won_at] = True  # the others look at that slot again: maybe their key
            keep = np.flatnonzero(~done)
            move = words[keep] != 0  # a slot held by another key: probe on
            todo, slots, steps = todo[keep], slots[keep], steps[keep]
            keys, checks = keys[keep], checks[keep]
            steps[move] += 1
            slots[move] += steps[move]
            slots &= last
        return numbers, np.concatenate(won_by) if won_by else np.zeros(0, dtype=np.int64)


class _Block(NamedTuple):
    """Whole entries as plain bytes: the text, its separators (line ends and spaces, in order)
    and which of them are the line ends."""

    text: bytes
    data: np.ndarray
    separators: np.ndarray
    line_ends: np.ndarray


def _plain(region: bytes, cuts: np.ndarray, kinds: np.ndarray) -> bool:
    """Whether ``region`` (whole lines) is plain: lines of single-space-separated words, UTF-8."""
    if not np.all((kinds == _NL) | (kinds == _SPACE)):
        return False
    spaces = kinds == _SPACE
    if len(cuts) and cuts[0] == 0 and spaces[0]:
        return False
    if np.any((np.diff(cuts) == 1) & (spaces[1:] | spaces[:-1])):
        return False
    if not region.isascii():
        try:
            region.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def _block_of(text: bytes) -> _Block:
    """A plain block of whole entries."""
    data = np.frombuffer(text, dtype=np.uint8)
    cuts = np.flatnonzero(data <= _SPACE)
    kinds = data[cuts]
    keep = (kinds == _NL) | (kinds == _SPACE)
    return _Block(text, data, cuts[keep], np.flatnonzero(kinds[keep] == _NL))


def _whole_entries(
    region: bytes,
    split_lines: Callable[[str], list[str]],
    normal: Callable[[str], str],
) -> tuple[_Block | None, bytes]:
    """The whole entries of ``region`` (whole lines) as a plain block, and the lines left over."""
    data = np.frombuffer(region, dtype=np.uint8)
    cuts = np.flatnonzero(data <= _SPACE)
    kinds = data[cuts]
    if _plain(region, cuts, kinds):
        ends = np.flatnonzero(kinds == _NL)
        whole = len(ends) - len(ends) % 3
        if not whole:
            return None, region
        last = int(ends[whole - 1])
        cut = int(cuts[last]) + 1
        return _Block(region[:cut], data[:cut], cuts[: last + 1], ends[:whole]), region[cut:]
    lines = split_lines(region.decode("utf-8", "replace"))
    whole = len(lines) - len(lines) % 3
    left = "".join(line + "\n" for line in lines[whole:]).encode("utf-8")
    if not whole:
        return None, left
    refs, pars = (normal(p) for p in lines[1:whole:3]), (normal(p) for p in lines[2:whole:3])
    text = "".join(f"\n{r}\n{p}\n" for r, p in zip(refs, pars)).encode("utf-8")
    return _block_of(text), left


def _blocks(
    table: Path,
    split_lines: Callable[[str], list[str]],
    normal: Callable[[str], str],
    advance: Callable[[int], None],
) -> Iterator[_Block]:
    """The table's whole entries, a block at a time; ``advance`` gets the compressed bytes
    read."""
    raw = table.open("rb")
    with raw, gzip.GzipFile(fileobj=raw) as f:
        carry, read, end = b"", 0, False
        while not end:
            block = f.read(BLOCK)
            advance(raw.tell() - read)
            read = raw.tell()
            if not block:  # the last line may have no line end
                end = True
                block = b"" if not carry or carry.endswith(b"\n") else b"\n"
            data = carry + block
            cut = data.rfind(b"\n") + 1
            if not cut:
                carry = data
                continue
            entries, left = _whole_entries(data[:cut], split_lines, normal)
            carry = left + data[cut:]
            if entries is not None:
                yield entries


class _Builder:
    """The phrases and words of the table so far (temporary numbers, put in order at the end)."""

    def __init__(self) -> None:
        self.keys = _Keys()
        # millions of phrases (fewer early rebuilds from a larger start), tens of thousands of words
        self.phrases, self.words = _Table("phrases", 20), _Table("words")
        self.vocab: list[str] = []
        self.first_ref, self.first_par = _Column(np.int32), _Column(np.int32)
        self.phrase_words, self.phrase_lengths = _Chunks(), _Chunks()
        self.refs, self.pars = _Chunks(), _Chunks()
        self.entries = 0

    def add(self, block: _Block) -> None:
        """Number the phrases of a block's entries."""
        self.keys.load(block.data)
        seps, ends = block.separators, block.line_ends
        count = len(ends) // 3
        before = np.concatenate((ends[0::3], ends[1::3]))  # each phrase's line end before it
        after = np.concatenate((ends[1::3], ends[2::3]))  # (as numbers of separators)
        starts, stops = seps[before] + 1, seps[after]
        keys, checks = self.keys.of(starts, stops)
        # a reference phrase is usually the one before (the table is sorted by them): only the
        # first of each run is looked up
        head = np.ones(len(keys), dtype=bool)
        np.not_equal(keys[1:count], keys[: count - 1], out=head[1:count])
        rest = np.flatnonzero(~head)
        if not np.array_equal(checks[rest], checks[rest - 1]):
            raise MetricError(
                "meteor: two paraphrase-table phrases share a 64-bit key; "
                "please report this (the table cannot be built)"
            )
        heads = np.flatnonzero(head)
        known = len(self.phrases)
        numbers, new = self.phrases.number(keys[heads], checks[heads])
        if len(new):
            new = heads[new]
            self._new_phrases(block, before[new], after[new], starts[new] == stops[new])
            unseen = np.full(len(self.phrases) - known, _UNSEEN, dtype=np.int32)
            self.first_ref.extend(unseen)
            self.first_par.extend(unseen)
        ref_heads = heads[heads < count]
        numbers_of_heads = numbers
        numbers = numbers[np.cumsum(head) - 1]
        # the first entry in which each phrase is a reference; for a phrase new here, also the
        # first in which it is a paraphrase (only used for phrases never a reference: those are
        # first seen as a paraphrase, so in the block where they are new)
        part = numbers_of_heads[: len(ref_heads)]
        unset = np.flatnonzero(self.first_ref.values[part] == _UNSEEN)
        if len(unset):
            phrase, first = np.unique(part[unset], return_index=True)
            self.first_ref.values[phrase] = ref_heads[unset[first]] + self.entries
        part = numbers[count:]
        fresh = np.flatnonzero(part >= known)
        if len(fresh):
            phrase, first = np.unique(part[fresh], return_index=True)
            self.first_par.values[phrase] = fresh[first] + self.entries
        self.entries += count
        self.refs.extend(numbers[:count])
        self.pars.extend(numbers[count:])

    def _new_phrases(
        self, block: _Block, before: np.ndarray, after: np.ndarray, empty: np.ndarray
    ) -> None:
        """Split new phrases (in number order; each between the separators numbered ``before``
        and ``after``, line ends) into words: the ranges between consecutive separators."""
        lengths = np.where(empty, 0, after - before)
        offsets = np.cumsum(lengths)
        total = int(offsets[-1])
        offsets -= lengths
        at = np.repeat(before - offsets, lengths)
        at += np.arange(total)
        seps = block.separators
        begin, end = seps[at] + 1, seps[at + 1]
        ids, new = self.words.number(*self.keys.of(begin, end))
        if len(new):
            text = block.text
            self.vocab += [
                text[b:e].decode("utf-8") for b, e in zip(begin[new].tolist(), end[new].tolist())
            ]
        self.phrase_words.extend(ids)
        self.phrase_lengths.extend(lengths)


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
    built = _Builder()
    try:
        for block in _blocks(table, split_lines, normal, advance):
            built.add(block)
            between()
    except (OSError, EOFError, zlib.error) as e:
        raise MetricError(
            f"meteor: cannot read the paraphrase table: {table} is missing or unreadable; "
            f"reinstall pycocoevalcap (pip install --force-reinstall 'capmetrics[coco]') ({e})"
        ) from None
    between()
    entries, vocab_seen, first_ref, first_par = (
        built.entries,
        built.vocab,
        built.first_ref,
        built.first_par,
    )
    words, lengths, refs_seen, pars_seen = (
        built.phrase_words,
        built.phrase_lengths,
        built.refs,
        built.pars,
    )
    del built  # the hash tables and the keys' arrays
    rank = first_par.values.astype(np.int64)  # never a reference: after all the references
    del first_par
    rank += entries
    seen = first_ref.values != _UNSEEN
    rank[seen] = first_ref.values[seen]
    del first_ref, seen
    lengths = lengths.pop()
    order = np.argsort(rank, kind="stable").astype(np.int32)  # temporary number of each phrase
    del rank
    final = np.empty(len(order), dtype=np.int32)
    final[order] = np.arange(len(order), dtype=np.int32)
    refs, pars = refs_seen.pop(final), pars_seen.pop(final)
    del final
    offsets, values = _reordered(words.pop(), lengths, order)
    del words, lengths, order
    word_order = _first_sight(values, len(vocab_seen))  # words by first appearance in order
    renumber = np.empty(len(word_order), dtype=np.int32)
    renumber[word_order] = np.arange(len(word_order), dtype=np.int32)
    vocab = [vocab_seen[i] for i in word_order.tolist()]
    np.take(renumber, values, out=values)
    return vocab, offsets, values, refs, pars
