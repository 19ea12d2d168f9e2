"""MAUVE (Pillutla et al. 2021) as a multi-candidate statistic with permutation p-values.

The value equals mauve-text 0.4.0's ``compute_mauve(p_features=<reference embeddings>,
q_features=<candidate embeddings>).mauve`` with the same settings: l2-normalised features,
PCA to 90 % explained variance, faiss k-means into max(2, round(min(n, m) / 10)) buckets
(5 restarts, 500 iterations, seed 25 + 2), 25 mixture weights, scaling 5. A permutation split
is quantised as mauve-text quantises it when called on that split (its k-means seeding depends
on the split's row order; see ``_quantise``), with the PCA done once per item and the k-means
runs of all splits batched; MAUVE of every split is computed at once (see ``_divergence``).

MAUVE is a similarity (1 = same distribution); the p-value is the share of splits whose MAUVE
is at most the observed one (how unusual so low a MAUVE is under exchangeability).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
from capmetrics import Embedder, MetricError, hookimpl
from capmetrics.components.permutation import (
    NullDistribution,
    PValueMethod,
    SplitStatistic,
    require_finite,
)
from capmetrics.plugins.mauve._divergence import histograms, mauve_scores
from capmetrics.plugins.mauve._quantise import SplitQuantiser
from capmetrics.plugins.multicandidate import EmbeddingStatistic


class MAUVE(EmbeddingStatistic):
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
        row_order: the rows each permutation split hands to mauve-text's quantisation (faiss
            seeds its k-means from rows at fixed positions, so the order matters): ``pooled``
            = candidates then references, each in the item's order (MAUVE of a split equals
            ``compute_mauve`` called on it that way); ``shuffled`` = each side in a random order
            (the split's value is then ``compute_mauve`` on a uniformly random permutation of
            the item's texts; the observed split, row 0 of the test, keeps the item's order).
        p_value: ``auto``, ``exact``, ``monte-carlo`` or ``none`` (see ``trm``).
        permutations: random splits of a Monte-Carlo p-value.
        seed: seed of the Monte-Carlo splits.
    """

    name = "mauve"
    accepts_empty_candidates = True  # an empty text has the embedder's vector for ""
    requires = ("torch", "mauve")
    higher_is_better: ClassVar[bool] = True  # type: ignore[misc]

    def __init__(
        self,
        embedder: Embedder | None = None,
        buckets: Literal["auto"] | int = "auto",
        explained_variance: float = 0.9,
        kmeans_redo: int = 5,
        kmeans_iterations: int = 500,
        kmeans_seed: int = 25,
        scaling: float = 5.0,
        curve_points: int = 25,
        row_order: Literal["pooled", "shuffled"] = "pooled",
        p_value: PValueMethod = "auto",
        permutations: int = 1000,
        seed: int = 0,
    ) -> None:
        self.embedder = embedder
        self.buckets = buckets
        self.explained_variance = explained_variance
        self.kmeans_redo = kmeans_redo
        self.kmeans_iterations = kmeans_iterations
        self.kmeans_seed = kmeans_seed
        self.scaling = scaling
        self.curve_points = curve_points
        self.row_order = row_order
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
        if self.row_order not in ("pooled", "shuffled"):
            raise MetricError(f"row_order={self.row_order!r} is not one of pooled, shuffled")
        z = require_finite(pooled, "the embeddings")
        buckets = self.bucket_count(n, len(z) - n)
        if buckets > len(z):
            raise MetricError(
                f"buckets={buckets}: more clusters than the {len(z)} texts of the item"
            )
        quantiser = SplitQuantiser(
            z,
            buckets,
            self.explained_variance,
            self.kmeans_redo,
            self.kmeans_iterations,
            self.kmeans_seed,
        )
        clusters = np.arange(buckets)
        calls = iter(range(1 << 62))  # a fresh shuffle stream per call, reproducible from seed

        def stat(masks: np.ndarray) -> np.ndarray:
            shuffle = (
                None
                if self.row_order == "pooled"
                else np.random.default_rng(
                    np.random.SeedSequence([self.seed & 0xFFFFFFFF, next(calls)])
                )
            )
            onehot = quantiser.labels(masks, shuffle)[:, :, None] == clusters
            q = histograms(np.einsum("sn,snk->sk", masks, onehot))
            p = histograms(np.einsum("sn,snk->sk", 1.0 - masks, onehot))
            return -mauve_scores(p, q, self.scaling, self.curve_points)

        return stat

    def _test(
        self,
        pooled: np.ndarray,
        candidates: list[str],
        references: list[str],
        method: PValueMethod | None = None,
    ) -> NullDistribution:
        null = super()._test(pooled, candidates, references, method)
        null.observed, null.null = -null.observed, -null.null
        return null


@hookimpl
def register_statistics(register: Callable[..., None]) -> None:
    register(MAUVE)
