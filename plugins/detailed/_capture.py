"""CAPTURE's matching and F-scores between a candidate's and a reference's parsed graphs.

Objects, attribute words and relations are matched in three stages, as CAPTURE's
``compute_match`` and ``compute_f_score`` do: *exact* (each candidate element takes the first
equal, still unmatched reference element), then *synonym* (the first unmatched reference element
that contains it or is contained in it as a string, or shares a WordNet lemma name with it:
CAPTURE's synonym IoU > 0; a relation needs this of subject, relation and object alike), then
*soft*: the elements left on both sides are embedded (unit vectors) and the candidate side gains
the sum of each left candidate's best cosine, the reference side the sum of each left reference's.
Precision is the candidate side's matches over the candidate's elements plus ``eps``, recall the
reference side's over the reference's plus ``eps``, F1 = 2PR / (P + R + eps); CAPTURE is
(alpha·F_obj + beta·F_attr + gamma·F_rel) / (alpha + beta + gamma).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from capmetrics.plugins.detailed._graphs import Parsed

#: The values of one (candidate, reference) comparison, in CAPTURE's ``compute_f_score`` order.
VALUES = (
    "capture",
    "object_precision",
    "object_recall",
    "object_f1",
    "attribute_precision",
    "attribute_recall",
    "attribute_f1",
    "relation_precision",
    "relation_recall",
    "relation_f1",
)
CATEGORIES = ("object", "attribute", "relation")


@dataclass
class Match:
    """One category's hard matches and the elements left for soft matching (as phrases)."""

    n_candidate: int
    n_reference: int
    matched: int
    left_candidates: list[str] = field(default_factory=list)
    left_references: list[str] = field(default_factory=list)


def _greedy(
    cands: Sequence[object],
    refs: Sequence[object],
    same: Callable[[object, object], bool],
    taken_c: set[int],
    taken_r: set[int],
) -> int:
    """Each unmatched candidate takes the first unmatched reference ``same`` accepts."""
    found = 0
    for i, c in enumerate(cands):
        if i in taken_c:
            continue
        for j, r in enumerate(refs):
            if j not in taken_r and same(c, r):
                taken_c.add(i)
                taken_r.add(j)
                found += 1
                break
    return found


def match(
    cands: Sequence[object],
    refs: Sequence[object],
    synonym: Callable[[object, object], bool] | None,
    phrase: Callable[[object], str],
) -> Match:
    """Exact, then (with ``synonym``) synonym matching; what is left, as phrases."""
    taken_c: set[int] = set()
    taken_r: set[int] = set()
    found = _greedy(cands, refs, lambda c, r: c == r, taken_c, taken_r)
    if synonym is not None:
        found += _greedy(cands, refs, synonym, taken_c, taken_r)
    return Match(
        len(cands),
        len(refs),
        found,
        [phrase(c) for i, c in enumerate(cands) if i not in taken_c],
        [phrase(r) for j, r in enumerate(refs) if j not in taken_r],
    )


def word_synonyms(synonyms: Callable[[str], frozenset[str]]) -> Callable[[object, object], bool]:
    """CAPTURE's synonym test of two words or phrases: one contains the other, or their
    WordNet lemma names (spaces as ``_``) intersect."""

    def same(a: object, b: object) -> bool:
        x, y = str(a), str(b)
        if x in y or y in x:
            return True
        return not synonyms("_".join(x.split())).isdisjoint(synonyms("_".join(y.split())))

    return same


def relation_synonyms(word: Callable[[object, object], bool]) -> Callable[[object, object], bool]:
    """Two relations are synonyms when subject, relation and object each are."""
    return lambda a, b: all(word(x, y) for x, y in zip(a, b))  # type: ignore[call-overload]


def matches(
    cand: Parsed, ref: Parsed, synonym: Callable[[object, object], bool] | None
) -> tuple[Match, ...]:
    """The object, attribute and relation matches of a candidate against one reference."""
    relation = relation_synonyms(synonym) if synonym is not None else None
    return (
        match(cand.objects, ref.objects, synonym, str),
        match(cand.attributes, ref.attributes, synonym, str),
        match(cand.relations, ref.relations, relation, " ".join),
    )  # type: ignore[arg-type]


def soft_gain(m: Match, vectors: Callable[[list[str]], np.ndarray]) -> tuple[float, float]:
    """The candidate and reference sides' soft matches of what hard matching left."""
    if not m.left_candidates or not m.left_references:
        return 0.0, 0.0
    c, r = vectors(m.left_candidates), vectors(m.left_references)
    sim = c @ r.T
    return float(np.sum(np.max(sim, axis=1))), float(np.sum(np.max(sim, axis=0)))


def f_scores(
    ms: Sequence[Match],
    gains: Sequence[tuple[float, float]],
    alpha: float,
    beta: float,
    gamma: float,
    eps: float,
) -> list[float]:
    """CAPTURE and the nine per-category values (``VALUES``) of one comparison."""
    out: list[float] = []
    f1s = []
    for m, (gain_c, gain_r) in zip(ms, gains):
        precision = (m.matched + gain_c) / (m.n_candidate + eps)
        recall = (m.matched + gain_r) / (m.n_reference + eps)
        f1 = 2 * precision * recall / (precision + recall + eps)
        out.extend((precision, recall, f1))
        f1s.append(f1)
    score = alpha * f1s[0] + beta * f1s[1] + gamma * f1s[2]
    score /= alpha + beta + gamma
    return [score, *out]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norms, as CAPTURE's phrase encoder normalises them."""
    return vectors / np.sqrt(np.sum(vectors**2, axis=1, keepdims=True))
