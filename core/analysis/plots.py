"""Plots (matplotlib, written to a file): an item's permutation null distribution with its
observed statistic, and the per-item p-values of a run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.errors import CapmetricsError


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise CapmetricsError("plots need matplotlib: pip install 'capmetrics[plots]'") from err
    return plt


def _save(fig: Any, path: str | Path) -> Path:
    from capmetrics.io.atomic import atomic_write

    path = Path(path)
    fig.tight_layout()
    with atomic_write(
        path, "wb"
    ) as handle:  # never replaces a FIFO or device; old file kept on error
        fig.savefig(handle, dpi=120, format=path.suffix.lstrip(".").lower() or "png")
    _pyplot().close(fig)
    return path


def plot_null_distribution(
    null: np.ndarray,
    observed: float,
    path: str | Path,
    *,
    title: str = "",
    p_value: float | None = None,
    method: str = "",
    bins: int = 40,
) -> Path:
    """Histogram of the permutation null values with the observed statistic as a line."""
    plt = _pyplot()
    null = np.asarray(null, dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if len(null):
        ax.hist(null, bins=bins, color="#9db4d0", edgecolor="#5f7fa8")
    label = f"observed {observed:.4g}" + (f", p = {p_value:.4g}" if p_value is not None else "")
    ax.axvline(observed, color="#c0392b", linewidth=2, label=label)
    ax.set_xlabel("statistic")
    ax.set_ylabel("splits")
    ax.set_title(title + (f" ({method}, {len(null)} splits)" if method else ""), fontsize=10)
    ax.legend()
    return _save(fig, path)


def plot_p_values(
    item_ids: Sequence[object],
    p_values: np.ndarray | Sequence[float],
    path: str | Path,
    *,
    title: str = "",
    alpha: float = 0.05,
    combined: float | None = None,
) -> Path:
    """Per-item p-values (log scale, items sorted by p-value) with the α line."""
    plt = _pyplot()
    p = np.asarray(p_values, dtype=float)
    keep = np.isfinite(p)
    if not keep.any():
        raise CapmetricsError("no finite p-values to plot")
    order = np.argsort(p[keep], kind="stable")
    values = p[keep][order]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.scatter(np.arange(len(values)), values, s=8, color="#2e6da4")
    ax.set_yscale("log")
    ax.axhline(alpha, color="#c0392b", linestyle="--", label=f"α = {alpha:g}")
    if combined is not None:
        ax.axhline(max(combined, values.min()), color="#27ae60", label=f"HMP = {combined:.3g}")
    ax.set_xlabel(f"items sorted by p-value ({int(keep.sum())} of {len(p)} with a p-value)")
    ax.set_ylabel("p-value")
    ax.set_title(title, fontsize=10)
    ax.legend()
    return _save(fig, path)
