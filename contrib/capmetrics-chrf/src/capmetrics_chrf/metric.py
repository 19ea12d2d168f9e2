"""chrF and chrF++ as a capmetrics distance, numerically equal to sacrebleu's ``CHRF``."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

import numpy as np
from capmetrics import DataError, Distance, MetricError, Scores

from capmetrics_chrf.ngrams import NgramTable


class ChrF(Distance):
    """chrF (Popović 2015): F-beta of averaged character n-gram precision and recall, 0–100.

    Character n-grams are taken with whitespace removed; ``word_order=2`` adds word uni- and
    bigrams (chrF++, Popović 2017). Against several references a candidate keeps the statistics
    of its best-scoring reference; the corpus value comes from the summed statistics. Both follow
    sacrebleu's ``CHRF`` with its defaults (no lowercasing, effective-order averaging).

    It takes part in capmetrics' statistics protocol
    (``capmetrics.components.protocols.ScoresInParts``): :meth:`score_part` gives a part's summed
    statistics and :meth:`merge_scores` the corpus value from their sum, so a file streams
    (``--chunk-size``), items fan out to workers and DDP ranks combine sums, with the values of one
    process over everything.

    Args:
        char_order: highest character n-gram order.
        word_order: highest word n-gram order (0 for chrF, 2 for chrF++).
        beta: weight of recall relative to precision.
    """

    name = "chrf"
    higher_is_better = True
    distance_offset = 100.0
    accepts_empty_candidates = True  # an empty candidate scores 0, as in sacrebleu

    def __init__(self, char_order: int = 6, word_order: int = 0, beta: float = 2.0) -> None:
        self.char_order = char_order
        self.word_order = word_order
        self.beta = beta

    def signature_extra(self) -> dict[str, str]:
        try:
            return {"capmetrics-chrf": version("capmetrics-chrf")}
        except PackageNotFoundError:  # imported from a source tree
            return {"capmetrics-chrf": "unknown"}

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        """Sentence chrF of each candidate against its references, and the corpus chrF.

        ``details`` holds ``statistics`` (candidates × orders × [hypothesis n-grams, reference
        n-grams, matches], of the chosen reference) and ``best_reference`` (its index).
        """
        self._check_params()
        _check_input(candidates, references)
        texts, hyp, ref, first_pair = _pairs(candidates, references)
        table = NgramTable.build(texts, self.char_order, self.word_order)
        stats = np.stack([table.totals[hyp], table.totals[ref], table.matches(hyp, ref)], axis=-1)
        stats[..., 0] *= (
            stats[..., 1] > 0
        )  # sacrebleu: no hypothesis n-grams where the reference has none
        f = self.f_score(stats)
        best = _first_max(f, first_pair)
        chosen = stats[best]
        corpus = float(self.f_score(chosen.sum(axis=0, keepdims=True))[0])
        details = {"statistics": chosen, "best_reference": best - first_pair[:-1]}
        return Scores(f[best], corpus, details)

    # -- the statistics protocol (capmetrics.components.protocols.ScoresInParts)
    # -------------------------
    def score_part(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[Scores, np.ndarray]:
        """:meth:`score` of one part of a corpus and the part's summed statistics (orders × 3
        integers: hypothesis n-grams, reference n-grams, matches), which add over parts."""
        scores = self.score(candidates, references)
        return scores, scores.details["statistics"].sum(axis=0)

    def merge_scores(self, parts: Sequence[tuple[Scores, np.ndarray]]) -> Scores:
        """The :meth:`score` of a whole corpus from its consecutive parts' :meth:`score_part`:
        the values and details joined in order, the corpus chrF from the summed statistics
        (sums of integers: the same value to the bit)."""
        if not parts:
            return self.score([], [])
        values = np.concatenate([scores.values for scores, _ in parts])
        details = {
            key: np.concatenate([scores.details[key] for scores, _ in parts])
            for key in ("statistics", "best_reference")
        }
        total = np.sum([sums for _, sums in parts], axis=0)
        corpus = float(self.f_score(np.asarray(total)[None])[0])
        return Scores(values, corpus, details)

    def f_score(self, stats: np.ndarray) -> np.ndarray:
        """chrF of statistics shaped (rows, orders, 3): precision and recall are averaged over
        the orders where both the hypothesis and the reference have n-grams, then combined."""
        hyp, ref, match = (stats[..., k].astype(float) for k in range(3))
        effective = (hyp > 0) & (ref > 0)
        precision = np.zeros(len(stats))
        recall = np.zeros(len(stats))
        for o in range(stats.shape[1]):  # in order, like sacrebleu, for equal rounding
            e = effective[:, o]
            precision += np.where(e, match[:, o] / np.where(e, hyp[:, o], 1.0), 0.0)
            recall += np.where(e, match[:, o] / np.where(e, ref[:, o], 1.0), 0.0)
        n = effective.sum(axis=1)
        precision = np.where(n > 0, precision / np.maximum(n, 1), 0.0)
        recall = np.where(n > 0, recall / np.maximum(n, 1), 0.0)
        factor = self.beta**2
        denominator = factor * precision + recall
        ok = denominator > 0
        value = (1 + factor) * precision * recall / np.where(ok, denominator, 1.0)
        return np.where(ok, 100 * value, 0.0)

    def _check_params(self) -> None:
        problems = []
        for key in ("char_order", "word_order"):
            value = getattr(self, key)
            if not isinstance(value, (int, np.integer)) or value < 0:
                problems.append(f"{key} must be a non-negative integer, got {value!r}")
        if not problems and self.char_order + self.word_order == 0:
            problems.append("char_order and word_order are both 0: there is nothing to count")
        if not isinstance(self.beta, (int, float)) or not self.beta >= 0:
            problems.append(f"beta must be a non-negative number, got {self.beta!r}")
        if problems:
            raise MetricError(f"{self.spec}: " + "; ".join(problems))


def _check_input(candidates: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    if len(candidates) != len(references):
        raise DataError(
            [f"{len(candidates)} candidates but {len(references)} reference lists"], header="chrf"
        )
    problems = [f"item {i}: no references" for i, refs in enumerate(references) if len(refs) == 0]
    problems += [
        f"item {i}: candidate is {type(c).__name__}, not str"
        for i, c in enumerate(candidates)
        if not isinstance(c, str)
    ]
    problems += [
        f"item {i}: reference {j} is {type(r).__name__}, not str"
        for i, refs in enumerate(references)
        for j, r in enumerate(refs)
        if not isinstance(r, str)
    ]
    if problems:
        raise DataError(problems, header="chrf")


def _pairs(
    candidates: Sequence[str], references: Sequence[Sequence[str]]
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct texts, and for every (candidate, reference) pair the indices of both texts;
    the pairs of candidate i are ``first_pair[i]:first_pair[i + 1]``."""
    index: dict[str, int] = {}
    hyp = [index.setdefault(c, len(index)) for c, refs in zip(candidates, references) for _ in refs]
    ref = [index.setdefault(r, len(index)) for refs in references for r in refs]
    sizes = np.fromiter(map(len, references), dtype=np.int64, count=len(references))
    first_pair = np.concatenate([[0], np.cumsum(sizes)])
    return list(index), np.asarray(hyp, dtype=np.int64), np.asarray(ref, dtype=np.int64), first_pair


def _first_max(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Index of the first maximum of each group ``values[first[g]:first[g + 1]]`` (non-empty)."""
    if len(first) == 1:
        return np.zeros(0, dtype=np.int64)
    sizes = np.diff(first)
    group_max = np.repeat(np.maximum.reduceat(values, first[:-1]), sizes)
    where_max = np.where(values == group_max, np.arange(len(values)), len(values))
    return np.minimum.reduceat(where_max, first[:-1])
