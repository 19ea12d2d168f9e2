"""What the aligner needs to know about words and segments, as integer arrays, computed once per
distinct word and per distinct segment.

A word's *key* is Java's ``String.hashCode`` (the jar compares words and stems by it, so we do
too); its *synsets* are the WordNet synsets of the word and of its base form (exception list,
else WordNet's suffix rules), sorted; its *paraphrase number* is its place in the paraphrase
vocabulary. A segment is its words' numbers and the paraphrase-table phrases found among its
n-grams (start, length, phrase number). :meth:`Lexicon.tables` lays the segments of one call out
as the flat arrays the compiled aligner (``_align``) reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np
from capmetrics.plugins.meteor._normalize import java_trim, nonbreaking_prefixes, normalize
from capmetrics.plugins.meteor._resources import KEY_MULT, Resources, _jar_text, java_split
from capmetrics.plugins.meteor._stem import java_units, stem
from capmetrics.plugins.meteor._tables import text_keys
from capmetrics.plugins.meteor.jar import meteor_files

#: WordNet's detachment rules (suffix -> ending), tried in this order; from the WordNet 3.0 morphy
#: description (nouns, verbs, adjectives).
MORPH_RULES = (
    ("s", ""),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
    ("s", ""),
    ("ies", "y"),
    ("es", "e"),
    ("es", ""),
    ("ed", "e"),
    ("ed", ""),
    ("ing", "e"),
    ("ing", ""),
    ("er", ""),
    ("est", ""),
    ("er", "e"),
    ("est", "e"),
)
NO_NGRAMS = np.zeros((0, 3), dtype=np.int32)


def java_hash(text: str) -> int:
    """java.lang.String.hashCode of ``text`` (as an unsigned 32-bit number)."""
    return java_hash_units(java_units(text))


def java_hash_units(units: str) -> int:
    """String.hashCode of a string already written as UTF-16 code units (see ``java_units``)."""
    h = 0
    for c in units:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h


class Lexicon:
    """Word and segment features over the English resources, memoised per process."""

    def __init__(self, resources: Resources) -> None:
        self.res = resources
        jar, _ = meteor_files()
        self.prefixes = nonbreaking_prefixes(_jar_text(jar, "nonbreaking/english.prefixes"))
        self.syn_words, self.syn_sets = resources.index("syn_words"), resources.ragged("syn_sets")
        self.exc_forms, self.exc_bases = resources.index("exc_forms"), resources.ragged("exc_bases")
        self.vocab = resources.index("vocab")
        self.phrase_words = resources.ragged("phrase_words")
        self.phrase_keys = resources.arrays["phrase_keys"]
        self.phrase_order = resources.arrays["phrase_order"]
        self.para = resources.ragged("para")
        self.max_len = int(resources.arrays["max_len"][0])
        self.forget()

    def forget(self) -> None:
        """Drop every memoised word and segment (the resource tables stay loaded)."""
        self._word_ids: dict[str, int] = {}
        self._keys: list[int] = []
        self._stems: list[int] = []
        self._function: list[int] = []
        self._vocab: list[int] = []
        self._synsets: list[list[int]] = []
        self._word_arrays: tuple[np.ndarray, ...] | None = None
        self._neighbours: tuple[np.ndarray, np.ndarray] | None = None
        self._segment_ids: dict[str, int] = {}
        self._segment_words: list[np.ndarray] = []
        self._segment_ngrams: list[np.ndarray] = []

    # ------------------------------------------------------------ words
    def _add_words(self, words: list[str]) -> None:
        """Features of new distinct words, with one batched search per table."""
        keys = text_keys(words)
        own = self.syn_words.find_many(words, keys).tolist()
        exc = self.exc_forms.find_many(words, keys).tolist()
        # WordNet's suffix rules, for words without an exception entry: all candidate bases at once
        candidates: list[str] = []
        owners: list[int] = []
        for n, w in enumerate(words):
            if exc[n] >= 0 or w.endswith("ss") or len(java_units(w)) <= 2:
                continue
            for suffix, ending in MORPH_RULES:
                if w.endswith(suffix):
                    candidates.append(w[: len(w) - len(suffix)] + ending)
                    owners.append(n)
        hit = self.syn_words.find_many(candidates)
        morph = [
            w if exc[n] < 0 and (w.endswith("ss") or len(java_units(w)) <= 2) else ""
            for n, w in enumerate(words)
        ]
        for base, n, h in zip(candidates, owners, hit.tolist()):
            if h >= 0 and not morph[n]:
                morph[n] = base + ("ful" if words[n].endswith("ful") else "")
        morph_rows = self.syn_words.find_many(morph).tolist()
        vocab = self.vocab.find_many(words, keys).tolist()
        functions = self.res.function_words
        row = self.syn_sets.row
        for n, w in enumerate(words):
            sources = [own[n]] if own[n] >= 0 else []
            if exc[n] >= 0:
                sources += [b for b in self.exc_bases.row(exc[n]).tolist() if b >= 0]
            elif morph_rows[n] >= 0:
                sources.append(morph_rows[n])
            self._word_ids[w] = len(self._keys)
            self._keys.append(java_hash(w))
            self._stems.append(java_hash_units(stem(java_units(w))))
            self._function.append(w.lower() in functions)
            self._vocab.append(vocab[n])
            self._synsets.append(
                row(sources[0]).tolist()
                if len(sources) == 1
                else sorted({s for b in sources for s in row(b).tolist()})
            )
        self._word_arrays = None

    def synsets(self, word: str) -> frozenset[int]:
        """The WordNet synsets of ``word`` and of its base forms (Meteor's getSynSets ∪
        getStemSynSets)."""
        if word not in self._word_ids:
            self._add_words([word])
        return frozenset(self._synsets[self._word_ids[word]])

    def word_arrays(self) -> tuple[np.ndarray, ...]:
        """key, stem key, function flag, synset offsets and synsets of every known word."""
        if self._word_arrays is None:
            lengths = np.fromiter(
                (len(s) for s in self._synsets), dtype=np.int64, count=len(self._synsets)
            )
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            values = np.fromiter(
                chain.from_iterable(self._synsets), dtype=np.int32, count=int(offsets[-1])
            )
            self._word_arrays = (
                np.asarray(self._keys, dtype=np.int64),
                np.asarray(self._stems, dtype=np.int64),
                np.asarray(self._function, dtype=np.uint8),
                offsets,
                values,
            )
        return self._word_arrays

    # ------------------------------------------------------------ segments
    def prepare(self, fields: Sequence[str]) -> None:
        """Compute the segments of new ``fields`` together (one phrase-table search for all)."""
        new = [f for f in dict.fromkeys(fields) if f not in self._segment_ids]
        if not new:
            return
        split = [java_split(normalize(java_trim(f), self.prefixes)) for f in new]
        known = self._word_ids
        unseen = list(dict.fromkeys(w for ws in split for w in ws if w not in known))
        if unseen:
            self._add_words(unseen)
        ids = [np.fromiter((known[w] for w in ws), dtype=np.int32, count=len(ws)) for ws in split]
        for field, words, ngrams in zip(new, ids, self._find_phrases(ids)):
            self._segment_ids[field] = len(self._segment_words)
            self._segment_words.append(words)
            self._segment_ngrams.append(ngrams)

    def _find_phrases(self, segments: list[np.ndarray]) -> list[np.ndarray]:
        """(start, length, phrase) of every n-gram that is a table phrase, per segment, by start
        then length: all n-grams of all segments looked up at once (keys as in the table build)."""
        lengths = np.fromiter((len(s) for s in segments), dtype=np.int64, count=len(segments))
        if not lengths.sum():
            return [NO_NGRAMS] * len(segments)
        vocab = np.asarray(self._vocab, dtype=np.int64)[np.concatenate(segments)]
        owner = np.repeat(np.arange(len(segments)), lengths)
        end = np.repeat(np.cumsum(lengths), lengths)  # one past each token's segment
        total = len(vocab)
        positions = np.arange(total)
        keys = np.zeros(total, dtype=np.uint64)
        alive = np.ones(total, dtype=bool)
        found_start, found_len, found_q = [], [], []
        mult = np.uint64(KEY_MULT)
        offsets, words = self.phrase_words.offsets, self.phrase_words.values
        for n in range(1, self.max_len + 1):
            nxt = positions + (n - 1)
            alive &= nxt < end
            where = np.flatnonzero(alive)
            alive[where] = vocab[nxt[where]] >= 0
            where = where[alive[where]]
            if not len(where):
                break
            keys[where] = keys[where] * mult + (vocab[nxt[where]] + 1).astype(np.uint64)
            distinct, inverse = np.unique(keys[where], return_inverse=True)
            at = np.searchsorted(self.phrase_keys, distinct)[inverse]
            inside = at < len(self.phrase_keys)
            where, at = where[inside], at[inside]
            hit = self.phrase_keys[at] == keys[where]
            where, at = where[hit], at[hit]
            q = self.phrase_order[at].astype(np.int64)
            same = offsets[q + 1] - offsets[q] == n
            for t in range(n):
                same &= words[np.minimum(offsets[q] + t, len(words) - 1)] == vocab[where + t]
            found_start.append(where[same])
            found_len.append(np.full(int(same.sum()), n))
            found_q.append(q[same])
            for s, a in zip(where[~same].tolist(), at[~same].tolist()):  # another phrase, same key
                other = self._confirm(vocab[s : s + n], keys[s], a + 1, offsets, words)
                if other >= 0:
                    found_start.append(np.asarray([s]))
                    found_len.append(np.asarray([n]))
                    found_q.append(np.asarray([other]))
        out = [NO_NGRAMS] * len(segments)
        start = (
            np.concatenate(found_start).astype(np.int64) if found_start else np.zeros(0, np.int64)
        )
        if len(start):
            table = np.stack(
                [start, np.concatenate(found_len), np.concatenate(found_q)], axis=1
            ).astype(np.int64)
            seg = owner[start]
            table[:, 0] -= (end - lengths[owner])[start]
            table = table[np.lexsort((table[:, 1], table[:, 0], seg))].astype(np.int32)
            seg = np.sort(seg)
            bounds = np.searchsorted(seg, np.arange(len(segments) + 1))
            out = [table[bounds[i] : bounds[i + 1]] for i in range(len(segments))]
        return out

    def _confirm(
        self, span: np.ndarray, key: np.uint64, at: int, offsets: np.ndarray, words: np.ndarray
    ) -> int:
        """The phrase with these words among the table entries with this key from ``at``, or -1."""
        while at < len(self.phrase_keys) and self.phrase_keys[at] == key:
            q = int(self.phrase_order[at])
            if offsets[q + 1] - offsets[q] == len(span) and np.array_equal(
                words[offsets[q] : offsets[q + 1]], span
            ):
                return q
            at += 1
        return -1

    def tables(self, fields: Sequence[str]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """The local number of each field and the aligner's segment arrays for the distinct ones:
        word offsets and words; n-gram offsets, starts, lengths and phrases; the n-grams again
        sorted by phrase then start (phrases, starts, lengths); and the paraphrase lists of the
        phrases that occur here, restricted to those phrases (offsets, phrases). Phrases are
        renumbered 0..k-1 in table order."""
        self.prepare(fields)
        distinct: dict[str, int] = {}
        number = np.fromiter(
            (distinct.setdefault(f, len(distinct)) for f in fields),
            dtype=np.int64,
            count=len(fields),
        )
        segs = [self._segment_ids[f] for f in distinct]
        words = [self._segment_words[s] for s in segs]
        ngrams = [self._segment_ngrams[s] for s in segs]
        seg_off = np.zeros(len(segs) + 1, dtype=np.int64)
        np.cumsum([len(w) for w in words], out=seg_off[1:])
        ng_off = np.zeros(len(segs) + 1, dtype=np.int64)
        np.cumsum([len(g) for g in ngrams], out=ng_off[1:])
        tok = np.concatenate(words) if words else np.zeros(0, np.int32)
        ng = np.concatenate(ngrams).astype(np.int64) if ngrams else NO_NGRAMS.astype(np.int64)
        phrases, ng[:, 2] = np.unique(ng[:, 2], return_inverse=True)
        para_off, para_val = self._paraphrases_among(phrases)
        owner = np.repeat(np.arange(len(segs)), np.diff(ng_off))
        by_phrase = ng[np.lexsort((ng[:, 0], ng[:, 2], owner))]
        return number, (
            seg_off,
            tok,
            ng_off,
            ng[:, 0].copy(),
            ng[:, 1].copy(),
            ng[:, 2].copy(),
            by_phrase[:, 2].copy(),
            by_phrase[:, 0].copy(),
            by_phrase[:, 1].copy(),
            para_off,
            para_val,
        )

    def _paraphrases_among(self, phrases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of the sorted table phrases ``phrases``, its paraphrases (table order, repeats
        kept) that are among ``phrases`` too, as local numbers (CSR)."""
        starts, ends = self.para.offsets[phrases], self.para.offsets[phrases + 1]
        lengths = ends - starts
        row = np.repeat(np.arange(len(phrases)), lengths)
        flat = (
            np.arange(int(lengths.sum()))
            - np.repeat(np.cumsum(lengths) - lengths, lengths)
            + starts[row]
        )
        values = self.para.values[flat]
        local = np.searchsorted(phrases, values)
        keep = local < len(phrases)
        keep[keep] = phrases[local[keep]] == values[keep]
        para_off = np.zeros(len(phrases) + 1, dtype=np.int64)
        np.cumsum(np.bincount(row[keep], minlength=len(phrases)), out=para_off[1:])
        return para_off, local[keep].astype(np.int64)

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """Per known word, the sorted numbers of the other words (different key) it shares a
        synset with (CSR): the synonym module's matches, computed once per word pair."""
        if self._neighbours is None or len(self._neighbours[0]) != len(self._keys) + 1:
            keys, _, _, syn_off, syn_val = self.word_arrays()
            words = len(keys)
            owner = np.repeat(np.arange(words, dtype=np.int64), np.diff(syn_off))
            order = np.argsort(syn_val, kind="stable")
            owner, synset = owner[order], syn_val[order]
            # every pair of entries within a run of equal synsets
            starts = np.flatnonzero(np.r_[True, synset[1:] != synset[:-1]])
            sizes = np.diff(np.r_[starts, len(synset)])
            size_of = np.repeat(sizes, sizes)
            start_of = np.repeat(starts, sizes)
            left = np.repeat(np.arange(len(synset)), size_of)
            right = (
                np.arange(len(left))
                - np.repeat(np.cumsum(size_of) - size_of, size_of)
                + np.repeat(start_of, size_of)
            )
            a, b = owner[left], owner[right]
            keep = keys[a] != keys[b]
            code = np.unique(a[keep] * words + b[keep])
            nb_off = np.zeros(words + 1, dtype=np.int64)
            np.cumsum(np.bincount(code // words, minlength=words), out=nb_off[1:])
            self._neighbours = (nb_off, code % words)
        return self._neighbours
