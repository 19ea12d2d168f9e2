"""METEOR 1.5's aligner: candidate matches from each module, then a beam search over the reference.

Matches (test span, reference span, module) come from the modules in order: exact (same word),
stem (same Snowball stem, different word), synonym (a shared WordNet synset, different word) and
paraphrase (a table phrase in one segment whose listed paraphrase occurs in the other). A reference
position with exactly one match whose words no other match touches is fixed in advance. The rest
is a left-to-right beam search (40 paths) over reference positions: at each position a path takes
any match starting there whose test words are free, or skips the position. Paths are ranked by
the search score (exact words count 1, words of other modules 0.5, rounded down per match, on both
sides), then fewer chunks, then a smaller distance total; ties keep their order (a stable sort).
The distance bookkeeping is the jar's: the offset of a match is added to the path that *skips*
it and to the alternatives built after it, not to the path that takes it. Identical segments use
only the first module.

Cost: O(n_ref * beam * m) path extensions for m matches per position, each O(1) (test words in
use are a bit mask, chosen matches a linked list), plus O(n_test * n_ref) for the word modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from capmetrics.plugins.meteor._lexicon import Lexicon, Segment

BEAM = 40
MODULES = ("exact", "stem", "synonym", "paraphrase")
#: Length of the jar's sufficient-statistics line (4 module slots).
N_STATS = 23

# A match: (ref start, ref length, test start, test length, module slot, test bit mask); the
# search extends it (see _with_search_terms) with its search score, ref end, test end, offset.
Match = tuple[int, ...]


def _word_matches(kind: str, slot: int, test: Segment, ref: Segment, out: list[list[Match]]) -> None:
    keys = test.keys
    if kind == "exact":
        for j, rk in enumerate(ref.keys):
            hits = test.by_key.get(rk)
            if hits:
                out[j].extend([(j, 1, i, 1, slot, 1 << i) for i in hits])
    elif kind == "stem":
        for j, rs in enumerate(ref.stem_keys):
            hits = test.by_stem.get(rs)
            if hits:
                rk = ref.keys[j]
                out[j].extend([(j, 1, i, 1, slot, 1 << i) for i in hits if keys[i] != rk])
    else:
        synsets = test.synsets
        for j, syn in enumerate(ref.synsets):
            if syn:
                rk = ref.keys[j]
                out[j].extend([(j, 1, i, 1, slot, 1 << i) for i in range(len(keys))
                               if keys[i] != rk and not syn.isdisjoint(synsets[i])])


def _paraphrase_matches(lex: Lexicon, slot: int, test: Segment, ref: Segment, out: list[list[Match]]) -> None:
    # First table phrases of the reference whose paraphrases occur in the test, then the other way;
    # each in the jar's order (source start, phrase length, table order, target start).
    for source, target, ref_is_source in ((ref, test, True), (test, ref, False)):
        if not target.occurrences:
            continue
        present = target.occurrences.keys()
        for start, length, q in source.ngrams:
            row, members = lex.paraphrases(q)
            if members.isdisjoint(present):
                continue
            for p in row:
                where = target.occurrences.get(p)
                if where is None:
                    continue
                plen = lex.phrase_length(p)
                for t in where:
                    if ref_is_source:
                        out[start].append((start, length, t, plen, slot, ((1 << plen) - 1) << t))
                    else:
                        out[t].append((t, plen, start, length, slot, ((1 << length) - 1) << start))


def _with_search_terms(m: Match, exact_slots: frozenset[int]) -> Match:
    j, length, i, mlength, slot, mask = m
    score = length + mlength if slot in exact_slots else (length >> 1) + (mlength >> 1)
    return (j, length, i, mlength, slot, mask, score, j + length, i + mlength, abs(j - i))


def align(lex: Lexicon, test: Segment, ref: Segment, modules: Sequence[str]) -> list[int]:
    """The jar's sufficient statistics (23 numbers) of aligning ``test`` to ``ref``."""
    n1, n2 = len(test.keys), len(ref.keys)
    used_modules = modules[:1] if n1 == n2 and test.keys == ref.keys else modules
    at: list[list[Match]] = [[] for _ in range(n2)]
    for slot, kind in enumerate(used_modules):
        if kind == "paraphrase":
            _paraphrase_matches(lex, slot, test, ref, at)
        else:
            _word_matches(kind, slot, test, ref, at)
    exact_slots = frozenset(s for s, k in enumerate(modules) if k == "exact")
    chosen = _resolve(at, n1, n2, exact_slots)
    return _stats(chosen, test, ref, len(modules))


