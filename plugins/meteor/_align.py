"""METEOR 1.5's aligner, compiled: every candidate-reference pair of a call in one loop.

Matches (test span, reference span, module) come from the modules in order: exact (same word),
stem (same Snowball stem, different word), synonym (a shared WordNet synset, different word) and
paraphrase (a table phrase in one segment whose listed paraphrase occurs in the other: first the
reference's phrases, then the test's, each by start, length, table order, target start). A
reference position with exactly one match whose words no other match touches is fixed in advance.
The rest is a left-to-right beam search (40 paths) over reference positions: at each position a
path takes any match starting there whose test words are free, or skips the position. Paths are
ranked by the search score (exact words count 1, words of other modules 0.5, rounded down per
match, on both sides), then fewer chunks, then a smaller distance total; ties keep their order (a
stable sort). The distance bookkeeping is the jar's: the offset of a match is added to the path
that *skips* it and to the alternatives built after it, not to the path that takes it. Identical
segments use only the first module.

Cost per pair, for a test of n1 words, a reference of n2 words and M matches (k of them starting
at a reference position): O(n1 * n2) comparisons for the exact and stem modules, O(n1 * n2 * log d)
for synonyms (d: the length of a word's synonym list, see ``Lexicon.neighbours``), O(r) for
paraphrases (r: the paraphrases listed for the segments' table phrases, restricted to the call's
phrases, each checked in O(1)); the search makes at most B * (k + 1) candidates at a position
(B = 40), each placed among the best B in O(log B + B) and each kept one copies a bit set of
ceil(n1 / 64) words: O(B * (M + n2) * (B + n1 / 64)) in all, memory O(M + B * (n2 + n1 / 64)).
Quadratic in the lengths for the fixed beam; nothing is exponential, so every caption finishes.

The kernel is written in the subset of Python that numba compiles (``cache=True``: compiled once
per installation). Without numba the same functions run as plain Python (same numbers, slower).
"""

from __future__ import annotations

import numpy as np
from capmetrics.plugins.meteor._formula import N_STATS

try:  # numba is in the ``coco`` extra; without it the kernel runs as plain Python
    from numba import njit
except (
    ImportError
):  # pragma: no cover - the fallback test runs the same code with NUMBA_DISABLE_JIT=1

    def njit(*args, **kwargs):  # type: ignore[no-untyped-def]
        if args and callable(args[0]):
            return args[0]
        return lambda fn: fn


BEAM = 40
EXACT, STEM, SYNONYM, PARAPHRASE = 0, 1, 2, 3  # places in MODULES
# columns of a match row
J, JLEN, I, ILEN, SLOT = 0, 1, 2, 3, 4


@njit(cache=True)
def _push(buf, n, j, jlen, i, ilen, slot):  # type: ignore[no-untyped-def]
    if n == buf.shape[0]:
        grown = np.empty((2 * buf.shape[0], 5), np.int64)
        grown[:n] = buf[:n]
        buf = grown
    buf[n, J] = j
    buf[n, JLEN] = jlen
    buf[n, I] = i
    buf[n, ILEN] = ilen
    buf[n, SLOT] = slot
    return buf


@njit(cache=True)
def _listed(values, lo, hi, x):  # type: ignore[no-untyped-def]
    """Is ``x`` in the sorted run values[lo:hi]?"""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo < end and values[lo] == x


@njit(cache=True)
def _word_matches(kind, slot, t0, n1, r0, n2, tok_word, tok_key, tok_stem, nb_off, nb_val, buf, n):  # type: ignore[no-untyped-def]
    for j in range(n2):
        rw = tok_word[r0 + j]
        rk, rs = tok_key[r0 + j], tok_stem[r0 + j]
        lo, hi = nb_off[rw], nb_off[rw + 1]
        if kind == SYNONYM and lo == hi:
            continue
        for i in range(n1):
            if kind == EXACT:
                hit = tok_key[t0 + i] == rk
            elif kind == STEM:
                hit = tok_stem[t0 + i] == rs and tok_key[t0 + i] != rk
            else:
                hit = _listed(nb_val, lo, hi, tok_word[t0 + i])
            if hit:
                buf = _push(buf, n, j, 1, i, 1, slot)
                n += 1
    return buf, n


