"""Combining p-values: the harmonic mean p-value (Wilson 2019; harmonicmeanp 3.0).

Public API: statistics, the CLI and plugins combine per-item p-values with
:func:`harmonic_mean_p`; the ``hmp`` aggregator is a component around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

HmpMethod = Literal["asymptotic", "simple"]


def harmonic_mean(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """The raw harmonic mean p̊ = k / Σ 1/p_i along ``axis`` (0 if any p_i is 0)."""
    p = np.asarray(p, dtype=float)
    if np.isnan(p).any():
        raise ValueError("p-values must not be NaN (drop the items whose statistic is undefined)")
    if ((p < 0) | (p > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    with np.errstate(divide="ignore"):
        return p.shape[axis] / np.sum(1.0 / p, axis=axis)


def prepare() -> None:
    """Import what :func:`landau_sf` needs (``scipy.special``, ~0.1 s): a run calls this on a
    thread while its workers test the items, so the harmonic mean p-value after them is quick."""
    import scipy.special  # noqa: F401


def landau_sf(x: np.ndarray | float, total: int) -> np.ndarray:
    """P(X > x) for Wilson's Landau law: Stable(α=1, β=1, γ=π/2, δ = ln L + 1 + ψ(1) − ln(2/π))
    in Nolan's S0 parameterisation (harmonicmeanp 3.0), with L = ``total`` p-values."""
    from scipy.special import digamma

    loc = np.log(total) + 1.0 + digamma(1.0) - np.log(2.0 / np.pi)
    try:  # the kernel scipy.stats.landau.sf evaluates, without importing scipy.stats (~0.35 s)
        from scipy.special._ufuncs import _landau_sf
    except ImportError:  # pragma: no cover - scipy < 1.15 or a renamed kernel
        _landau_sf = None
    if _landau_sf is not None:
        z = np.asarray((np.asarray(x) - loc) / (np.pi / 2), dtype=np.float64)
        out = np.where(
            np.isnan(z),
            np.nan,
            np.where(z == np.inf, 0.0, np.where(z == -np.inf, 1.0, _landau_sf(z, 0.0, 1.0))),
        )
        return out[()] if out.ndim == 0 else out
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
    return min(1.0, float(weight * landau_sf(weight / raw, total or len(p))))


def hmp_threshold(alpha: float, total: int) -> float:
    """α_L: the raw HMP below which the asymptotically exact HMP of L p-values is ≤ α."""
    from scipy.optimize import brentq

    return float(
        brentq(lambda r: landau_sf(1.0 / r, total) - alpha, 1e-300, 1.0, xtol=1e-300, rtol=1e-15)
    )


def harmonic_mean_p(
    values: np.ndarray | Sequence[float], axis: int = -1, method: HmpMethod = "asymptotic"
) -> np.ndarray:
    """The harmonic mean p-value of equally weighted p-values along ``axis``.

    ``asymptotic`` (default): the asymptotically exact HMP, P(X > 1/p̊) for the Landau law of
    L p-values; ``simple``: the raw p̊ = L / Σ 1/p_i, capped at 1 (anti-conservative).
    """
    values = np.asarray(values, dtype=float)
    if values.shape[axis] == 0:
        raise ValueError("hmp of an empty list is undefined")
    raw = harmonic_mean(values, axis=axis)
    if method == "simple":
        return np.minimum(1.0, raw)
    with np.errstate(divide="ignore"):
        tail = landau_sf(1.0 / raw, values.shape[axis])
    return np.where(raw == 0.0, 0.0, np.minimum(1.0, tail))
