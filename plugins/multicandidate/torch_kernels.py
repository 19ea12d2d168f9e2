"""MMD and Fréchet split statistics in torch (float64), for embeddings already on a GPU.

The same formulas as :func:`~capmetrics.plugins.multicandidate.kernels.mmd_of_splits` and
:func:`~capmetrics.plugins.multicandidate.kernels.frechet_of_splits`, on ``device``; the values
equal numpy's to about 1e-12 relative (different summation order; Fréchet's nuclear norms from
singular values directly). Used with ``kernels=torch``; these run in the main process only
(executor workers never import torch).
"""

from __future__ import annotations

import numpy as np
from capmetrics.components.permutation import SplitStatistic, cross_index


def _torch():  # type: ignore[no-untyped-def]
    import torch

    return torch


def _quadratic(torch, s, matrix):  # type: ignore[no-untyped-def]
    t = 1.0 - s
    ks, kt = s @ matrix, t @ matrix
    return (ks * s).sum(dim=1), (ks * t).sum(dim=1), (kt * t).sum(dim=1)


def mmd_of_splits_torch(kernel: np.ndarray, n: int, estimator: str, device: str) -> SplitStatistic:
    """MMD² of every split from the pooled kernel matrix, computed on ``device``."""
    torch = _torch()
    m = len(kernel) - n
    k = torch.as_tensor(kernel, dtype=torch.float64, device=device)
    diag = torch.diagonal(k)

    def stat(masks: np.ndarray) -> np.ndarray:
        s = torch.tensor(masks, dtype=torch.float64, device=device)  # a copy: masks are read-only
        kss, kst, ktt = _quadratic(torch, s, k)
        if estimator == "biased":
            out = kss / n**2 + ktt / m**2 - 2.0 * kst / (n * m)
        else:
            if estimator == "unbiased":
                kss, ktt = kss - s @ diag, ktt - (1.0 - s) @ diag
            out = kss / (n * (n - 1)) + ktt / (m * (m - 1)) - 2.0 * kst / (n * m)
        return out.cpu().numpy()

    return stat


def frechet_of_splits_torch(z: np.ndarray, n: int, device: str) -> SplitStatistic:
    """Fréchet distance of every split (nuclear-norm form) on ``device``."""
    from capmetrics.plugins.multicandidate.kernels import helmert_basis

    torch = _torch()
    m = len(z) - n
    zt = torch.as_tensor(z, dtype=torch.float64, device=device)
    centred = zt - zt.mean(dim=0)
    gram = centred @ centred.T
    diag = torch.diagonal(gram)
    flat = gram.reshape(-1)
    left = torch.tensor(helmert_basis(n).T, dtype=torch.float64, device=device)
    right = torch.tensor(helmert_basis(m), dtype=torch.float64, device=device)

    def stat(masks: np.ndarray) -> np.ndarray:
        s = torch.tensor(masks, dtype=torch.float64, device=device)  # a copy: masks are read-only
        t = 1.0 - s
        gss, gst, gtt = _quadratic(torch, s, gram)
        mean_diff = gss / n**2 + gtt / m**2 - 2.0 * gst / (n * m)
        trace_x = (s @ diag - gss / n) / (n - 1)
        trace_y = (t @ diag - gtt / m) / (m - 1)
        index = torch.tensor(cross_index(masks, n), device=device)
        cross = flat[index]
        core = left @ (cross.reshape(-1, m) @ right).reshape(len(masks), n, m - 1)
        nuclear = torch.linalg.svdvals(core).sum(dim=1)
        return (
            (mean_diff + trace_x + trace_y - 2.0 * nuclear / ((n - 1) * (m - 1)) ** 0.5)
            .cpu()
            .numpy()
        )

    return stat
