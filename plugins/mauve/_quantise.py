"""mauve-text 0.4.0's quantisation of the pooled features: l2 normalisation, PCA keeping the
components that explain ``explained_variance`` of the variance, then faiss k-means.

The pool is clustered once per item, in the order mauve-text uses for the observed split
(candidates = its ``q``, then references = its ``p``); every permutation split re-counts the
same cluster labels (mauve-text called on a permuted split would cluster the same points in
another order, which only changes faiss's random initialisation).
"""

from __future__ import annotations

import numpy as np
from capmetrics.plugins.embeddings.vectors import require


def cluster_labels(z: np.ndarray, buckets: int, explained_variance: float = 0.9, redo: int = 5,
                   iterations: int = 500, seed: int = 25) -> np.ndarray:
    """The k-means bucket of each row of ``z`` (same settings and seeds as mauve-text)."""
    require("sklearn", "mauve")
    faiss = require("faiss", "mauve")
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import normalize

    data = normalize(z, norm="l2", axis=1)
    pca = PCA(n_components=None, whiten=False, random_state=seed + 1).fit(data)
    keep = int(np.argmax(np.cumsum(pca.explained_variance_ratio_) >= explained_variance)) + 1
    data = pca.transform(data)[:, :keep].astype(np.float32)
    kmeans = faiss.Kmeans(data.shape[1], buckets, niter=iterations, verbose=False,  # type: ignore[attr-defined]
                          nredo=redo, update_index=True, seed=seed + 2,
                          min_points_per_centroid=1)  # only silences faiss's small-sample warning
    threads = faiss.omp_get_max_threads()  # type: ignore[attr-defined]
    faiss.omp_set_num_threads(1)  # type: ignore[attr-defined]  # ~10 points: threads only add overhead (75x)
    try:
        kmeans.train(data)
        return kmeans.index.search(data, 1)[1].reshape(-1)
    finally:
        faiss.omp_set_num_threads(threads)  # type: ignore[attr-defined]
