"""Vectorised machinery shared by BLEU, ROUGE-L and CIDEr.

Texts are deduplicated and tokenised once, tokens become integer ids and n-grams dense integer
ids (built order by order, so keys never overflow). A :class:`Batch` holds the items to score:
each item is one candidate sentence and a reference set; identical reference sets are stored
once. :func:`match` joins every candidate n-gram of every item with its count in each reference
of the item's set, which is all that BLEU and CIDEr need. :class:`BatchDistance` is the base
of the three metrics: per-item values for ``score``, per-reference values for ``pairwise``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, repeat
from typing import Any

import numpy as np
from capmetrics.components.base import Distance, Scores, Tokenizer
from capmetrics.engine.prepared import shared_for
from capmetrics.errors import MetricError
from capmetrics.plugins.tokenizers import PTBTokenizer, WhitespaceTokenizer

Split = Callable[[str], list[str]]

#: The default tokenizer of the metrics: coco-caption's PTB tokenisation.
PTB = PTBTokenizer()


def expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + counts[i])`` over i."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(counts) - counts)
    return np.arange(total, dtype=np.int64) + np.repeat(shift, counts)


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of non-negative int keys: below 2^32, as one or two
    passes of 16-bit digits (NumPy sorts 16-bit integers by radix sort, ~3x faster than the
    merge sort it uses for wider ones; stable passes from the lowest digit give the same order)."""
    if len(keys) == 0 or keys.min() < 0:
        return np.argsort(keys, kind="stable")
    top = int(keys.max())
    if top < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if top < 1 << 32:
        low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]
    return np.argsort(keys, kind="stable")


def unique(
    keys: np.ndarray, index: bool = False, inverse: bool = False, counts: bool = False
) -> tuple[np.ndarray, ...]:
    """``np.unique`` of an int array with a stable sort: the sorted distinct keys, then (as
    asked) the position of each key's first occurrence, the inverse and the counts (ordered by
    :func:`stable_argsort`)."""
    order = stable_argsort(keys)
    ordered = keys[order]
    new = np.empty(len(ordered), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    out: list[np.ndarray] = [ordered[starts]]
    if index:
        out.append(order[starts])
    if inverse:
        inv = np.empty(len(keys), dtype=np.int64)
        inv[order] = np.cumsum(new) - 1
        out.append(inv)
    if counts:
        out.append(np.diff(np.append(starts, len(ordered))))
    return tuple(out)


@dataclass(frozen=True)
class Sentences:
    """Tokenised sentences as one flat array of integer token ids."""

    ids: np.ndarray
    offsets: np.ndarray
    vocab: list[str]

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @cached_property
    def ngram_tables(self) -> NgramTables:
        """Its n-gram tables, built order by order on demand (see :func:`ngrams`)."""
        return NgramTables(self)

    def tokens(self, i: int) -> np.ndarray:
        """Token ids of sentence i."""
        return self.ids[self.offsets[i] : self.offsets[i + 1]]


def encode(token_lists: Sequence[Sequence[str]], vocab: dict[str, int] | None = None) -> Sentences:
    """Map tokens to integer ids (in order of first appearance; ``vocab``, if given, holds the
    ids given already and receives the new ones)."""
    flat = list(chain.from_iterable(token_lists))
    vocab = {} if vocab is None else vocab
    # one pass: a token new to ``vocab`` gets its size so far as its id
    ids = np.fromiter(map(vocab.setdefault, flat, map(len, repeat(vocab))), np.int64, len(flat))
    offsets = np.zeros(len(token_lists) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, token_lists), np.int64, len(token_lists)), out=offsets[1:])
    return Sentences(ids, offsets, list(vocab))


