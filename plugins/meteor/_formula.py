"""METEOR's score from its sufficient statistics, vectorised (the jar's arithmetic, operation by
operation, so segment and corpus values come out bit-identical)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from capmetrics.plugins.ngram.pyfloat import py_pow

#: The matching modules, in the jar's order (a module's slot is its place in the ``modules`` given).
MODULES = ("exact", "stem", "synonym", "paraphrase")
#: Length of the jar's sufficient-statistics line (4 module slots).
N_STATS = 23
# Columns of the jar's 23-number statistics line.
TEST_LEN, REF_LEN, TEST_FUNC, REF_FUNC = 0, 1, 2, 3
CHUNKS, TEST_MATCHED, REF_MATCHED = 20, 21, 22
MODULE_SLOTS = 4


def _perfect(s: np.ndarray) -> np.ndarray:
    """Rows where every word on both sides is matched in one chunk (fragmentation 0)."""
    test_total = sum(s[:, 4 + 4 * i] + s[:, 6 + 4 * i] for i in range(MODULE_SLOTS))
    ref_total = sum(s[:, 5 + 4 * i] + s[:, 7 + 4 * i] for i in range(MODULE_SLOTS))
    return (test_total == s[:, TEST_LEN]) & (ref_total == s[:, REF_LEN]) & (s[:, CHUNKS] == 1)


def aggregate(stats: np.ndarray) -> np.ndarray:
    """The jar's corpus statistics: column sums, except that perfect rows add no chunk."""
    s = np.asarray(stats, dtype=np.float64).reshape(-1, 23)
    total = s.sum(axis=0)
    total[CHUNKS] = s[~_perfect(s), CHUNKS].sum()
    return total[None, :]


def _power(frag: np.ndarray, beta: float) -> np.ndarray:
    """``frag ** beta`` as the jar's ``Math.pow`` rounds it: the C library's ``pow`` (NumPy's SIMD
    ``power`` differs in the last bit for about 2 % of the segments), once per distinct value."""
    distinct, inverse = np.unique(frag, return_inverse=True)
    return py_pow(distinct, beta)[inverse].reshape(frag.shape)


def meteor_scores(
    stats: np.ndarray,
    alpha: float,
    beta: float,
    gamma: float,
    delta: float,
    weights: Sequence[float],
) -> np.ndarray:
    """Scores of rows of statistics (n x 23): F-mean of weighted precision/recall times
    (1 - gamma * fragmentation**beta), 0 where undefined, never negative."""
    s = np.asarray(stats, dtype=np.float64).reshape(-1, 23)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        test_len = (delta * (s[:, TEST_LEN] - s[:, TEST_FUNC])) + ((1.0 - delta) * s[:, TEST_FUNC])
        ref_len = (delta * (s[:, REF_LEN] - s[:, REF_FUNC])) + ((1.0 - delta) * s[:, REF_FUNC])
        test_w = np.zeros(len(s))
        ref_w = np.zeros(len(s))
        for i, w in enumerate(weights):
            test_w = test_w + s[:, 4 + 4 * i] * w * delta
        for i, w in enumerate(weights):
            ref_w = ref_w + s[:, 5 + 4 * i] * w * delta
        for i, w in enumerate(weights):
            test_w = test_w + s[:, 6 + 4 * i] * w * (1.0 - delta)
        for i, w in enumerate(weights):
            ref_w = ref_w + s[:, 7 + 4 * i] * w * (1.0 - delta)
        precision = test_w / test_len
        recall = ref_w / ref_len
        fmean = 1.0 / (((1.0 - alpha) / precision) + (alpha / recall))
        frag = np.where(
            _perfect(s), 0.0, s[:, CHUNKS] / ((s[:, TEST_MATCHED] + s[:, REF_MATCHED]) / 2)
        )
        penalty = gamma * _power(frag, beta)
        score = fmean * (1.0 - penalty)
    return np.where(np.isnan(score), 0.0, np.maximum(score, 0.0))
