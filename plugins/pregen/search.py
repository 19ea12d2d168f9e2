"""Search for the pre-gen metric that predicts a post-gen metric best, and CIDEr stratification.

Rows are (model, subset) observations: pre-gen values (one column per composition) and post-gen
metric values. Every composition is ranked by R² (squared Pearson correlation) per post-gen
metric; compositions that are infinite, NaN or constant in any group are dropped with a reason,
as in the paper's phase 3.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics import DataError, Distance, MetricError
from capmetrics.errors import SpecError
from capmetrics.plugins.pregen.compute import RaggedProbs, evaluate
from capmetrics.plugins.pregen.tiers import Composition, paper_compositions, parse_composition


# --------------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------------
def read_rows(path: str | Path) -> dict[str, list[Any]]:
    """Columns of a ``.csv``, ``.tsv`` or ``.jsonl`` table (numbers parsed, ``inf`` allowed)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        rows = [
            json.loads(line)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    else:
        with path.open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ","))
    names = list(dict.fromkeys(k for row in rows for k in row))
    return {k: [_number(row.get(k)) for row in rows] for k in names}


def write_rows(rows: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """Write rows as ``.jsonl``, ``.tsv`` or ``.csv`` (by suffix)."""
    from capmetrics.io.atomic import atomic_write

    path = Path(path)
    if path.suffix == ".jsonl":
        with atomic_write(path) as f:
            f.write("".join(json.dumps({k: _plain(v) for k, v in r.items()}) + "\n" for r in rows))
        return
    names = list(dict.fromkeys(k for r in rows for k in r))
    with atomic_write(path) as f:
        writer = csv.DictWriter(f, names, delimiter="\t" if path.suffix == ".tsv" else ",")
        writer.writeheader()
        writer.writerows(rows)


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value.item() if isinstance(value, np.generic) else value


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def split_columns(
    columns: Mapping[str, Sequence[Any]], post: Sequence[str] = ()
) -> tuple[list[str], list[str], list[str]]:
    """(pre-gen, post-gen, label) column names.

    Pre-gen columns are those named like a composition; post-gen ones are ``post`` or, if
    empty, the other numeric columns; labels are the non-numeric columns.
    """
    pre, numeric, labels = [], [], []
    for name, values in columns.items():
        try:
            parse_composition(name)
            pre.append(name)
            continue
        except SpecError:
            pass
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            numeric.append(name)
        else:
            labels.append(name)
    missing = [p for p in post if p not in columns]
    if missing:
        raise DataError(
            [f"no column {m!r}; columns: {', '.join(columns)}" for m in missing], "pre-gen search"
        )
    return (
        pre,
        list(post) or [n for n in numeric if n not in ("strata", "stratum", "n_items")],
        labels,
    )


# --------------------------------------------------------------------------------------------
# ranking
# --------------------------------------------------------------------------------------------
@dataclass
class Ranking:
    """Compositions ranked by R² against one post-gen metric (best first)."""

    post: str
    names: list[str]
    r: np.ndarray
    p_value: np.ndarray
    n: int
    r2_by_group: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def r2(self) -> np.ndarray:
        return self.r**2

    def rows(self, top: int | None = None) -> list[dict[str, Any]]:
        """One dict per composition: rank, name, R, R², p-value and R² per group."""
        out = []
        for k, name in enumerate(self.names[:top]):
            row = {
                "post": self.post,
                "rank": k + 1,
                "composition": name,
                "r": float(self.r[k]),
                "r2": float(self.r2[k]),
                "p_value": float(self.p_value[k]),
                "n": self.n,
            }
            row.update({f"r2_{g}": float(v[k]) for g, v in self.r2_by_group.items()})
            out.append(row)
        return out


@dataclass
class SearchResult:
    """Rankings per post-gen metric and the compositions dropped before ranking."""

    rankings: dict[str, Ranking]
    dropped: dict[str, str]

    def best(self) -> str:
        """The composition with the highest mean R² over the post-gen metrics."""
        names = next(iter(self.rankings.values())).names
        score = {n: 0.0 for n in names}
        for ranking in self.rankings.values():
            for n, v in zip(ranking.names, ranking.r2):
                score[n] += float(v)
        return max(score, key=score.__getitem__)


def pearson(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson r of every column of ``x`` (rows × columns) with ``y``, and two-sided p-values."""
    from scipy import stats

    n = len(y)
    xc = x - x.mean(axis=0)
    yc = y - y.mean()
    r = (xc.T @ yc) / (np.sqrt((xc**2).sum(axis=0)) * np.sqrt((yc**2).sum()))
    r = np.clip(r, -1.0, 1.0)
    with np.errstate(divide="ignore"):
        t = np.abs(r) * np.sqrt((n - 2) / np.maximum(1.0 - r**2, 0.0))
    return r, 2 * stats.t.sf(t, n - 2)


def drop_reasons(
    values: np.ndarray, names: Sequence[str], groups: np.ndarray | None
) -> dict[str, str]:
    """Why each unusable column (rows × columns) is dropped: NaN, ±inf, or constant in a group."""
    subsets = {"all rows": np.ones(len(values), dtype=bool)}
    if groups is not None:
        subsets.update({f"group {g!r}": groups == g for g in dict.fromkeys(groups.tolist())})
    reasons: dict[str, str] = {}
    for label, rows in subsets.items():
        part = values[rows]
        for j in np.flatnonzero(np.isnan(part).any(axis=0)):
            reasons.setdefault(
                names[j], f"NaN in {int(np.isnan(part[:, j]).sum())} of {len(part)} rows ({label})"
            )
        for j in np.flatnonzero(np.isinf(part).any(axis=0)):
            reasons.setdefault(
                names[j],
                f"infinite in {int(np.isinf(part[:, j]).sum())} of {len(part)} rows ({label})",
            )
        with np.errstate(invalid="ignore"):
            constant = np.ptp(part, axis=0) == 0 if len(part) else np.zeros(part.shape[1], bool)
        for j in np.flatnonzero(constant):
            reasons.setdefault(
                names[j], f"constant (= {float(part[0, j])!r}) over {len(part)} rows ({label})"
            )
    return reasons


def search(
    pre: Mapping[str, Sequence[float]],
    post: Mapping[str, Sequence[float]],
    groups: Sequence[Any] | None = None,
) -> SearchResult:
    """Rank every pre-gen column by R² against every post-gen column.

    Args:
        pre: composition name → one value per row.
        post: post-gen metric name → one value per row.
        groups: optional group label per row (e.g. the dataset); a composition unusable in any
            group is dropped everywhere, and R² is also reported per group.

    Raises:
        DataError: fewer than 3 rows, columns of different lengths, or a post-gen column that is
            non-finite or constant.
    """
    names = list(pre)
    x = (
        np.column_stack([np.asarray(pre[n], dtype=float) for n in names])
        if names
        else np.empty((0, 0))
    )
    n = x.shape[0]
    g = None if groups is None else np.asarray([str(v) for v in groups])
    problems = []
    if n < 3:
        problems.append(f"{n} rows; R² needs at least 3")
    for name, values in post.items():
        y = np.asarray(values, dtype=float)
        if len(y) != n:
            problems.append(f"post-gen {name!r} has {len(y)} values for {n} rows")
        elif not np.isfinite(y).all() or np.ptp(y) == 0:
            problems.append(f"post-gen {name!r} is non-finite or constant")
    if g is not None and len(g) != n:
        problems.append(f"{len(g)} group labels for {n} rows")
    if problems:
        raise DataError(problems, "cannot rank pre-gen metrics")
    dropped = drop_reasons(x, names, g)
    keep = [j for j, name in enumerate(names) if name not in dropped]
    kept = x[:, keep]
    rankings = {}
    for name, values in post.items():
        y = np.asarray(values, dtype=float)
        r, p = pearson(kept, y)
        order = np.argsort(-(r**2), kind="stable")
        by_group = {}
        if g is not None:
            for label in dict.fromkeys(g.tolist()):
                rows = g == label
                by_group[label] = (
                    (pearson(kept[rows], y[rows])[0] ** 2)[order]
                    if rows.sum() > 2
                    else np.full(len(order), np.nan)
                )
        rankings[name] = Ranking(
            name, [names[keep[k]] for k in order], r[order], p[order], n, by_group
        )
    return SearchResult(rankings, dropped)


def plot_best(
    result: SearchResult,
    pre: Mapping[str, Sequence[float]],
    post: Mapping[str, Sequence[float]],
    path: str | Path,
    colour_by: Sequence[Any] | None = None,
    composition: str | None = None,
) -> Path:
    """Scatter the best composition against each post-gen metric (the paper's Fig. 4) into
    ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    best = composition or result.best()
    metrics = list(result.rankings)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.8), squeeze=False)
    x = np.asarray(pre[best], dtype=float)
    labels = (
        np.asarray([str(c) for c in colour_by]) if colour_by is not None else np.full(len(x), "")
    )
    for ax, metric in zip(axes[0], metrics):
        y = np.asarray(post[metric], dtype=float)
        for label in dict.fromkeys(labels.tolist()):
            rows = labels == label
            ax.scatter(x[rows], y[rows], s=14, alpha=0.8, label=label or None)
        ranking = result.rankings[metric]
        r2 = float(ranking.r2[ranking.names.index(best)]) if best in ranking.names else float("nan")
        ax.set_xlabel(best)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric}: R² = {r2:.3f}")
    if colour_by is not None:
        axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------
