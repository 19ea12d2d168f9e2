"""Paired comparison of two systems on the same items, for any metric spec.

The difference is taken between the systems' means of the per-item values (for a classic
metric, an item's value is the mean over its candidates; for a multi-candidate statistic, the
item's statistic). Its significance comes from a paired approximate-randomisation test (each
item's two values are swapped at random: p = (1 + #{|Δ*| ≥ |Δ|}) / (1 + trials)) and its
uncertainty from a paired bootstrap over items (percentile interval), as sacrebleu does for
BLEU. Both are seeded, vectorised over trials, and reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np
from capmetrics.components.base import (
    METRIC_KINDS,
    Component,
    Distance,
    ImageTextMetric,
    Statistic,
)
from capmetrics.components.spec import Spec
from capmetrics.data.model import Dataset, ItemId
from capmetrics.engine.parallel import Executor, evaluate_statistic
from capmetrics.errors import DataError, MetricError, component_errors

#: Elements (trials × items) drawn per vectorised batch of the tests.
BATCH_ELEMENTS = 4_000_000


@dataclass
class PairedComparison:
    """The difference A − B in one metric, with its paired test and bootstrap interval."""

    metric: str
    higher_is_better: bool
    items: int
    mean_a: float
    mean_b: float
    delta: float
    p_value: float
    ci_low: float
    ci_high: float
    ci_a: tuple[float, float]
    ci_b: tuple[float, float]
    confidence: float
    trials: int
    resamples: int
    seed: int
    signature: dict[str, str] = field(default_factory=dict)
    dropped: list[tuple[ItemId, str]] = field(default_factory=list)
    #: Significance level: a system is named better only when ``p_value < alpha``.
    alpha: float = 0.05

    @property
    def ahead(self) -> str:
        """``A``, ``B`` or ``tie`` (equal means): the system with the better mean by the metric's
        direction, significant or not."""
        if self.delta == 0:
            return "tie"
        return "A" if (self.delta > 0) == self.higher_is_better else "B"

    @property
    def significant(self) -> bool:
        """Whether the difference is significant at ``alpha`` (``p_value < alpha``)."""
        return bool(self.p_value < self.alpha)

    @property
    def better(self) -> str | None:
        """``A`` or ``B`` when the difference is significant at ``alpha``, else None."""
        return self.ahead if self.significant and self.ahead != "tie" else None

    @property
    def verdict(self) -> str:
        """``better: A``, or ``no significant difference (p ≥ α)``."""
        if self.better:
            return f"better: {self.better} (p < {self.alpha:g})"
        return f"no significant difference (p ≥ {self.alpha:g})"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(better=self.better, ahead=self.ahead, significant=self.significant)
        out["dropped"] = [{"item": i, "problem": p} for i, p in self.dropped]
        return out

    def summary(self) -> str:
        """One line: means, difference, interval, p-value and the verdict at ``alpha``."""
        pct = round(self.confidence * 100)
        return (
            f"{self.metric}: A {self.mean_a:.4f} [{self.ci_a[0]:.4f}, {self.ci_a[1]:.4f}]  "
            f"B {self.mean_b:.4f} [{self.ci_b[0]:.4f}, {self.ci_b[1]:.4f}]  "
            f"A−B {self.delta:+.4f} ({pct}% CI {self.ci_low:+.4f} … {self.ci_high:+.4f})  "
            f"p = {self.p_value:.4g} ({self.trials} trials, {self.items} items)  {self.verdict}"
        )


def _batches(total: int, items: int) -> list[int]:
    size = max(1, BATCH_ELEMENTS // max(1, items))
    return [min(size, total - start) for start in range(0, total, size)]


def approximate_randomization(diff: np.ndarray, trials: int, rng: np.random.Generator) -> float:
    """Two-sided paired approximate-randomisation p-value of the mean of ``diff``."""
    n = len(diff)
    observed = abs(float(diff.mean()))
    tolerance = 1e-9 * max(1.0, observed)
    hits = 0
    for size in _batches(trials, n):
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8).astype(np.float64) * 2.0 - 1.0
        hits += int(np.count_nonzero(np.abs(signs @ diff) / n >= observed - tolerance))
    return (hits + 1.0) / (trials + 1.0)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, resamples: int, confidence: float, rng: np.random.Generator
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of mean(a), mean(b) and mean(a − b) over item resamples."""
    n = len(a)
    means = []
    for size in _batches(resamples, n):
        idx = rng.integers(0, n, size=(size, n))
        means.append(np.stack([a[idx].mean(axis=1), b[idx].mean(axis=1)], axis=1))
    boot = np.concatenate(means)
    q = [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0]
    lo_a, hi_a = np.quantile(boot[:, 0], q)
    lo_b, hi_b = np.quantile(boot[:, 1], q)
    lo_d, hi_d = np.quantile(boot[:, 0] - boot[:, 1], q)
    return {
        "a": (float(lo_a), float(hi_a)),
        "b": (float(lo_b), float(hi_b)),
        "delta": (float(lo_d), float(hi_d)),
    }


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    *,
    trials: int = 10_000,
    resamples: int = 1_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, dict[str, tuple[float, float]]]:
    """The approximate-randomisation p-value and the bootstrap intervals of paired values."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise MetricError(
            "a paired test needs two equally long lists of at least 2 values, got "
            f"{a.shape} and {b.shape}"
        )
    if not 0.0 < confidence < 1.0:
        raise MetricError(f"the confidence level must lie in (0, 1), got {confidence}")
    if trials < 1 or resamples < 1:
        raise MetricError("trials and resamples must be at least 1")
    rng = np.random.default_rng(seed)
    p = approximate_randomization(a - b, trials, rng)
    return p, paired_bootstrap(a, b, resamples, confidence, rng)


def align(system_a: Dataset, system_b: Dataset) -> Dataset:
    """System B's items in system A's order; both must cover the same items and references."""
    b_items = {item.id: item for item in system_b}
    a_ids = set(system_a.ids)
    problems = [
        f"item {i!r} is in {system_a.source} but not in {system_b.source}"
        for i in system_a.ids
        if i not in b_items
    ]
    problems += [
        f"item {i!r} is in {system_b.source} but not in {system_a.source}"
        for i in system_b.ids
        if i not in a_ids
    ]
    problems += [
        f"item {item.id!r} has different references in the two systems"
        for item in system_a
        if item.id in b_items and sorted(b_items[item.id].references) != sorted(item.references)
    ]
    if problems:
        raise DataError(problems, header="the two systems cannot be compared item by item")
    return Dataset([b_items[i] for i in system_a.ids], system_b.source, list(system_b.skipped))


def item_values(
    component: Component, dataset: Dataset, executor: Executor | None = None
) -> tuple[np.ndarray, dict[str, str], list[str | None]]:
    """Per-item values of a metric, its run signature and each item's undefined-reason (or None)."""
    from capmetrics.engine.scoring import check_empty_candidates, evaluate

    check_empty_candidates(component, dataset)
    if isinstance(component, Statistic):
        with component_errors(component.spec):
            result = evaluate_statistic(component, dataset, executor=executor)
        undefined = {entry["item"]: entry["problem"] for entry in result.details["undefined"]}
        reasons = [undefined.get(item_id) for item_id in dataset.ids]
    elif isinstance(component, (Distance, ImageTextMetric)):
        result = evaluate(component, dataset)
        reasons = [None if math.isfinite(v) else "not finite" for v in result.item_values]
    else:
        raise MetricError(
            f"{component.spec} is a {component.kind}; compare needs a distance, a statistic or "
            "an image-text metric"
        )
    return np.asarray(result.item_values, dtype=float), result.signature, reasons


