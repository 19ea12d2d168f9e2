"""MAUVE (Pillutla et al. 2021) as a multi-candidate statistic with permutation p-values.

The value equals mauve-text 0.4.0's ``compute_mauve(p_features=<reference embeddings>,
q_features=<candidate embeddings>).mauve`` with the same settings: l2-normalised features,
PCA to 90 % explained variance, faiss k-means into max(2, round(min(n, m) / 10)) buckets
(5 restarts, 500 iterations, seed 25 + 2), 25 mixture weights, scaling 5. The pool is
quantised once per item (see ``_quantise``); each permutation split only re-counts the cluster
histograms, and MAUVE of every split is computed at once (see ``_divergence``).

MAUVE is a similarity (1 = same distribution); the p-value is the share of splits whose MAUVE
is at most the observed one (how unusual so low a MAUVE is under exchangeability).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
from capmetrics import Embedder, MetricError, hookimpl
from capmetrics.permutation import (
    NullDistribution,
    PValueMethod,
    SplitStatistic,
    require_finite,
)
from capmetrics.plugins.multicandidate.kernels import _EmbeddingStatistic
from capmetrics.plugins.mauve._divergence import histograms, mauve_scores
from capmetrics.plugins.mauve._quantise import cluster_labels


class MAUVE(_EmbeddingStatistic):
    """MAUVE between the candidate and reference embeddings of an item (higher = closer).

    Args:
        embedder: text embedder (default: the ``bert`` sentence-transformer, all-MiniLM-L6-v2).
        buckets: k-means clusters; ``auto`` = max(2, round(min(n, m) / 10)) as mauve-text.
        explained_variance: PCA variance kept before clustering (mauve-text's
            ``kmeans_explained_var``).
        kmeans_redo: k-means restarts (``kmeans_num_redo``).
        kmeans_iterations: k-means iterations (``kmeans_max_iter``).
        kmeans_seed: mauve-text's ``seed`` (PCA uses seed + 1, k-means seed + 2).
        scaling: the constant c (``mauve_scaling_factor``).
        curve_points: mixture weights on the divergence curve
            (``divergence_curve_discretization_size``).
        p_value: ``auto``, ``exact``, ``monte-carlo`` or ``none`` (see ``trm``).
        permutations: random splits of a Monte-Carlo p-value.
        seed: seed of the Monte-Carlo splits.
    """

    name = "mauve"
    accepts_empty_candidates = True  # an empty text has the embedder's vector for ""
    requires = ("torch", "mauve")
    higher_is_better: ClassVar[bool] = True  # type: ignore[misc]

    def __init__(self, embedder: Embedder | None = None, buckets: Literal["auto"] | int = "auto",
                 explained_variance: float = 0.9, kmeans_redo: int = 5, kmeans_iterations: int = 500,
                 kmeans_seed: int = 25, scaling: float = 5.0, curve_points: int = 25,
                 p_value: PValueMethod = "auto", permutations: int = 1000, seed: int = 0) -> None:
        self.embedder = embedder
        self.buckets = buckets
        self.explained_variance = explained_variance
        self.kmeans_redo = kmeans_redo
        self.kmeans_iterations = kmeans_iterations
        self.kmeans_seed = kmeans_seed
        self.scaling = scaling
        self.curve_points = curve_points
        self.p_value = p_value
        self.permutations = permutations
        self.seed = seed

    def bucket_count(self, n: int, m: int) -> int:
        if self.buckets == "auto":
            return max(2, round(min(n, m) / 10))
        if not isinstance(self.buckets, int) or self.buckets < 2:
            raise MetricError(f"buckets={self.buckets!r}: use auto or an integer >= 2")
        return self.buckets

    def split_statistic(self, pooled: np.ndarray, n: int) -> SplitStatistic:
        """−MAUVE of every split (the permutation test counts splits with a value at least the
        observed one, i.e. MAUVE at most the observed MAUVE)."""
        if not 0.0 < self.explained_variance < 1.0:
            raise MetricError(f"explained_variance={self.explained_variance}: must be in (0, 1)")
        z = require_finite(pooled, "the embeddings")
        buckets = self.bucket_count(n, len(z) - n)
        labels = cluster_labels(z, buckets, self.explained_variance, self.kmeans_redo,
                                self.kmeans_iterations, self.kmeans_seed)
        onehot = np.zeros((len(z), buckets))
        onehot[np.arange(len(z)), labels] = 1.0

        def stat(masks: np.ndarray) -> np.ndarray:
            q = histograms(masks @ onehot)
            p = histograms((1.0 - masks) @ onehot)
            return -mauve_scores(p, q, self.scaling, self.curve_points)

        return stat

    def _test(self, pooled: np.ndarray, candidates: list[str], references: list[str],
              method: PValueMethod | None = None) -> NullDistribution:
        null = super()._test(pooled, candidates, references, method)
        null.observed, null.null = -null.observed, -null.null
        return null


@hookimpl
def register_statistics(register: Callable[..., None]) -> None:
    register(MAUVE)