@dataclass(frozen=True)
class Batch:
    """Items to score, each one candidate sentence against one reference set.

    ``cand[i]`` is the sentence of item i's candidate and ``refset[i]`` its reference set;
    row q of ``slots`` lists the sentences of reference set q, padded with -1.
    """

    sentences: Sentences
    cand: np.ndarray
    refset: np.ndarray
    slots: np.ndarray

    def __len__(self) -> int:
        return len(self.cand)

    @property
    def width(self) -> int:
        """Slots per reference set (the largest number of references)."""
        return self.slots.shape[1]

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Per-batch results that metrics sharing the batch reuse (keyed by the metric's kind)."""
        return {}

    @cached_property
    def item_slots(self) -> np.ndarray:
        """Sentence of each item's j-th reference, -1 past its last one (n_items x width)."""
        return self.slots[self.refset]

    @cached_property
    def n_refs(self) -> np.ndarray:
        """Number of references of each item."""
        return (self.item_slots >= 0).sum(axis=1)

    @cached_property
    def ref_lengths(self) -> np.ndarray:
        """Token count of each item's j-th reference (0 for padding)."""
        slots = self.item_slots
        return np.where(slots >= 0, self.sentences.lengths[np.maximum(slots, 0)], 0)

    @cached_property
    def cand_lengths(self) -> np.ndarray:
        return self.sentences.lengths[self.cand]


def _tokenize(tokenizer: Tokenizer, texts: dict[str, int], split: Split) -> Sentences:
    """Tokenise the deduplicated texts the way coco-caption's scorers see them."""
    if tokenizer.whitespace_free_tokens and split is BatchDistance.split:
        return encode(tokenizer.tokenize_shared(list(texts)))  # joining and splitting is a no-op
    return encode([split(t) for t in tokenizer.tokenize_joined(list(texts))])


def _index(keys: Sequence[Any]) -> tuple[dict[Any, int], np.ndarray]:
    """Distinct keys (in order of first appearance) and the index of each key among them."""
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return index, np.fromiter(map(index.__getitem__, keys), np.int64, len(keys))


def _check(candidates: Sequence[str], references: Sequence[Sequence[str]], metric: str) -> None:
    if len(candidates) != len(references):
        raise MetricError(
            f"{metric}: {len(candidates)} candidates but {len(references)} reference lists"
        )
    if (
        set(map(type, candidates)) <= {str}
        and str not in set(map(type, references))
        and all(references)
    ):
        return
    bad = [
        i
        for i, (c, r) in enumerate(zip(candidates, references))
        if not isinstance(c, str) or isinstance(r, str) or len(r) == 0
    ]
    if not bad:  # str subclasses (numpy's str_) are strings
        return
    raise MetricError(
        f"{metric}: item(s) {bad[:10]} need a candidate string and a non-empty list of reference "
        "strings"
    )


def make_batch(
    tokenizer: Tokenizer,
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    split: Split,
    metric: str,
    refset: np.ndarray | None = None,
) -> Batch:
    """Validate and tokenise ``candidates[i]`` with ``references[i]`` for every i, or, given
    ``refset``, with ``references[refset[i]]`` (reference lists shared by several candidates)."""
    if refset is None:
        _check(candidates, references, metric)
        sets, refset = _index(list(map(tuple, references)))
    else:
        _check(candidates, [references[q] for q in refset.tolist()], metric)
        sets = list(map(tuple, references))
    texts, cand = _index(list(chain(candidates, chain.from_iterable(sets))))
    width = max(map(len, sets), default=1)
    slots = np.full((len(sets), width), -1, dtype=np.int64)
    for q, refs in enumerate(sets):
        slots[q, : len(refs)] = [texts[t] for t in refs]
    return Batch(_tokenize(tokenizer, texts, split), cand[: len(candidates)], refset, slots)


def make_id_batch(
    ids: np.ndarray,
    lengths: np.ndarray,
    words: np.ndarray,
    references: Sequence[Sequence[str]],
    refset: np.ndarray,
    metric: str,
) -> Batch:
    """Candidates as token ids (``ids`` flat, ``lengths`` per candidate) of the whitespace-free
    ``words``, against reference texts split on whitespace: candidate i against
    ``references[refset[i]]``. The batch :func:`make_batch` makes of the space-joined words with
    a whitespace tokenizer, but no text is made or split on the candidates' side."""
    bad = [
        q
        for q, refs in enumerate(references)
        if isinstance(refs, str)
        or not refs
        or not (set(map(type, refs)) <= {str} or all(isinstance(t, str) for t in refs))
    ]
    if bad:
        raise MetricError(
            f"{metric}: reference list(s) {bad[:10]} need to be non-empty lists of strings"
        )
    vocab: dict[str, int] = {}
    refs = encode([t.split() for t in chain.from_iterable(references)], vocab)
    used = np.flatnonzero(np.bincount(ids, minlength=len(words)))
    to_batch = np.zeros(len(words), dtype=np.int64)  # word id -> id in the batch's vocabulary
    to_batch[used] = np.fromiter(
        map(vocab.setdefault, words[used].tolist(), map(len, repeat(vocab))), np.int64, len(used)
    )
    n = len(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    sentences = Sentences(
        np.concatenate([to_batch[ids], refs.ids]),
        np.concatenate([offsets, offsets[-1] + refs.offsets[1:]]),
        list(vocab),
    )
    sizes = np.fromiter(map(len, references), np.int64, len(references))
    slots = np.full((len(references), max(sizes, default=1)), -1, dtype=np.int64)
    slots[np.arange(slots.shape[1]) < sizes[:, None]] = n + np.arange(len(refs))
    return Batch(sentences, np.arange(n, dtype=np.int64), np.asarray(refset, dtype=np.int64), slots)


def make_pairwise_batch(
    tokenizer: Tokenizer, a: Sequence[str], b: Sequence[str], split: Split
) -> Batch:
    """Every ``a[i]`` as a candidate against the single reference set ``b``: the per-slot
    values of this batch are the pairwise values (a_i, [b_j])."""
    texts: dict[str, int] = {}
    cand = [texts.setdefault(t, len(texts)) for t in a]
    slots = np.array([[texts.setdefault(t, len(texts)) for t in b]], dtype=np.int64)
    return Batch(
        _tokenize(tokenizer, texts, split),
        np.array(cand, dtype=np.int64),
        np.zeros(len(cand), dtype=np.int64),
        slots,
    )


# ---------------------------------------------------------------------------------------------
# n-grams
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ngrams:
    """The distinct n-grams of one order in every sentence, with their counts.

    Entries are sorted by sentence, then by the n-gram's first position in it (so an item's sums do
    not depend on the rest of the batch); ``starts[s]:starts[s + 1]`` are sentence s's entries.
    ``first[g]`` is a flat token position where n-gram g occurs.
    """

    order: int
    sent: np.ndarray
    gram: np.ndarray
    count: np.ndarray
    starts: np.ndarray
    n_grams: int
    first: np.ndarray

    def strings(self, sentences: Sentences) -> np.ndarray:
        """Each n-gram id's tokens joined by single spaces (an object array)."""
        vocab = np.array(sentences.vocab + [""], dtype=object)
        out = vocab[sentences.ids[self.first]]
        for t in range(1, self.order):
            out = out + " " + vocab[sentences.ids[self.first + t]]
        return out


def ngrams(sentences: Sentences, max_n: int) -> list[Ngrams]:
    """The n-grams of orders 1..max_n of every sentence (contiguous windows), built once per
    ``sentences`` and order: metrics sharing a batch (BLEU-1..4, CIDEr-D) share the tables."""
    return sentences.ngram_tables.upto(max_n)


class NgramTables:
    """The n-gram tables of one :class:`Sentences`, each order built when first asked for.

    One stable sort per order: the windows sorted by key (the (n-1)-gram id and the last token)
    are grouped by n-gram, each group in token order, so a sentence's occurrences of an n-gram
    are adjacent there too."""

    def __init__(self, sentences: Sentences) -> None:
        self.ids, self.n_sent, self.n_vocab = sentences.ids, len(sentences), len(sentences.vocab)
        n_tok = len(self.ids)
        self.sent_of = np.repeat(np.arange(self.n_sent, dtype=np.int64), sentences.lengths)
        self.room = sentences.offsets[1:][self.sent_of] - np.arange(
            n_tok
        )  # tokens left from each position
        self.gram_at = np.zeros(
            n_tok, dtype=np.int64
        )  # the id of the last order's n-gram at each position
        self.tables: list[Ngrams] = []

    def upto(self, max_n: int) -> list[Ngrams]:
        while len(self.tables) < max_n:
            self.tables.append(self._next())
        return self.tables[:max_n]

    def _next(self) -> Ngrams:
        k, ids, sent_of = len(self.tables) + 1, self.ids, self.sent_of
        pos = np.flatnonzero(self.room >= k)
        key = self.gram_at[pos] * self.n_vocab + ids[pos + k - 1]
        order = stable_argsort(key)
        ordered, at = key[order], pos[order]  # windows by n-gram, then position
        sent = sent_of[at]
        new_gram = np.empty(len(pos), dtype=bool)
        new_gram[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=new_gram[1:])
        new_entry = new_gram.copy()  # a new n-gram, or the same one in the next sentence
        new_entry[1:] |= sent[1:] != sent[:-1]
        gram_at = self.gram_at = np.empty(
            len(ids), dtype=np.int64
        )  # the id of the k-gram at each position
        gram_at[at] = np.cumsum(new_gram) - 1
        starts = np.flatnonzero(new_entry)
        # a sentence's entries in order of first occurrence, not of n-gram id (which depends on
        # the other texts of the batch): sums over them give the same bits in any batch
        count = np.zeros(len(ids), dtype=np.int64)
        count[at[starts]] = np.diff(np.append(starts, len(pos)))
        first = np.flatnonzero(count)  # the position of each entry's first occurrence
        entry_sent = sent_of[first]
        n_grams = len(starts) and int(gram_at[at[-1]]) + 1
        return Ngrams(
            k,
            entry_sent,
            gram_at[first],
            count[first],
            np.searchsorted(entry_sent, np.arange(self.n_sent + 1)),
            n_grams,
            at[new_gram],
        )


@dataclass(frozen=True)
class Matches:
    """Every n-gram of every item's candidate, with its count in each of the item's references.

    ``ref_counts[e, j]`` is the count of entry e's n-gram in the item's j-th reference (0 when
    absent or past the last reference); ``matched`` lists the entries with a count in some
    reference, ``table`` the table (order) of each entry. ``set_of`` and ``gram_of`` (when
    asked for) are the distinct (reference set, n-gram) pairs, for document frequencies.
    """

    item: np.ndarray
    gram: np.ndarray
    count: np.ndarray
    ref_counts: np.ndarray
    matched: np.ndarray
    table: np.ndarray
    set_of: np.ndarray | None = None
    gram_of: np.ndarray | None = None

    def per_item(self, values: np.ndarray, n_items: int) -> np.ndarray:
        """Sum of per-entry values by item; ``values`` is (entries,) or (entries, width)."""
        if values.ndim == 1:
            return np.bincount(self.item, values, minlength=n_items)
        width = values.shape[1]
        index = (self.item[:, None] * width + np.arange(width)).ravel()
        return np.bincount(index, values.ravel(), minlength=n_items * width).reshape(n_items, width)


def match(batch: Batch, tables: Ngrams | Sequence[Ngrams], set_grams: bool = False) -> Matches:
    """Join each item's candidate n-grams with the n-gram counts of its references.

    Given several tables (orders), they are joined in one pass: n-gram ids are then global,
    table k's ids shifted by the sizes of the tables before it (see :func:`gram_offsets`).
    Only n-grams that occur on both sides take part in the join, unless ``set_grams`` asks
    for every (reference set, n-gram) pair.
    """
    tables = [tables] if isinstance(tables, Ngrams) else list(tables)
    offsets = gram_offsets(tables)
    g = max(int(offsets[-1]), 1)
    grams = np.concatenate([t.gram + off for t, off in zip(tables, offsets)])
    counts_all = np.concatenate([t.count for t in tables])
    entry_offsets = np.cumsum([0] + [len(t.gram) for t in tables])

    def entries(sent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Entries of each sentence in ``sent``, table by table: (entry index, entries per
        sentence)."""
        starts = np.concatenate([t.starts[sent] + off for t, off in zip(tables, entry_offsets)])
        n = np.concatenate([t.starts[sent + 1] - t.starts[sent] for t in tables])
        return expand_ranges(starts, n), n

    k = len(tables)
    set_idx, slot_idx = np.nonzero(batch.slots >= 0)
    e, n_entries = entries(batch.slots[set_idx, slot_idx])
    ref_set = np.repeat(np.tile(set_idx, k), n_entries)
    ref_slot = np.repeat(np.tile(slot_idx, k), n_entries)
    ce, c_entries = entries(batch.cand)
    item = np.repeat(np.tile(np.arange(len(batch), dtype=np.int64), k), c_entries)
    shared = np.zeros(g, dtype=bool)  # the n-grams of both candidates and references
    shared[grams[ce]] = True
    in_refs = np.zeros(g, dtype=bool)
    in_refs[grams[e]] = True
    shared &= in_refs
    if not set_grams:
        keep = shared[grams[e]]
        e, ref_set, ref_slot = e[keep], ref_set[keep], ref_slot[keep]
    # the candidates' n-grams, one block per item and table
    ref_counts = np.zeros((len(ce), batch.width), dtype=np.int64)
    asked = np.flatnonzero(shared[grams[ce]])
    c_keys = batch.refset[item[asked]] * g + grams[ce[asked]]
    r_keys = ref_set * g + grams[e]
    table = np.repeat(np.arange(k), c_entries.reshape(k, -1).sum(axis=1))
    found = (item, grams[ce], counts_all[ce], ref_counts)
    if set_grams:
        # the reference sets' n-grams: one row per (set, n-gram), one column per slot
        set_keys, row = unique(r_keys, inverse=True)
        counts = np.zeros((len(set_keys), batch.width), dtype=np.int64)
        counts[row, ref_slot] = counts_all[e]
        matched = asked[:0]
        if len(set_keys):
            at = np.minimum(np.searchsorted(set_keys, c_keys), len(set_keys) - 1)
            hit = set_keys[at] == c_keys
            matched = asked[hit]
            ref_counts[matched] = counts[at[hit]]
        return Matches(*found, matched, table, set_keys // g, set_keys % g)
    # one sort of both sides' (set, n-gram) keys numbers them; a candidate entry's row holds its
    # counts in the references when some reference of its set has the n-gram
    distinct, rows = unique(np.concatenate([r_keys, c_keys]), inverse=True)
    row, c_row = rows[: len(r_keys)], rows[len(r_keys) :]
    counts = np.zeros((len(distinct), batch.width), dtype=np.int64)
    counts[row, ref_slot] = counts_all[e]
    in_set = np.zeros(len(distinct), dtype=bool)
    in_set[row] = True
    hit = in_set[c_row]
    matched = asked[hit]
    ref_counts[matched] = counts[c_row[hit]]
    return Matches(*found, matched, table)


def gram_offsets(tables: Sequence[Ngrams]) -> np.ndarray:
    """Where each table's n-gram ids start among the global ids of :func:`match` (and, last,
    the total number of n-grams)."""
    return np.cumsum([0] + [t.n_grams for t in tables])


def set_frequencies(batch: Batch, matches: Matches, n_grams: int) -> np.ndarray:
    """Number of items whose reference set contains each n-gram (CIDEr's df over the batch)."""
    if matches.set_of is None or matches.gram_of is None:
        raise ValueError("set_frequencies needs match(..., set_grams=True)")
    items_per_set = np.bincount(batch.refset, minlength=batch.slots.shape[0])
    return np.bincount(
        matches.gram_of, items_per_set[matches.set_of].astype(float), minlength=n_grams
    )


# ---------------------------------------------------------------------------------------------
# the base of the n-gram metrics
# ---------------------------------------------------------------------------------------------
#: Pools of :meth:`BatchDistance.pairwise_many` tokenised in one batch.
POOLS_PER_BATCH = 256


class BatchDistance(Distance):
    """A distance computed on a :class:`Batch`: per-item values for :meth:`score`, per-slot
    values for :meth:`pairwise`. Subclasses implement :meth:`score_batch` and
    :meth:`slot_scores`; ``split`` is how coco-caption's scorer splits the tokenised text."""

    higher_is_better = True
    accepts_empty_candidates = True  # no n-gram: BLEU, ROUGE-L and CIDEr-D give 0, as coco-caption
    pairwise_on_workers = True  # cheap and model-free
    tokenizer: Tokenizer

    @staticmethod
    def split(text: str) -> list[str]:
        return text.split()

    def score_batch(self, batch: Batch) -> Scores:
        """Per-item scores and the corpus score."""
        raise NotImplementedError

    def slot_scores(self, batch: Batch) -> np.ndarray:
        """Score of each item's candidate against each of its references alone (n_items x width)."""
        raise NotImplementedError

    def batch(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Batch:
        """The tokenised batch; within a run, one for all metrics given the same lists with the
        same tokenizer and split (BLEU-1..4 and CIDEr-D of the default set)."""
        split = getattr(self.split, "__qualname__", repr(self.split))
        return shared_for(
            ("ngram-batch", self.tokenizer.portable_spec(), split),
            (candidates, references),
            lambda: make_batch(self.tokenizer, candidates, references, self.split, self.name),
        )

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        if len(candidates) == 0 and len(references) == 0:
            return Scores(np.zeros(0), float("nan"))
        return self.score_batch(self.batch(candidates, references))

    def pairwise_many(self, pools: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``pairwise(pool, pool)`` for every pool, from one n-gram batch per
        :data:`POOLS_PER_BATCH` pools: each pooled text is a candidate whose reference slots are
        its own pool."""
        out: list[np.ndarray] = []
        for start in range(0, len(pools), POOLS_PER_BATCH):
            chunk = [list(pool) for pool in pools[start : start + POOLS_PER_BATCH]]
            flat = [text for pool in chunk for text in pool]
            slots = [pool for pool in chunk for _ in pool]
            values = self.to_distance(self.slot_scores(self.batch(flat, slots)))
            row = 0
            for pool in chunk:
                out.append(values[row : row + len(pool), : len(pool)])
                row += len(pool)
        return out

    def score_grouped(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], refset: np.ndarray
    ) -> Scores:
        """:meth:`score` of ``candidates[i]`` against ``references[refset[i]]``: reference lists
        shared by several candidates are read once."""
        if len(candidates) == 0:
            return Scores(np.zeros(0), float("nan"))
        return self.score_batch(
            make_batch(self.tokenizer, candidates, references, self.split, self.name, refset)
        )

    def score_token_ids(
        self,
        ids: np.ndarray,
        lengths: np.ndarray,
        words: np.ndarray,
        references: Sequence[Sequence[str]],
        refset: np.ndarray,
    ) -> Scores | None:
        """:meth:`score` of candidates given as token ids (see :func:`make_id_batch`; every word
        one whitespace-free token), candidate i against ``references[refset[i]]``, without
        making their text. None when this metric's tokenizer is not plain whitespace splitting,
        which alone gives the words back from the joined text."""
        plain = isinstance(self.tokenizer, WhitespaceTokenizer) and not self.tokenizer.lowercase
        if not plain or type(self).split is not BatchDistance.split or len(lengths) == 0:
            return None
        return self.score_batch(make_id_batch(ids, lengths, words, references, refset, self.name))

    # -- a corpus scored in parts (capmetrics.components.protocols.ScoresInParts) ------------------
    def score_part(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[Scores, Any]:
        """:meth:`score` of one part of a corpus, with what :meth:`merge_scores` needs to join
        the parts (None when the corpus value is the mean of the item values)."""
        return self.score(candidates, references), None

    def merge_scores(self, parts: Sequence[tuple[Scores, Any]]) -> Scores:
        """The :meth:`score` of a whole corpus from its consecutive parts' :meth:`score_part`:
        the same values and corpus value, to the bit."""
        values = np.concatenate([scores.values for scores, _ in parts]) if parts else np.zeros(0)
        details = dict(parts[0][0].details) if parts else {}
        return Scores(values, float(np.mean(values)) if len(values) else float("nan"), details)

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Matrix of distances d(a_i, b_j), ``a_i`` scored against ``[b_j]`` (vectorised)."""
        if len(a) == 0 or len(b) == 0:
            return np.zeros((len(a), len(b)))
        batch = make_pairwise_batch(self.tokenizer, a, b, self.split)
        return self.to_distance(self.slot_scores(batch))
