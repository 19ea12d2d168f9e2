"""mauve-text 0.4.0's quantisation, for every permutation split of an item at once.

Each ``compute_mauve`` call clusters the rows ``[q; p]``: l2 normalisation, PCA keeping the
components that explain ``explained_variance`` of the variance, then faiss k-means (``redo``
restarts, the lowest objective kept). A permutation split is a call on the same points in
another row order. The PCA of reordered rows is the same projection (up to each component's
sign, which no distance sees), so the pool is reduced once. Faiss's k-means is not
order-free: restart r starts from the rows at the fixed positions
``rand_perm(N, seed + 1 + r·15486557)[:k]`` of its input, so which points seed the clusters,
and the partition reached, depend on the split's row order. ``SplitQuantiser`` reproduces
that: the seed points of every split and restart, Lloyd's iterations from each distinct
seeding batched in numpy, and per split the restart with the lowest objective (the first on
ties, as faiss). A run where a cluster empties (faiss then splits another one) and pools that
faiss would subsample are handed to faiss itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from capmetrics.plugins.embeddings.vectors import require

#: faiss's seed stride between restarts (``Clustering::train``: seed + 1 + redo · 15486557).
REDO_STRIDE = 15486557
#: faiss subsamples the training set above this many points per centroid (its default).
MAX_POINTS_PER_CENTROID = 256
#: bound on the floats of one batch's arrays (runs × clusters × points or dimensions).
_CHUNK_FLOATS = 4_000_000


def reduce(z: np.ndarray, explained_variance: float, seed: int) -> np.ndarray:
    """l2-normalised rows of ``z`` on the PCA components explaining ``explained_variance``
    (mauve-text's ``random_state=seed``), as float32 as faiss gets them."""
    require("sklearn", "mauve")
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import normalize

    data = normalize(z, norm="l2", axis=1)
    pca = PCA(n_components=None, whiten=False, random_state=seed).fit(data)
    keep = int(np.argmax(np.cumsum(pca.explained_variance_ratio_) >= explained_variance)) + 1
    return np.ascontiguousarray(pca.transform(data)[:, :keep], dtype=np.float32)


def seed_positions(size: int, buckets: int, redo: int, seed: int) -> np.ndarray:
    """(redo × buckets) input rows whose points start each faiss restart (random init)."""
    faiss = require("faiss", "mauve")
    out = np.empty((redo, buckets), dtype=np.intp)
    perm = np.empty(size, dtype=np.int32)
    for r in range(redo):
        faiss.rand_perm(faiss.swig_ptr(perm), size, seed + 1 + r * REDO_STRIDE)  # type: ignore[attr-defined]
        out[r] = perm[:buckets]
    return out


@contextmanager
def one_faiss_thread() -> Iterator[None]:
    """faiss on one OpenMP thread: for ~10 points threads only add overhead (75x here)."""
    faiss = require("faiss", "mauve")
    threads = faiss.omp_get_max_threads()  # type: ignore[attr-defined]
    faiss.omp_set_num_threads(1)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)  # type: ignore[attr-defined]


