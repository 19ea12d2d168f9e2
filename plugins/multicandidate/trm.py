"""Triangle-rank metrics (Chan et al. 2022, eqs. 3–4): exact TRM over any registered distance.

For every directed triangle with one point ``x`` on one side and an ordered pair ``(u, v)`` of
distinct positions on the other side, IN = d(u, v), E0 = d(x, u), E1 = d(x, v) and

* I0 = [IN ≤ E0 and IN ≤ E1], I1 = [E0 ≤ IN ≤ E1 or E1 ≤ IN ≤ E0], I2 = [E0 ≤ IN and E1 ≤ IN]
  (≤ as printed, so ties may set several indicators);
* 𝓘 = Σ (I0 + I1 + I2) over both kinds of triangles, Q = Σ_k |Σ I_k / 𝓘 − 1/3|.

How it is fast: the indicators of every ordered triple of pooled positions depend only on the
pooled distance matrix, which is computed once per item. A triangle (x; u, v) belongs to a
split ``s`` (1 = candidate side) when ``s_u = s_v ≠ s_x``, and summing the indicators under
that condition reduces, for binary ``s``, to ``S_k(s) = sᵀ W_k s + R_k · s`` with two small
precomputed matrices. Every split's statistic is then two matrix products, computed in exact
integer arithmetic (held in float64), so ties between splits compare exactly. Distances are
compared after rounding to 12 significant digits of the item's largest distance, so values
equal in exact arithmetic but computed along different float paths tie.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from capmetrics import Distance, MetricError
from capmetrics.components.permutation import (
    PermutationStatistic,
    PValueMethod,
    SplitStatistic,
    require_finite,
)
from capmetrics.plugins.multicandidate.fitting import FitsDistance

#: Distances equal to this many significant digits (of the item's largest distance) tie.
TIE_DIGITS = 12


@lru_cache(maxsize=64)
def _distinct(size: int) -> np.ndarray:
    """True where the three positions of an ordered triple (x, u, v) are distinct."""
    eye = np.eye(size, dtype=bool)
    mask = ~(eye[:, :, None] | eye[:, None, :] | eye[None, :, :])
    mask.flags.writeable = False
    return mask


def triangle_indicators(d: np.ndarray) -> np.ndarray:
    """Indicators ``I[k, x, u, v]`` (k = 0, 1, 2) of every ordered triple of distinct positions.

    ``d`` is the pooled distance matrix; ``d[a, b]`` is the distance from ``a`` to ``b``.
    """
    inner = d[None, :, :]  # IN = d(u, v)
    e0 = d[:, :, None]  # E0 = d(x, u)
    e1 = d[:, None, :]  # E1 = d(x, v)
    e0_le, e1_le = e0 <= inner, e1 <= inner
    in_le0, in_le1 = inner <= e0, inner <= e1
    ind = np.stack([in_le0 & in_le1, (e0_le & in_le1) | (e1_le & in_le0), e0_le & e1_le])
    ind &= _distinct(len(d))
    return ind


def round_ties(d: np.ndarray, digits: int = TIE_DIGITS) -> np.ndarray:
    """Round to ``digits`` significant digits of the largest |d|, so that distances equal in
    exact arithmetic but computed along different float paths (1 ulp apart) tie."""
    scale = float(np.max(np.abs(d))) if d.size else 0.0
    if scale == 0.0 or not np.isfinite(scale):
        return d
    return np.round(d / scale, digits) * scale


def split_counts(d: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A function from split masks ``(splits, size)`` to indicator sums ``(splits, 3)``."""
    ind = triangle_indicators(d).astype(np.float64)
    size = len(d)
    gram = ind.sum(axis=1)  # G_k[u, v] = Σ_x I_k[x, u, v]
    cross = ind.sum(axis=3) + ind.sum(axis=2)  # C_k[x, u] = Σ_v I_k[x, u, v] + I_k[x, v, u]
    linear = ind.sum(axis=(2, 3))  # R_k[x]
    quad = (gram - cross).transpose(1, 0, 2).reshape(size, 3 * size)  # [u, k·size + v]

    def counts(s: np.ndarray) -> np.ndarray:
        q = (s @ quad).reshape(len(s), 3, size)
        return np.einsum("pkv,pv->pk", q, s) + s @ linear.T

    return counts


def q_statistic(counts: np.ndarray) -> np.ndarray:
    """Q = Σ_k |S_k / 𝓘 − 1/3| from the indicator sums, one exact division per split."""
    total = counts.sum(axis=1)
    return np.abs(3.0 * counts - total[:, None]).sum(axis=1) / (3.0 * total)


class TRM(FitsDistance, PermutationStatistic):
    """Triangle-rank metric over a distance: Q of Chan et al. (eq. 4), exact, with a p-value.

    Args:
        distance: any registered distance; similarities are converted (10 − CIDEr-D, ...).
        p_value: ``auto`` (exact when C(n+m, n) ≤ ``permutations``, else Monte-Carlo),
            ``exact``, ``monte-carlo`` or ``none``.
        permutations: random splits of a Monte-Carlo p-value.
        seed: seed of the Monte-Carlo splits (combined with each item's texts).
    """

    name = "trm"
    example_specs = ("trm(distance=cider-d)",)
    accepts_empty_candidates = True  # when its distance does (checked by capmetrics.score)
    rtol = 0.0  # Q is an exact ratio of integers: equal Q values give equal floats

    def __init__(
        self,
        distance: Distance,
        p_value: PValueMethod = "auto",
        permutations: int = 1000,
        seed: int = 0,
    ) -> None:
        self.distance = distance
        self.p_value = p_value
        self.permutations = permutations
        self.seed = seed

    @property
    def pooled_in_parent(self) -> bool:  # type: ignore[override]
        """Cheap, model-free distances (``pairwise_on_workers``: the n-gram ones) let each
        worker build its own matrices (that is most of TRM-CIDEr-D's time); any other distance
        runs in the parent."""
        return self.distance is None or not self.distance.pairwise_on_workers

    def for_workers(self) -> TRM:
        clone = self.without("distance")
        clone.distance_label = self.distance_name()
        return clone  # type: ignore[return-value]

    def distance_name(self) -> str:
        """The distance's spec (kept as a label in the copies that workers get)."""
        label = getattr(self, "distance_label", None)
        return label if self.distance is None and label else self.distance.spec

    def pooled(self, candidates: list[str], references: list[str]) -> np.ndarray:
        pool = candidates + references
        return np.asarray(self.distance.pairwise(pool, pool), dtype=float)

    def pooled_many(self, items: Sequence[tuple[list[str], list[str]]]) -> list[np.ndarray]:
        """Distance matrices of many items, from the distance's ``pairwise_many`` (batched by
        the n-gram distances and BERTScore: one embedding pass)."""
        pools = [c + r for c, r in items]
        return [np.asarray(d, dtype=float) for d in self.distance.pairwise_many(pools)]

    def split_statistic(self, pooled: np.ndarray, n: int) -> SplitStatistic:
        size = len(pooled)
        if pooled.shape != (size, size):
            raise MetricError(
                f"{self.distance_name()}.pairwise returned shape {pooled.shape} for a square pool"
            )
        off = pooled.copy()
        np.fill_diagonal(off, 0.0)
        require_finite(off, lambda: f"the {self.distance_name()} distance matrix")
        counts = split_counts(round_ties(pooled))
        return lambda masks: q_statistic(counts(masks))
