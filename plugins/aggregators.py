"""Reductions: sum, mean, median, geomean, max, min, and the harmonic mean p-value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from capmetrics import Aggregator, hookimpl


class _Ufunc(Aggregator):
    """An aggregator backed by a numpy reduction and a ``ufunc.reduceat`` for groups."""

    _reduce: Callable[..., Any]
    _reduceat: Any = None

    def reduce(self, values: np.ndarray, axis: int = -1) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        if values.shape[axis] == 0:
            return self._empty(values, axis)
        return type(self)._reduce(values, axis=axis)

    def _empty(self, values: np.ndarray, axis: int) -> np.ndarray:
        raise ValueError(f"{self.name} of an empty list is undefined")

    def reduce_groups(self, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        offsets = np.asarray(offsets, dtype=np.intp)
        sizes = np.diff(offsets)
        if type(self)._reduceat is None or (sizes == 0).any():
            return super().reduce_groups(values, offsets)
        out = type(self)._reduceat.reduceat(values, offsets[:-1])
        return self._finish_groups(out, sizes)

    def _finish_groups(self, out: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return out


class Sum(_Ufunc):
    """Sum of the values (0 for an empty list)."""

    name = "sum"
    _reduce = staticmethod(np.sum)
    _reduceat = np.add

    def _empty(self, values: np.ndarray, axis: int) -> np.ndarray:
        return np.sum(values, axis=axis)


class Mean(_Ufunc):
    """Arithmetic mean."""

    name = "mean"
    _reduce = staticmethod(np.mean)
    _reduceat = np.add

    def _finish_groups(self, out: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return out / sizes


class Median(_Ufunc):
    """Median (mean of the two middle values for an even count)."""

    name = "median"
    _reduce = staticmethod(np.median)


class GeoMean(_Ufunc):
    """Geometric mean; 0 if any value is 0, undefined for negative values."""

    name = "geomean"

    @staticmethod
    def _reduce(values: np.ndarray, axis: int = -1) -> np.ndarray:
        if (values < 0).any():
            raise ValueError("geomean of negative values is undefined")
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.exp(np.mean(np.log(values), axis=axis))
        return np.where((values == 0).any(axis=axis), 0.0, out)


class Max(_Ufunc):
    """Maximum."""

    name = "max"
    _reduce = staticmethod(np.max)
    _reduceat = np.maximum


class Min(_Ufunc):
    """Minimum."""

    name = "min"
    _reduce = staticmethod(np.min)
    _reduceat = np.minimum


def harmonic_mean(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """The raw harmonic mean p̊ = k / Σ 1/p_i along ``axis`` (0 if any p_i is 0)."""
    p = np.asarray(p, dtype=float)
    if np.isnan(p).any():
        raise ValueError("p-values must not be NaN (drop the items whose statistic is undefined)")
    if ((p < 0) | (p > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    with np.errstate(divide="ignore"):
        return p.shape[axis] / np.sum(1.0 / p, axis=axis)


def landau_sf(x: np.ndarray | float, total: int) -> np.ndarray:
    """P(X > x) for Wilson's Landau law: Stable(α=1, β=1, γ=π/2, δ = ln L + 1 + ψ(1) − ln(2/π))
    in Nolan's S0 parameterisation (harmonicmeanp 3.0), with L = ``total`` p-values."""
    from scipy.special import digamma

    loc = np.log(total) + 1.0 + digamma(1.0) - np.log(2.0 / np.pi)
    try:
        from scipy.stats import landau  # scipy >= 1.15: accurate far into the tail
    except ImportError:  # pragma: no cover - older scipy
        from scipy.stats import levy_stable

        stable = type(levy_stable)(name="levy_stable_s0")
        stable.parameterization = "S0"
        return stable.sf(x, 1.0, 1.0, loc=loc, scale=np.pi / 2)
    return landau.sf(x, loc=loc, scale=np.pi / 2)


def asymptotic_hmp(p: np.ndarray, weight: float = 1.0, total: int | None = None) -> float:
    """Asymptotically exact harmonic mean p-value of ``p`` (equal weights, harmonicmeanp 3.0).

    Args:
        p: the p-values of the (sub)family R.
        weight: w_R, the family's share of the total weight (1 for all p-values).
        total: L, the number of p-values in the whole family (default ``len(p)``).

    Returns:
        w_R · P(X > w_R / p̊_R), at most 1; compare with α · w_R.
    """
    p = np.asarray(p, dtype=float)
    raw = float(harmonic_mean(p))
    if raw == 0.0:
        return 0.0
    return float(min(1.0, weight * landau_sf(weight / raw, total or len(p))))


def hmp_threshold(alpha: float, total: int) -> float:
    """α_L: the raw HMP below which the asymptotically exact HMP of L p-values is ≤ α."""
    from scipy.optimize import brentq

    return float(brentq(lambda r: landau_sf(1.0 / r, total) - alpha, 1e-300, 1.0, xtol=1e-300, rtol=1e-15))


class HarmonicMeanP(Aggregator):
    """Harmonic mean p-value (Wilson 2019, harmonicmeanp 3.0) over equally weighted p-values.

    Args:
        method: ``asymptotic`` (default): the asymptotically exact HMP, P(X > 1/p̊) for the
            Landau law of L = len(p) p-values; ``simple``: the raw p̊ = L / Σ 1/p_i, capped at
            1 (anti-conservative).
    """

    name = "hmp"

    def __init__(self, method: Literal["asymptotic", "simple"] = "asymptotic") -> None:
        self.method = method

    def reduce(self, values: np.ndarray, axis: int = -1) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        if values.shape[axis] == 0:
            raise ValueError("hmp of an empty list is undefined")
        raw = harmonic_mean(values, axis=axis)
        if self.method == "simple":
            return np.minimum(1.0, raw)
        with np.errstate(divide="ignore"):
            tail = landau_sf(1.0 / raw, values.shape[axis])
        return np.where(raw == 0.0, 0.0, np.minimum(1.0, tail))


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    for cls in (Sum, Mean, Median, GeoMean, Max, Min):
        register(cls)
    register(HarmonicMeanP, aliases=("harmonic-mean-p",))