@njit(cache=True)
def _paraphrase_matches(
    slot,
    test,
    ref,
    ng_off,
    ng_start,
    ng_len,
    ng_q,
    occ_q,
    occ_start,
    occ_len,
    para_off,
    para_val,
    stamp,
    first,
    mark,
    buf,
    n,
):  # type: ignore[no-untyped-def]
    for side in range(2):
        source, target = (ref, test) if side == 0 else (test, ref)
        g0, g1 = ng_off[target], ng_off[target + 1]
        if g0 == g1:
            continue
        for k in range(g1 - 1, g0 - 1, -1):  # the first occurrence of each of the target's phrases
            stamp[occ_q[k]] = mark + side
            first[occ_q[k]] = k
        for k in range(ng_off[source], ng_off[source + 1]):
            start, length, q = ng_start[k], ng_len[k], ng_q[k]
            for e in range(para_off[q], para_off[q + 1]):
                p = para_val[e]
                if stamp[p] != mark + side:
                    continue
                x = first[p]
                while x < g1 and occ_q[x] == p:
                    if side == 0:
                        buf = _push(buf, n, start, length, occ_start[x], occ_len[x], slot)
                    else:
                        buf = _push(buf, n, occ_start[x], occ_len[x], start, length, slot)
                    n += 1
                    x += 1
    return buf, n


# columns of a path / candidate row: -score, chunks, distance, next reference index, end of the
# last test span (-1: none open), and for paths their last match node, for candidates the path
# they extend and the match they add (-1: none)
NEG, CHUNKS, DIST, IDX, LAST, NODE, FROM, MATCH = 0, 1, 2, 3, 4, 5, 5, 6


@njit(cache=True)
def _before(a, x, b, y):  # type: ignore[no-untyped-def]
    """Does row x of a sort before or with row y of b on (-score, chunks, distance)?"""
    if a[x, NEG] != b[y, NEG]:
        return a[x, NEG] < b[y, NEG]
    if a[x, CHUNKS] != b[y, CHUNKS]:
        return a[x, CHUNKS] < b[y, CHUNKS]
    return a[x, DIST] <= b[y, DIST]


@njit(cache=True)
def _search(at_off, m, fixed, n1, n2, exact_slot, chosen):  # type: ignore[no-untyped-def]
    """The beam search; writes the chosen match of each reference position into ``chosen``."""
    count = m.shape[0]
    score = np.empty(count, np.int64)
    for k in range(count):
        if exact_slot[m[k, SLOT]]:
            score[k] = m[k, JLEN] + m[k, ILEN]
        else:
            score[k] = (m[k, JLEN] >> 1) + (m[k, ILEN] >> 1)
    widest = 0
    for j in range(n2):
        widest = max(widest, at_off[j + 1] - at_off[j])
    words = (n1 + 63) >> 6
    # the paths (sorted, at most BEAM) and their test-word bit sets, the candidates of one step,
    # and the linked list of chosen matches (node: match, previous node)
    paths, nxt = np.zeros((BEAM, 6), np.int64), np.zeros((BEAM, 6), np.int64)
    paths[0, LAST], paths[0, NODE] = -1, -1
    mask, nxt_mask = np.zeros((BEAM, words), np.uint64), np.zeros((BEAM, words), np.uint64)
    alive = 1
    cand = np.empty((BEAM * (widest + 1), 7), np.int64)
    top = np.empty(BEAM, np.int64)
    node = np.empty((BEAM * n2 + 1, 2), np.int64)
    nodes = 0
    for cur in range(n2):
        c = 0
        fix = fixed[cur]
        for p in range(alive):
            neg, chunks, dist, last = (
                paths[p, NEG],
                paths[p, CHUNKS],
                paths[p, DIST],
                paths[p, LAST],
            )
            if cur < paths[p, IDX]:
                cand[c, NEG], cand[c, CHUNKS], cand[c, DIST], cand[c, IDX], cand[c, LAST] = (
                    neg,
                    chunks,
                    dist,
                    paths[p, IDX],
                    last,
                )
                cand[c, FROM], cand[c, MATCH] = p, -1
                c += 1
                continue
            if fix >= 0:
                cand[c, NEG] = neg - score[fix]
                cand[c, CHUNKS] = chunks + (1 if last != -1 and m[fix, I] != last else 0)
                cand[c, DIST] = dist + abs(m[fix, J] - m[fix, I])
                cand[c, IDX], cand[c, LAST] = m[fix, J] + m[fix, JLEN], m[fix, I] + m[fix, ILEN]
                cand[c, FROM], cand[c, MATCH] = p, -1
                c += 1
                continue
            for k in range(at_off[cur], at_off[cur + 1]):
                i = m[k, I]
                free = True
                for x in range(i, i + m[k, ILEN]):
                    if (mask[p, x >> 6] >> np.uint64(x & 63)) & np.uint64(1):
                        free = False
                        break
                if not free:
                    continue
                cand[c, NEG] = neg - score[k]
                cand[c, CHUNKS] = chunks + (1 if last != -1 and i != last else 0)
                cand[c, DIST] = dist
                cand[c, IDX], cand[c, LAST] = m[k, J] + m[k, JLEN], i + m[k, ILEN]
                cand[c, FROM], cand[c, MATCH] = p, k
                c += 1
                dist += abs(m[k, J] - i)
            cand[c, NEG], cand[c, CHUNKS], cand[c, DIST] = (
                neg,
                chunks + (1 if last != -1 else 0),
                dist,
            )
            cand[c, IDX], cand[c, LAST] = paths[p, IDX] + 1, -1
            cand[c, FROM], cand[c, MATCH] = p, -1
            c += 1
        # the first BEAM candidates of a stable sort on (-score, chunks, distance)
        kept = 0
        for x in range(c):
            if kept == BEAM and _before(cand, top[BEAM - 1], cand, x):
                continue  # not better than the last kept one: a later arrival loses the tie
            lo, hi = 0, kept
            while lo < hi:  # after every kept candidate that is not worse
                mid = (lo + hi) >> 1
                if _before(cand, top[mid], cand, x):
                    lo = mid + 1
                else:
                    hi = mid
            for z in range(min(kept, BEAM - 1), lo, -1):
                top[z] = top[z - 1]
            top[lo] = x
            kept = min(kept + 1, BEAM)
        for z in range(kept):
            x = top[z]
            p, k = cand[x, FROM], cand[x, MATCH]
            for col in range(5):
                nxt[z, col] = cand[x, col]
            for w in range(words):
                nxt_mask[z, w] = mask[p, w]
            if k >= 0:
                for w in range(m[k, I], m[k, I] + m[k, ILEN]):
                    nxt_mask[z, w >> 6] |= np.uint64(1) << np.uint64(w & 63)
                node[nodes, 0], node[nodes, 1] = k, paths[p, NODE]
                nxt[z, NODE] = nodes
                nodes += 1
            else:
                nxt[z, NODE] = paths[p, NODE]
        alive = kept
        paths, nxt = nxt, paths
        mask, nxt_mask = nxt_mask, mask
    best = 0
    for p in range(1, alive):  # the first of the best, an open chunk closed
        a = (paths[p, NEG], paths[p, CHUNKS] + (1 if paths[p, LAST] != -1 else 0), paths[p, DIST])
        b = (
            paths[best, NEG],
            paths[best, CHUNKS] + (1 if paths[best, LAST] != -1 else 0),
            paths[best, DIST],
        )
        if a < b:
            best = p
    at = paths[best, NODE]
    while at >= 0:
        chosen[m[node[at, 0], J]] = node[at, 0]
        at = node[at, 1]


