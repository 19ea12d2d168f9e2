"""Meta-evaluation: how well a metric agrees with human judgments.

* :func:`agreement`: Pearson, Spearman, Kendall τ-b and τ-c between a metric's per-candidate
  scores and the human rating points, with percentile bootstrap confidence intervals over items
  (seeded; an item keeps all of its rating points when resampled).
* :func:`pairwise_accuracy`: the PASCAL-50S protocol (a pair counts as correct when the metric
  prefers the candidate humans preferred; a metric tie counts 0.5), per category and averaged.
* :func:`human_ceiling`: the metric's scores of human captions, each reference left out in turn
  and scored against the others, for every image of the judged data.
* :data:`PRESETS`: ``flickr8k-expert`` (τ-c over the 16,992 expert rating points) and
  ``flickr8k-cf`` (τ-b over 47,830 CrowdFlower rows), the protocols of PROVENANCE.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
from capmetrics.components.base import (
    Component,
    Distance,
    ImageTextMetric,
    scores_with_images,
)
from capmetrics.data.judgments import Judgments, PairJudgments
from capmetrics.data.model import Dataset, Item
from capmetrics.engine.scoring import evaluate
from capmetrics.errors import DataError, MetricError, SpecError, component_errors
from scipy import stats

#: The correlation statistics, in report order.
STATISTICS = ("pearson", "spearman", "kendall_b", "kendall_c")

#: Environment variable naming the folder of the raw Flickr8k files.
FLICKR8K_ENV = "CAPMETRICS_FLICKR8K"


# ---------------------------------------------------------------------------------------------
# correlations
# ---------------------------------------------------------------------------------------------
#: Above this many distinct ratings, Kendall's S comes from scipy instead of the level counts.
MAX_LEVELS = 64


def _average_ranks(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Average ranks (1-based) of sorted values, and each position's tie-group start and end."""
    n = sorted_values.size
    new_group = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    starts = np.flatnonzero(new_group)
    ends = np.r_[starts[1:], n]
    group = np.cumsum(new_group) - 1
    return ((starts + ends + 1) / 2)[group], starts[group], ends[group]


def _kendall_s(
    x_order: np.ndarray, x_start: np.ndarray, x_end: np.ndarray, codes: np.ndarray, n_levels: int
) -> float:
    """S = P - Q from x's sort order and y's level codes, O(levels x n).

    For a point of level c at sorted position i with x-tie group [s, e): the points of lower
    levels before s are concordant with it, those from e on are discordant.
    """
    c = codes[x_order]
    onehot = np.zeros((n_levels + 1, c.size + 1), dtype=np.int32)
    onehot[c + 1, np.arange(1, c.size + 1)] = 1
    lower = np.cumsum(
        np.cumsum(onehot, axis=1), axis=0
    )  # lower[l, i]: levels < l among the first i
    totals = lower[:, -1]
    below = lower[c, x_start]
    above = totals[c] - lower[c, x_end]
    return float((below - above).sum())