def compare_systems(
    system_a: Dataset,
    system_b: Dataset,
    metric: str | Component,
    *,
    trials: int = 10_000,
    resamples: int = 1_000,
    confidence: float = 0.95,
    seed: int = 0,
    executor: Executor | None = None,
    definitions: Mapping[str, Spec] | None = None,
    alpha: float = 0.05,
) -> PairedComparison:
    """Compare two systems' outputs on the same items with one metric.

    Items where the metric is undefined for either system (e.g. fewer than 2 candidates) are
    left out and listed in ``dropped``. A system is named ``better`` only when the paired
    test's p-value is below ``alpha``.
    """
    # the registry sits above core (it loads the plugins): names are resolved per call
    from capmetrics.registry.compose import compose

    if not 0.0 < alpha < 1.0:
        raise MetricError(f"the significance level alpha must lie in (0, 1), got {alpha}")
    component = cast("Distance | Statistic", compose(metric, METRIC_KINDS, definitions=definitions))
    system_b = align(system_a, system_b)
    values_a, signature, reasons_a = item_values(component, system_a, executor)
    values_b, _, reasons_b = item_values(component, system_b, executor)
    keep = np.array([ra is None and rb is None for ra, rb in zip(reasons_a, reasons_b)], dtype=bool)
    dropped = [
        (item.id, f"A: {ra}" if ra else f"B: {rb}")
        for item, ra, rb, k in zip(system_a, reasons_a, reasons_b, keep)
        if not k
    ]
    if keep.sum() < 2:
        raise MetricError(
            f"{component.spec} is defined on {int(keep.sum())} item(s) for both systems; "
            "a paired comparison needs at least 2"
        )
    a, b = values_a[keep], values_b[keep]
    p, ci = paired_test(a, b, trials=trials, resamples=resamples, confidence=confidence, seed=seed)
    signature = dict(signature, test=f"ar:{trials}|bs:{resamples}|seed:{seed}")
    return PairedComparison(
        metric if isinstance(metric, str) else component.spec,
        bool(component.higher_is_better),
        int(keep.sum()),
        float(a.mean()),
        float(b.mean()),
        float(a.mean() - b.mean()),
        p,
        ci["delta"][0],
        ci["delta"][1],
        ci["a"],
        ci["b"],
        confidence,
        trials,
        resamples,
        seed,
        signature,
        dropped,
        alpha,
    )
