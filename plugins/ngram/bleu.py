"""BLEU-1..4 exactly as coco-caption's ``Bleu(4)`` computes them (option ``closest``).

Per caption: clipped n-gram matches against the maximum count over the references, the
closest reference length (ties go to the shorter one), the smoothing constants 1e-15 and 1e-9.
The corpus value comes from the summed statistics, not from the mean of the per-caption values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from capmetrics import Scores, Tokenizer
from capmetrics.plugins.ngram.counts import PTB, Batch, BatchDistance, match, ngrams
from capmetrics.plugins.ngram.pyfloat import py_exp, py_pow

TINY = 1e-15
SMALL = 1e-9


def bleu_values(
    correct: np.ndarray, guess: np.ndarray, testlen: np.ndarray, reflen: np.ndarray
) -> np.ndarray:
    """BLEU-1..n from match statistics; the last axis of ``correct`` and ``guess`` is the order.

    coco-caption's operations in its order, its powers and exponentials as Python computes them
    (C ``pow`` and ``exp``, see :mod:`~capmetrics.plugins.ngram.pyfloat`): the same bits."""
    out = np.empty(correct.shape)
    b = np.ones(correct.shape[:-1])
    for k in range(correct.shape[-1]):
        b = b * ((correct[..., k] + TINY) / (guess[..., k] + SMALL))
        out[..., k] = b if k == 0 else py_pow(b, 1.0 / (k + 1))  # pow(x, 1.0) is x
    ratio = np.asarray((testlen + TINY) / (reflen + SMALL))
    short = ratio < 1
    if short.any():
        brevity = np.ones(ratio.shape)
        brevity[short] = py_exp(1 - 1 / ratio[short])
        out *= brevity[..., None]
    return out


def closest_reflen(batch: Batch) -> np.ndarray:
    """Per item, the reference length nearest the candidate's; a tie goes to the shorter."""
    lengths, valid = batch.ref_lengths, batch.item_slots >= 0
    gap = np.where(valid, np.abs(lengths - batch.cand_lengths[:, None]), np.iinfo(np.int64).max)
    nearest = valid & (gap == gap.min(axis=1, keepdims=True))
    return np.where(nearest, lengths, np.iinfo(np.int64).max).min(axis=1)


class Bleu(BatchDistance):
    """BLEU of order ``order`` as coco-caption computes it (base of ``bleu-1`` .. ``bleu-4``)."""

    order: ClassVar[int] = 4
    distance_offset = 1.0

    def __init__(self, tokenizer: Tokenizer = PTB) -> None:
        self.tokenizer = tokenizer

    def matched(self, batch: Batch, per_slot: bool) -> np.ndarray:
        """Clipped n-gram matches per item and order (per slot too if ``per_slot``); each
        order's column is computed once per batch (BLEU-1..4 of a run share it)."""
        memo = batch.memo.setdefault(("bleu-matched", per_slot), [])
        for table in ngrams(batch.sentences, self.order)[len(memo) :]:
            m = match(batch, table)
            if per_slot:
                clipped = np.minimum(m.count[:, None], m.ref_counts)
            else:
                clipped = np.minimum(m.count, m.ref_counts.max(axis=1))
            memo.append(m.per_item(clipped, len(batch)))
        return np.stack(memo[: self.order], axis=-1)

    def guesses(self, batch: Batch) -> np.ndarray:
        """Number of candidate n-grams per item and order."""
        return np.maximum(0, batch.cand_lengths[:, None] - np.arange(self.order)).astype(float)

    def score_batch(self, batch: Batch) -> Scores:
        return self._scores_and_sums(batch)[0]

    def _scores_and_sums(self, batch: Batch) -> tuple[Scores, np.ndarray]:
        """The scores and the corpus sums (correct and guessed n-grams per order, test and
        reference lengths) that the corpus value comes from."""
        testlen = batch.cand_lengths.astype(float)
        reflen = closest_reflen(batch).astype(float)
        correct, guess = self.matched(batch, per_slot=False), self.guesses(batch)
        by_order = bleu_values(correct, guess, testlen, reflen)
        sums = np.concatenate(
            [correct.sum(axis=0), guess.sum(axis=0), [testlen.sum(), reflen.sum()]]
        )
        return self._scores(by_order, sums), sums

    def _scores(self, by_order: np.ndarray, sums: np.ndarray) -> Scores:
        n = self.order
        corpus = bleu_values(sums[:n], sums[n : 2 * n], sums[2 * n], sums[2 * n + 1])
        details = {
            "corpus_by_order": corpus.tolist(),
            "by_order": by_order,
            "testlen": float(sums[2 * n]),
            "reflen": float(sums[2 * n + 1]),
        }
        return Scores(by_order[:, -1], float(corpus[-1]), details)

    def score_part(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[Scores, Any]:
        if len(candidates) == 0:
            return self.score(candidates, references), np.zeros(2 * self.order + 2)
        return self._scores_and_sums(self.batch(candidates, references))

    def merge_scores(self, parts: Sequence[tuple[Scores, Any]]) -> Scores:
        """Corpus BLEU from the summed statistics of the parts (sums of integers: exact)."""
        by_order = np.concatenate(
            [scores.details["by_order"] for scores, _ in parts if len(scores.values)]
        )
        return self._scores(by_order, np.sum([sums for _, sums in parts], axis=0))

    def slot_scores(self, batch: Batch) -> np.ndarray:
        correct = self.matched(batch, per_slot=True)
        testlen = batch.cand_lengths[:, None].astype(float)
        values = bleu_values(correct, self.guesses(batch)[:, None, :], testlen, batch.ref_lengths)
        return values[..., -1]


def _bleu_order(n: int) -> type[Bleu]:
    """The registered class of BLEU-n."""
    doc = f"BLEU-{n}, value {n} of coco-caption's ``Bleu(4)`` (n-grams up to {n}, brevity penalty)."
    return type(
        f"Bleu{n}",
        (Bleu,),
        {"name": f"bleu-{n}", "order": n, "__doc__": doc, "__module__": __name__},
    )


Bleu1, Bleu2, Bleu3, Bleu4 = (_bleu_order(n) for n in range(1, 5))
