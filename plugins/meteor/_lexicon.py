"""What the aligner needs to know about words and segments, computed once per distinct word/segment.

A word's *key* is Java's ``String.hashCode`` (the jar compares words and stems by it, so we do
too); its *synsets* are the WordNet synsets of the word and of its base form (exception list,
else WordNet's suffix rules); its *paraphrase number* is its place in the paraphrase vocabulary.
A segment keeps, besides per-word lists, the paraphrase-table phrases found among its n-grams.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from capmetrics.plugins.meteor._normalize import java_trim, nonbreaking_prefixes, normalize
from capmetrics.plugins.meteor._resources import KEY_MULT, MASK, Resources, _jar_text, java_split
from capmetrics.plugins.meteor._stem import java_units, stem
from capmetrics.plugins.meteor.jar import meteor_files

#: WordNet's detachment rules (suffix -> ending), tried in this order; from the WordNet 3.0 morphy
#: description (nouns, verbs, adjectives).
MORPH_RULES = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
               ("men", "man"), ("ies", "y"), ("s", ""), ("ies", "y"), ("es", "e"), ("es", ""),
               ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""),
               ("er", "e"), ("est", "e"))
EMPTY: frozenset[int] = frozenset()


def java_hash(text: str) -> int:
    """java.lang.String.hashCode of ``text`` (as an unsigned 32-bit number)."""
    return java_hash_units(java_units(text))


@dataclass(frozen=True)
class Word:
    key: int
    stem_key: int
    synsets: frozenset[int]
    function: bool


@dataclass(frozen=True)
class Segment:
    """One normalised segment: its words' features and its paraphrase-table n-grams."""

    words: tuple[str, ...]
    keys: tuple[int, ...]
    stem_keys: tuple[int, ...]
    synsets: tuple[frozenset[int], ...]
    function: tuple[bool, ...]
    #: (start, length, phrase number) of each n-gram that is a table phrase, by start then length.
    ngrams: tuple[tuple[int, int, int], ...]
    #: phrase number -> start positions (ascending) of its occurrences.
    occurrences: dict[int, tuple[int, ...]]
    #: word key / stem key -> positions (ascending).
    by_key: dict[int, tuple[int, ...]]
    by_stem: dict[int, tuple[int, ...]]


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
        self.phrase_keys = resources.arrays["phrase_keys"].view(np.ndarray)
        self.phrase_order = resources.arrays["phrase_order"].view(np.ndarray)
        self.para = resources.ragged("para")
        self.max_len = int(resources.arrays["max_len"][0])
        self._words: dict[str, Word] = {}
        self._vocab: dict[str, int] = {}
        self._segments: dict[str, Segment] = {}
        self._para: dict[int, tuple[tuple[int, ...], frozenset[int]]] = {}

    # ------------------------------------------------------------ words
    def _synsets_of(self, word: str) -> frozenset[int]:
        row = self.syn_words.find(word)
        return EMPTY if row < 0 else frozenset(self.syn_sets.row(row).tolist())

    def _morph(self, word: str) -> str:
        """WordNet's base form by suffix rules: the first rule whose result has synsets, else ''."""
        if word.endswith("ss") or len(java_units(word)) <= 2:
            return word
        tail = "ful" if word.endswith("ful") else ""
        for suffix, ending in MORPH_RULES:
            if word.endswith(suffix):
                base = word[: len(word) - len(suffix)] + ending
                if self.syn_words.find(base) >= 0:
                    return base + tail
        return ""

    def _all_synsets(self, word: str) -> frozenset[int]:
        own = self._synsets_of(word)
        row = self.exc_forms.find(word)
        if row >= 0:
            bases = [b for b in self.exc_bases.row(row).tolist() if b >= 0]
            base_sets = [int(s) for b in bases for s in self.syn_sets.row(b).tolist()]
            return own | frozenset(base_sets)
        return own | self._synsets_of(self._morph(word))

    def word(self, word: str) -> Word:
        info = self._words.get(word)
        if info is None:
            info = Word(java_hash(word), java_hash_units(stem(java_units(word))), self._all_synsets(word),
                        word.lower() in self.res.function_words)
            self._words[word] = info
        return info

    def vocab_id(self, word: str) -> int:
        number = self._vocab.get(word)
        if number is None:
            number = self._vocab[word] = self.vocab.find(word)
        return number

    # ------------------------------------------------------------ phrases
    def paraphrases(self, q: int) -> tuple[tuple[int, ...], frozenset[int]]:
        """The paraphrases listed for phrase ``q`` (file order, repeats kept) and as a set."""
        entry = self._para.get(q)
        if entry is None:
            row = tuple(self.para.row(q).tolist())
            entry = self._para[q] = (row, frozenset(row))
        return entry

    def phrase_length(self, q: int) -> int:
        return int(self.phrase_words.offsets[q + 1] - self.phrase_words.offsets[q])

    # ------------------------------------------------------------ segments
    def segment(self, field: str) -> Segment:
        """The features of one SCORE field as the jar reads it (trim, normalise, lower-case, split)."""
        seg = self._segments.get(field)
        if seg is None:
            self.prepare([field])
            seg = self._segments[field]
        return seg

    def prepare(self, fields: list[str]) -> None:
        """Compute the segments of new ``fields`` together (one phrase-table search for all)."""
        new = [f for f in dict.fromkeys(fields) if f not in self._segments]
        words = [tuple(java_split(normalize(java_trim(f), self.prefixes))) for f in new]
        ids = [[self.vocab_id(w) for w in ws] for ws in words]
        spans = [self._spans(i) for i in ids]
        found = self._lookup({span: key for per in spans for _, _, span, key in per})
        for field, ws, per in zip(new, words, spans):
            self._segments[field] = self._build(ws, [(s, n, found[span]) for s, n, span, _ in per if span in found])

    def _build(self, words: tuple[str, ...], ngrams: list[tuple[int, int, int]]) -> Segment:
        infos = [self.word(w) for w in words]
        occurrences: dict[int, list[int]] = {}
        for start, _, q in ngrams:
            occurrences.setdefault(q, []).append(start)
        keys = tuple(i.key for i in infos)
        stems = tuple(i.stem_key for i in infos)
        synsets = tuple(i.synsets for i in infos)
        return Segment(words, keys, stems, synsets, tuple(i.function for i in infos), tuple(ngrams),
                       {q: tuple(v) for q, v in occurrences.items()}, _positions(keys), _positions(stems))

    def _spans(self, ids: list[int]) -> list[tuple[int, int, tuple[int, ...], int]]:
        """(start, length, ids, key) of every n-gram of known words up to the longest table phrase."""
        out = []
        for start in range(len(ids)):
            key = 0
            for end in range(start, min(start + self.max_len, len(ids))):
                if ids[end] < 0:
                    break
                key = (key * KEY_MULT + ids[end] + 1) & MASK
                out.append((start, end - start + 1, tuple(ids[start:end + 1]), key))
        return out

    def _lookup(self, spans: dict[tuple[int, ...], int]) -> dict[tuple[int, ...], int]:
        """The table numbers of those phrases that are in the table (one binary search for all)."""
        found: dict[tuple[int, ...], int] = {}
        if not spans:
            return found
        keys = np.fromiter(spans.values(), dtype=np.uint64, count=len(spans))
        starts = np.searchsorted(self.phrase_keys, keys).tolist()
        size = len(self.phrase_keys)
        for span, key, at in zip(spans, keys.tolist(), starts):
            while at < size and int(self.phrase_keys[at]) == key:
                q = int(self.phrase_order[at])
                if tuple(self.phrase_words.row(q).tolist()) == span:
                    found[span] = q
                    break
                at += 1
        return found


def _positions(values: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    out: dict[int, list[int]] = {}
    for i, v in enumerate(values):
        out.setdefault(v, []).append(i)
    return {v: tuple(p) for v, p in out.items()}


def java_hash_units(units: str) -> int:
    """String.hashCode of a string already written as UTF-16 code units (see ``java_units``)."""
    h = 0
    for c in units:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h