def correlations(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Pearson, Spearman, Kendall tau-b and tau-c (as scipy defines them) of ``x`` against ``y``.

    Kendall's S is counted per rating level when ``y`` has at most :data:`MAX_LEVELS` distinct
    values (human ratings), else taken from scipy; tau-c = 2S / (n^2 (m - 1) / m). NaN where a
    statistic is undefined (constant input).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = x.size
    if n < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return dict.fromkeys(STATISTICS, float("nan"))
    order = np.argsort(x, kind="stable")
    xs = x[order]
    rx_sorted, x_start, x_end = _average_ranks(xs)
    rx = np.empty(n)
    rx[order] = rx_sorted
    levels, codes, y_counts = np.unique(y, return_inverse=True, return_counts=True)
    y_ends = np.cumsum(y_counts)
    ry = ((y_ends - y_counts + y_ends + 1) / 2)[codes]
    n0 = n * (n - 1) / 2
    tx = float(((x_end - x_start - 1) / 2).sum())  # sum over points of (t - 1) / 2 = tied pairs
    ty = float((y_counts * (y_counts - 1) / 2).sum())
    if levels.size <= MAX_LEVELS:
        s = _kendall_s(order, x_start, x_end, codes, levels.size)
        tau_b = float(np.clip(s / np.sqrt((n0 - tx) * (n0 - ty)), -1, 1))
    else:
        tau_b = float(stats.kendalltau(x, y, variant="b").statistic)
        s = tau_b * np.sqrt((n0 - tx) * (n0 - ty))
    m = min(int(np.count_nonzero(np.r_[True, xs[1:] != xs[:-1]])), levels.size)
    tau_c = float(np.clip(2 * s / (n * n * (m - 1) / m), -1, 1))
    return {
        "pearson": float(np.corrcoef(x, y)[0, 1]),
        "spearman": float(np.corrcoef(rx, ry)[0, 1]),
        "kendall_b": tau_b,
        "kendall_c": tau_c,
    }


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap confidence interval (NaN bounds without bootstrap)."""

    value: float
    low: float = float("nan")
    high: float = float("nan")


@dataclass
class Agreement:
    """Agreement of one metric with the judgments."""

    metric: str
    n_items: int
    n_points: int
    statistics: dict[str, Estimate]
    mean_score: float
    ceiling_mean: float | None = None
    ceiling_n: int = 0
    #: Kendall tau-b between the metric's per-item score and the candidate's length in words, and
    #: between the human rating points and their candidates' lengths (a metric that only rewards
    #: length shows it here: docs/metrics/detailed-captions.md).
    length_tau_b: float = float("nan")
    human_length_tau_b: float = float("nan")

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "metric": self.metric,
            "n_items": self.n_items,
            "n_points": self.n_points,
        }
        for key, est in self.statistics.items():
            out[key] = est.value
            out[f"{key}_low"] = est.low
            out[f"{key}_high"] = est.high
        out["mean_score"] = self.mean_score
        out["human_ceiling_mean"] = self.ceiling_mean
        out["human_ceiling_n"] = self.ceiling_n
        out["length_tau_b"] = self.length_tau_b
        out["human_length_tau_b"] = self.human_length_tau_b
        return out


def candidate_lengths(dataset: Dataset) -> np.ndarray:
    """Per item: its candidates' mean length in words (white-space separated)."""
    return np.array(
        [
            np.mean([len(c.split()) for c in item.candidates]) if item.candidates else 0.0
            for item in dataset.items
        ],
        dtype=float,
    )


def length_bias(scores: np.ndarray, judgments: Judgments) -> tuple[float, float]:
    """Kendall tau-b of per-item ``scores`` with candidate length, and of the rating points with
    their candidates' length (NaN where either side is constant)."""
    lengths = candidate_lengths(judgments.dataset)
    with np.errstate(all="ignore"):
        metric = correlations(np.asarray(scores, dtype=float), lengths)["kendall_b"]
        human = correlations(judgments.point_rating, lengths[judgments.point_item])["kendall_b"]
    return float(metric), float(human)


def _item_offsets(judgments: Judgments) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(judgments.point_item, kind="stable")
    bounds = np.searchsorted(judgments.point_item[order], np.arange(len(judgments.dataset) + 1))
    return order, bounds


def bootstrap_intervals(
    scores: np.ndarray,
    judgments: Judgments,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of each statistic, resampling items with replacement (seeded)."""
    if n_boot <= 0:
        return {}
    order, bounds = _item_offsets(judgments)
    sizes = np.diff(bounds)
    rng = np.random.default_rng(seed)
    n_items = len(judgments.dataset)
    samples = {k: np.empty(n_boot) for k in STATISTICS}
    for b in range(n_boot):
        chosen = rng.integers(0, n_items, n_items)
        counts = sizes[chosen]
        starts = np.repeat(bounds[chosen] - np.cumsum(counts) + counts, counts)
        points = order[starts + np.arange(counts.sum())]
        values = correlations(scores[judgments.point_item[points]], judgments.point_rating[points])
        for k in STATISTICS:
            samples[k][b] = values[k]
    alpha = (1 - confidence) / 2
    return {
        k: (float(np.nanquantile(v, alpha)), float(np.nanquantile(v, 1 - alpha)))
        if np.isfinite(v).any()
        else (float("nan"), float("nan"))
        for k, v in samples.items()
    }


def correlate(
    scores: np.ndarray,
    judgments: Judgments,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Estimate]:
    """Every statistic of per-item ``scores`` against the rating points, with bootstrap CIs."""
    scores = np.asarray(scores, dtype=float)
    if scores.shape != (len(judgments.dataset),):
        raise MetricError(f"{scores.shape[0]} scores for {len(judgments.dataset)} judged items")
    point = correlations(scores[judgments.point_item], judgments.point_rating)
    cis = bootstrap_intervals(scores, judgments, n_boot, seed, confidence)
    return {k: Estimate(point[k], *cis.get(k, (float("nan"), float("nan")))) for k in STATISTICS}


# ---------------------------------------------------------------------------------------------
# metric scores
# ---------------------------------------------------------------------------------------------
def build_metric(metric: str | Component) -> Distance | ImageTextMetric:
    """Build a distance or an image-text metric from a spec (they score single candidates)."""
    # the registry sits above core (it loads the plugins): names are resolved per call
    from capmetrics.registry.compose import compose

    kinds = ("distance", "image-text-metric")
    component = compose(metric, kinds) if isinstance(metric, str) else metric
    if not isinstance(component, (Distance, ImageTextMetric)):
        raise SpecError(
            f"{component.spec} is a {component.kind}; meta-evaluation needs a distance or an "
            "image-text metric"
        )
    return component


def metric_scores(metric: str | Component, dataset: Dataset) -> np.ndarray:
    """Per-item score (the mean over the item's candidates) of ``metric`` on ``dataset``."""
    return np.asarray(evaluate(build_metric(metric), dataset).item_values, dtype=float)


def leave_one_out(dataset: Dataset, groups: Sequence[str] | None = None) -> Dataset:
    """Every reference of every distinct image as a candidate against the image's other
    references."""
    groups = list(groups) if groups is not None else [str(i) for i in dataset.ids]
    seen: set[str] = set()
    items = []
    for group, item in zip(groups, dataset.items):
        if group in seen or len(item.references) < 2:
            continue
        seen.add(group)
        refs = item.references
        items += [
            Item(f"{group}#ref{i}", refs[:i] + refs[i + 1 :], (refs[i],), item.image)
            for i in range(len(refs))
        ]
    return Dataset(items, f"{dataset.source} (leave one reference out)")


def human_ceiling(
    metric: str | Component, dataset: Dataset, groups: Sequence[str] | None = None
) -> np.ndarray:
    """The metric's scores of held-out human references (see :func:`leave_one_out`)."""
    loo = leave_one_out(dataset, groups)
    if not len(loo):
        raise DataError([], header="no image has two or more references; no human ceiling")
    return metric_scores(metric, loo)


def agreement(
    metric: str | Component,
    judgments: Judgments,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    ceiling: bool = True,
    scores: np.ndarray | None = None,
) -> Agreement:
    """Agreement of ``metric`` with ``judgments`` (scores are computed unless given)."""
    component = build_metric(metric)
    values = (
        metric_scores(component, judgments.dataset)
        if scores is None
        else np.asarray(scores, dtype=float)
    )
    ceil = human_ceiling(component, judgments.dataset, judgments.groups) if ceiling else None
    name = metric if isinstance(metric, str) else component.spec
    return Agreement(
        name,
        len(judgments.dataset),
        judgments.n_points,
        correlate(values, judgments, n_boot, seed, confidence),
        float(np.mean(values)),
        None if ceil is None else float(np.mean(ceil)),
        0 if ceil is None else int(ceil.size),
        *length_bias(values, judgments),
    )


# ---------------------------------------------------------------------------------------------
# pairwise accuracy
# ---------------------------------------------------------------------------------------------
@dataclass
class PairwiseAccuracy:
    """PASCAL-50S style accuracy of one metric: per category, and the mean over categories."""

    metric: str
    accuracy: dict[str, float]
    ties: dict[str, float]
    counts: dict[str, int]
    mean: float = field(default=float("nan"))

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"metric": self.metric, "mean": self.mean}
        out.update({f"acc_{k}": v for k, v in self.accuracy.items()})
        out.update({f"ties_{k}": v for k, v in self.ties.items()})
        out.update({f"n_{k}": v for k, v in self.counts.items()})
        return out


def pairwise_accuracy(
    metric: str | Component, pairs: PairJudgments, scores: np.ndarray | None = None
) -> PairwiseAccuracy:
    """Share of pairs where the metric prefers the human-preferred candidate (tie = 0.5)."""
    component = build_metric(metric)
    if scores is None and scores_with_images(component):  # each pair's image, checked first
        result = evaluate(component, pairs.dataset)
        scores = np.concatenate([np.asarray(v, dtype=float) for v in result.candidate_values])
    elif scores is None:
        cands, refs, _ = pairs.dataset.flat_pairs()
        with component_errors(component.spec):
            scores = np.asarray(cast(Distance, component).score(cands, refs).values, dtype=float)
    s = np.asarray(scores, dtype=float).reshape(len(pairs.dataset), 2)
    sign = 1.0 if component.higher_is_better else -1.0
    first_better = sign * (s[:, 0] - s[:, 1])
    tie = first_better == 0
    correct = np.where(tie, 0.5, ((first_better > 0) == (pairs.preferred == 0)).astype(float))
    cats = np.asarray(pairs.categories)
    names = sorted(set(pairs.categories))
    acc = {c: float(correct[cats == c].mean()) for c in names}
    return PairwiseAccuracy(
        metric if isinstance(metric, str) else component.spec,
        acc,
        {c: float(tie[cats == c].mean()) for c in names},
        {c: int((cats == c).sum()) for c in names},
        float(np.mean(list(acc.values()))),
    )


# ---------------------------------------------------------------------------------------------
# presets
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    """A named judgments benchmark: how to load it and which τ variant it reports."""

    name: str
    loader: Callable[[Path], Judgments]
    primary: str
    description: str


def image_of(item_id: object) -> str:
    """The image of a Flickr8k judged item id ``"<image>#<caption id>"``."""
    return str(item_id).split("#")[0]


def _flickr8k(kind: str) -> Callable[[Path], Judgments]:
    def load(root: Path) -> Judgments:
        from capmetrics.data import flickr8k

        dataset, ratings = getattr(flickr8k, kind)(root)
        return Judgments.from_ratings(dataset, ratings, [image_of(i) for i in dataset.ids])

    return load


PRESETS: dict[str, Preset] = {
    "flickr8k-expert": Preset(
        "flickr8k-expert",
        _flickr8k("load_expert"),
        "kendall_c",
        "Flickr8k-Expert: 5,664 candidates x 3 expert ratings = 16,992 points, tau-c",
    ),
    "flickr8k-cf": Preset(
        "flickr8k-cf",
        _flickr8k("load_crowdflower"),
        "kendall_b",
        "Flickr8k-CF: 47,830 candidates, share of yes votes, tau-b",
    ),
}


def flickr8k_root(root: str | Path | None = None) -> Path:
    """The folder of the raw Flickr8k files: ``root``, else ``$CAPMETRICS_FLICKR8K``."""
    value = root or os.environ.get(FLICKR8K_ENV)
    if not value:
        raise DataError([], header=f"no Flickr8k folder: pass root (--root) or set {FLICKR8K_ENV}")
    return Path(value)


def load_preset(name: str, root: str | Path | None = None) -> tuple[Judgments, Preset]:
    """Load a named benchmark (see :data:`PRESETS`) from the raw files in ``root``."""
    if name not in PRESETS:
        from capmetrics.errors import did_you_mean

        raise SpecError(
            f"unknown judgments preset {name!r}.{did_you_mean(name, PRESETS)} "
            f"Presets: {', '.join(PRESETS)}"
        )
    preset = PRESETS[name]
    return preset.loader(flickr8k_root(root)), preset