@njit(cache=True)
def _align_pair(
    t0,
    n1,
    r0,
    n2,
    test,
    ref,
    tok_word,
    tok_key,
    tok_stem,
    tok_func,
    nb_off,
    nb_val,
    ng_off,
    ng_start,
    ng_len,
    ng_q,
    occ_q,
    occ_start,
    occ_len,
    para_off,
    para_val,
    kinds,
    exact_slot,
    work,
    buf,
    out,
):  # type: ignore[no-untyped-def]
    stamp, first, mark, at_off, fill, cover1, cover2, fixed = work
    identical = n1 == n2
    if identical:
        for x in range(n1):
            if tok_key[t0 + x] != tok_key[r0 + x]:
                identical = False
                break
    used = 1 if identical else kinds.shape[0]
    n = 0
    for slot in range(used):
        if kinds[slot] == PARAPHRASE:
            buf, n = _paraphrase_matches(
                slot,
                test,
                ref,
                ng_off,
                ng_start,
                ng_len,
                ng_q,
                occ_q,
                occ_start,
                occ_len,
                para_off,
                para_val,
                stamp,
                first,
                mark,
                buf,
                n,
            )
        else:
            buf, n = _word_matches(
                kinds[slot],
                slot,
                t0,
                n1,
                r0,
                n2,
                tok_word,
                tok_key,
                tok_stem,
                nb_off,
                nb_val,
                buf,
                n,
            )
    # group the matches by reference start, keeping their order (a counting sort)
    at_off[: n2 + 1] = 0
    for k in range(n):
        at_off[buf[k, J] + 1] += 1
    for j in range(n2):
        at_off[j + 1] += at_off[j]
    fill[:n2] = at_off[:n2]
    m = np.empty((n, 5), np.int64)
    for k in range(n):
        j = buf[k, J]
        m[fill[j], :] = buf[k, :]
        fill[j] += 1
    cover1[:n1] = 0
    cover2[:n2] = 0
    for k in range(n):
        cover2[m[k, J] : m[k, J] + m[k, JLEN]] += 1
        cover1[m[k, I] : m[k, I] + m[k, ILEN]] += 1
    fixed[:n2] = -1
    everything_fixed = True
    for j in range(n2):
        if at_off[j + 1] - at_off[j] == 1:
            k = at_off[j]
            alone = True
            for x in range(m[k, J], m[k, J] + m[k, JLEN]):
                alone = alone and cover2[x] == 1
            for x in range(m[k, I], m[k, I] + m[k, ILEN]):
                alone = alone and cover1[x] == 1
            if alone:
                fixed[j] = k
        if fixed[j] < 0 and at_off[j + 1] > at_off[j]:
            everything_fixed = False
    chosen = fixed[:n2].copy()
    if not everything_fixed:
        _search(at_off, m, fixed, n1, n2, exact_slot, chosen)
    # the statistics line
    out[0], out[1] = n1, n2
    for x in range(n1):
        out[2] += tok_func[t0 + x]
    for x in range(n2):
        out[3] += tok_func[r0 + x]
    chunks, last, pos = 0, -1, 0
    for j in range(n2):
        k = chosen[j]
        if k < 0:
            continue
        base = 4 + 4 * m[k, SLOT]
        for x in range(m[k, I], m[k, I] + m[k, ILEN]):
            out[base + (2 if tok_func[t0 + x] else 0)] += 1
        for x in range(j, j + m[k, JLEN]):
            out[base + (3 if tok_func[r0 + x] else 1)] += 1
        if j > pos and last != -1:  # a gap in the reference closes the chunk
            chunks += 1
            last = -1
        if last != -1 and m[k, I] != last:
            chunks += 1
        pos, last = j + m[k, JLEN], m[k, I] + m[k, ILEN]
    if last != -1:
        chunks += 1
    out[20] = chunks
    for s in range(kinds.shape[0]):
        out[21] += out[4 + 4 * s] + out[6 + 4 * s]
        out[22] += out[5 + 4 * s] + out[7 + 4 * s]
    return buf