def _resolve(at: list[list[Match]], n1: int, n2: int, exact_slots: frozenset[int]) -> list[Match]:
    cover1, cover2 = [0] * n1, [0] * n2
    for ms in at:
        for j, length, i, mlength, *_ in ms:
            for k in range(length):
                cover2[j + k] += 1
            for k in range(mlength):
                cover1[i + k] += 1
    fixed: dict[int, Match] = {}
    for j, ms in enumerate(at):
        if len(ms) == 1:
            j0, length, i, mlength, *_ = m = ms[0]
            if all(cover2[j0 + k] == 1 for k in range(length)) and all(cover1[i + k] == 1 for k in range(mlength)):
                fixed[j] = m
    if all(j in fixed or not ms for j, ms in enumerate(at)):
        return [fixed[j] for j in sorted(fixed)]
    fixed = {j: _with_search_terms(m, exact_slots) for j, m in fixed.items()}
    at = [[_with_search_terms(m, exact_slots) for m in ms] if j not in fixed else [] for j, ms in enumerate(at)]
    # A path: (-score, chunks, distance, arrival number, next ref index, end of last test span or -1,
    # test words in use, chosen matches). Sorting these tuples is the jar's stable sort on the first
    # three, because arrival numbers are distinct and in insertion order.
    paths: list[tuple] = [(0, 0, 0, 0, 0, -1, 0, None)]
    for cur in range(n2):
        if len(paths) > 1:
            paths.sort()
        nxt: list[tuple] = []
        fix = fixed.get(cur)
        options = at[cur]
        for neg, chunks, dist, _, idx, last, mask, picked in paths[:BEAM]:
            if cur < idx:
                nxt.append((neg, chunks, dist, len(nxt), idx, last, mask, picked))
                continue
            if fix is not None:
                nxt.append((neg - fix[6], chunks + (last != -1 and fix[2] != last), dist + fix[9], len(nxt),
                            fix[7], fix[8], mask, picked))
                continue
            for m in options:
                if mask & m[5]:
                    continue
                nxt.append((neg - m[6], chunks + (last != -1 and m[2] != last), dist, len(nxt), m[7], m[8],
                            mask | m[5], (m, picked)))
                dist += m[9]
            nxt.append((neg, chunks + (last != -1), dist, len(nxt), idx + 1, -1, mask, picked))
        paths = nxt
    paths.sort()
    done = [(neg, chunks + (last != -1), dist, k, idx, last, mask, picked)
            for k, (neg, chunks, dist, _, idx, last, mask, picked) in enumerate(paths[:BEAM])]
    best = min(done)[7]
    result = list(fixed.values())
    while best is not None:
        result.append(best[0])
        best = best[1]
    result.sort()
    return result


def _stats(matches: list[Match], test: Segment, ref: Segment, n_modules: int) -> list[int]:
    stats = [0] * N_STATS
    stats[0], stats[1] = len(test.keys), len(ref.keys)
    stats[2], stats[3] = sum(test.function), sum(ref.function)
    chunks, last, pos = 0, -1, 0
    for j, length, i, mlength, slot, *_ in matches:
        base = 4 + 4 * slot
        for k in range(mlength):
            stats[base + (2 if test.function[i + k] else 0)] += 1
        for k in range(length):
            stats[base + (3 if ref.function[j + k] else 1)] += 1
        if j > pos and last != -1:  # a gap in the reference closes the chunk
            chunks, last = chunks + 1, -1
        if last != -1 and i != last:
            chunks += 1
        pos, last = j + length, i + mlength
    if last != -1:
        chunks += 1
    stats[20] = chunks
    stats[21] = sum(stats[4 + 4 * s] + stats[6 + 4 * s] for s in range(n_modules))
    stats[22] = sum(stats[5 + 4 * s] + stats[7 + 4 * s] for s in range(n_modules))
    return stats