def faiss_kmeans(
    x: np.ndarray,
    buckets: int,
    iterations: int,
    redo: int = 1,
    seed: int = 0,
    init: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """faiss k-means of the rows of ``x`` as mauve-text runs it (from ``init`` centroids when
    given): the final objective and each row's cluster."""
    faiss = require("faiss", "mauve")
    kmeans = faiss.Kmeans(
        x.shape[1],
        buckets,
        niter=iterations,
        verbose=False,
        nredo=redo,  # type: ignore[attr-defined]
        update_index=True,
        seed=seed,
        min_points_per_centroid=1,
    )  # only silences faiss's small-sample warning
    with one_faiss_thread():
        objective = kmeans.train(x, init_centroids=init)
        return float(objective), kmeans.index.search(x, 1)[1].reshape(-1)


def lloyd(
    x: np.ndarray, seeds: np.ndarray, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lloyd's k-means of the rows of ``x`` from each row of ``seeds`` (indices of the starting
    centroids), all runs at once, each to convergence or ``iterations`` assignments.

    Returns the objectives (sum of squared distances to the final centroids), the labels
    (runs × points) and which runs had a cluster empty on the way (their result is not faiss's).
    """
    x64 = x.astype(np.float64)
    norms = np.square(x64).sum(axis=1)
    runs, k = seeds.shape
    centroids = x64[seeds]  # runs × k × d
    labels = np.full((runs, len(x)), -1)
    objective = np.zeros(runs)
    emptied = np.zeros(runs, dtype=bool)
    active = np.arange(runs)
    for _ in range(max(iterations, 1)):
        c = centroids[active]
        # squared distances by one product per run (float64: far finer than faiss's float32)
        d2 = (
            norms[None, None, :] - 2.0 * (c @ x64.T) + np.square(c).sum(axis=2)[:, :, None]
        )  # runs × k × n
        assigned = d2.argmin(axis=1)  # ties: the lowest cluster, as faiss
        objective[active] = np.take_along_axis(d2, assigned[:, None, :], axis=1)[:, 0, :].sum(
            axis=1
        )
        moving = (assigned != labels[active]).any(axis=1)
        active, assigned = active[moving], assigned[moving]
        if not len(active):
            break
        labels[active] = assigned
        onehot = (assigned[:, None, :] == np.arange(k)[None, :, None]).astype(
            np.float64
        )  # runs × k × n
        counts = onehot.sum(axis=2)
        emptied[active] |= (counts == 0).any(axis=1)
        centroids[active] = (onehot @ x64) / np.maximum(counts, 1.0)[:, :, None]
    return objective, labels, emptied


class SplitQuantiser:
    """mauve-text's cluster labels of an item's pooled points for any of its splits."""

    def __init__(
        self,
        z: np.ndarray,
        buckets: int,
        explained_variance: float = 0.9,
        redo: int = 5,
        iterations: int = 500,
        seed: int = 25,
    ) -> None:
        self.x = reduce(z, explained_variance, seed + 1)
        self.buckets, self.redo, self.iterations, self.kmeans_seed = (
            buckets,
            redo,
            iterations,
            seed + 2,
        )
        self.positions = seed_positions(len(z), buckets, redo, seed + 2)
        self.subsampled = len(z) > buckets * MAX_POINTS_PER_CENTROID

    def labels(self, masks: np.ndarray, shuffle: np.random.Generator | None = None) -> np.ndarray:
        """(splits × points) cluster of each pooled point in each split's clustering; a split
        lists its candidate rows (mask 1) then its reference rows, each in pooled order, or with
        ``shuffle`` each in a random order, except the first split when it is the observed one
        (the permutation test's row 0: it keeps the item's order)."""
        if shuffle is None:
            return self.ordered_labels(np.argsort(-masks, axis=1, kind="stable"))
        keys = shuffle.random(masks.shape)
        if len(masks) and (masks[0] == (np.arange(masks.shape[1]) < masks[0].sum())).all():
            keys[0] = np.arange(masks.shape[1])
        order = np.lexsort((keys, -masks), axis=-1)
        return self.ordered_labels(order)

    def ordered_labels(self, order: np.ndarray) -> np.ndarray:
        """(calls × points) cluster of each pooled point when mauve-text clusters the pooled
        rows in each row of ``order`` (a permutation of the pooled positions)."""
        if self.subsampled:  # faiss draws a training subsample: call it per split
            out = np.empty(order.shape, dtype=np.intp)
            for row, rows in zip(out, order):
                row[rows] = faiss_kmeans(
                    self.x[rows], self.buckets, self.iterations, self.redo, self.kmeans_seed
                )[1]
            return out
        seeds = order[:, self.positions].reshape(-1, self.buckets)
        unique, inverse = np.unique(seeds, axis=0, return_inverse=True)
        objective, labels = self._runs(unique)
        runs = inverse.reshape(len(order), self.redo)
        best = np.take_along_axis(runs, objective[runs].argmin(axis=1)[:, None], axis=1)[:, 0]
        return labels[best]

    def _runs(self, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective and labels of a k-means run from each seeding, batched by chunks."""
        per_run = self.buckets * max(len(self.x), self.x.shape[1])
        step = max(1, _CHUNK_FLOATS // per_run)
        parts = [
            lloyd(self.x, seeds[i : i + step], self.iterations) for i in range(0, len(seeds), step)
        ]
        objective = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        for run in np.flatnonzero(np.concatenate([p[2] for p in parts])):
            objective[run], labels[run] = faiss_kmeans(
                self.x, self.buckets, self.iterations, init=self.x[seeds[run]]
            )
        return objective, labels