@njit(cache=True)
def align_all(
    tests,
    refs,
    seg_off,
    tok_word,
    word_key,
    word_stem,
    word_func,
    nb_off,
    nb_val,
    ng_off,
    ng_start,
    ng_len,
    ng_q,
    occ_q,
    occ_start,
    occ_len,
    para_off,
    para_val,
    kinds,
    exact_slot,
):  # type: ignore[no-untyped-def]
    """The jar's statistics (pairs x 23) of aligning segment ``tests[p]`` to segment ``refs[p]``.

    Segments are runs of ``tok_word`` (word numbers; ``seg_off``) and of their table phrases
    (``ng_*``, and again sorted by phrase: ``occ_*``); words have a key, a stem key, a function
    flag and a sorted list of the other words they share a synset with (``nb_*``); phrases are
    numbered 0..k-1 and ``para_*`` lists, per phrase, the paraphrases among them (table order).
    """
    out = np.zeros((tests.shape[0], N_STATS), np.int64)
    buf = np.empty((256, 5), np.int64)
    tok_key, tok_stem, tok_func = word_key[tok_word], word_stem[tok_word], word_func[tok_word]
    longest = 1
    for s in range(seg_off.shape[0] - 1):
        longest = max(longest, seg_off[s + 1] - seg_off[s])
    phrases = para_off.shape[0] - 1
    stamp, first = np.full(phrases, -1, np.int64), np.zeros(phrases, np.int64)
    at_off, fill = np.zeros(longest + 1, np.int64), np.zeros(longest + 1, np.int64)
    cover1, cover2, fixed = (
        np.zeros(longest, np.int64),
        np.zeros(longest, np.int64),
        np.zeros(longest, np.int64),
    )
    for p in range(tests.shape[0]):
        test, ref = tests[p], refs[p]
        t0, r0 = seg_off[test], seg_off[ref]
        work = (stamp, first, 2 * p, at_off, fill, cover1, cover2, fixed)
        buf = _align_pair(
            t0,
            seg_off[test + 1] - t0,
            r0,
            seg_off[ref + 1] - r0,
            test,
            ref,
            tok_word,
            tok_key,
            tok_stem,
            tok_func,
            nb_off,
            nb_val,
            ng_off,
            ng_start,
            ng_len,
            ng_q,
            occ_q,
            occ_start,
            occ_len,
            para_off,
            para_val,
            kinds,
            exact_slot,
            work,
            buf,
            out[p],
        )
    return out