# stratification
# --------------------------------------------------------------------------------------------
def strata(scores: Sequence[float], max_strata: int = 5) -> list[tuple[int, int, np.ndarray]]:
    """``(S, s, item indices)`` for S = 1..max_strata, s = 0..S−1 (Part B §1.7).

    Items are sorted by ascending score (stable); stratum s of S is ``order[q·s : q·(s+1)]`` with
    q = ⌊N/S⌋, so the N mod S items with the highest scores are left out for that S.
    """
    order = np.argsort(np.asarray(scores, dtype=float), kind="stable")
    out = []
    for total in range(1, max_strata + 1):
        q = len(order) // total
        if q == 0:
            raise DataError([f"{len(order)} items cannot fill {total} strata"], "stratification")
        out.extend((total, s, order[q * s : q * (s + 1)]) for s in range(total))
    return out


def stratified_rows(
    probs: RaggedProbs,
    dataset: Any,
    post_metrics: Mapping[str, Distance],
    compositions: Sequence[Composition | str] | None = None,
    by: Distance | None = None,
    max_strata: int = 5,
    labels: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Rows for :func:`search` from one model: pre- and post-gen metrics on every CIDEr stratum.

    Args:
        probs: the model's reference probabilities, items in the dataset's order.
        dataset: items with the model's generated caption as first candidate and the references.
        post_metrics: name → distance; recomputed on every stratum (so CIDEr's IDF comes from
            the stratum's references).
        compositions: pre-gen metrics (default: the paper's 504).
        by: per-item score that orders the items (default: CIDEr-D over the whole dataset).
        max_strata: strata counts 1..max_strata (15 rows for 5).
        labels: extra columns for every row (model name, checkpoint, ...).
    """
    from capmetrics.registry.compose import compose

    items = list(dataset)
    ids = [str(i) for i in probs.item_ids]
    if ids != [str(item.id) for item in items]:
        raise DataError(
            ["the probabilities' items differ from the dataset's items (ids or order)"],
            "stratification",
        )
    comps = [
        c if isinstance(c, Composition) else parse_composition(c)
        for c in (compositions or paper_compositions())
    ]
    cands = [item.candidates[0] if item.candidates else "" for item in items]
    refs = [list(item.references) for item in items]
    scorer = by if by is not None else compose("cider-d", "distance")
    if not isinstance(scorer, Distance):
        raise MetricError("stratification needs a distance as per-item score")
    per_item = np.asarray(scorer.score(cands, refs).values, dtype=float)
    rows = []
    for total, s, idx in strata(per_item, max_strata):
        row: dict[str, Any] = dict(labels or {})
        row.update(strata=total, stratum=s, n_items=len(idx))
        for name, metric in post_metrics.items():
            row[name] = float(metric.score([cands[i] for i in idx], [refs[i] for i in idx]).corpus)
        row.update(zip((c.name for c in comps), evaluate(probs.subset(idx), comps).tolist()))
        rows.append(row)
    return rows
