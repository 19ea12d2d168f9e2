"""Reductions: sum, mean, median, geomean, max, min, and the harmonic mean p-value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from capmetrics import Aggregator, hookimpl
from capmetrics.components.pvalues import harmonic_mean_p


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
        return harmonic_mean_p(values, axis=axis, method=self.method)


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    for cls in (Sum, Mean, Median, GeoMean, Max, Min):
        register(cls)
    register(HarmonicMeanP, aliases=("harmonic-mean-p",))
