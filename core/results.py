"""Results of a scoring run: per-candidate, per-item and corpus values with a signature.

JSON layout (``schema`` = ``capmetrics.results/1``; documented in docs/usage/results.md)::

    {"schema": "capmetrics.results/1", "capmetrics": "0.1.0",
     "data": {"source": ..., "items": N, "candidates": M, "skipped": [{"item": id, "problem": ...}]},
     "metrics": [{"name": ..., "spec": ..., "kind": ..., "higher_is_better": ...,
                  "signature": {...}, "signature_string": "...", "corpus": x,
                  "items": [{"id": ..., "value": x, "candidates": [...], "p_value": p}]}]}
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from capmetrics.atomic import atomic_write
from capmetrics.data.model import ItemId, Problem

SCHEMA = "capmetrics.results/1"
OUTPUT_FORMATS = ("json", "csv", "table")


def format_signature(signature: dict[str, str]) -> str:
    """sacrebleu-style one-line signature: ``spec|key:value|...``."""
    parts = [signature.get("spec", "?")]
    parts += [f"{k}:{v}" for k, v in signature.items() if k != "spec"]
    return "|".join(parts)


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _plain(value: Any) -> Any:
    """``details`` as JSON can hold them: numpy arrays and numbers to lists and floats, NaN to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _num(float(value))
    return value


@dataclass
class MetricResult:
    """One metric's values on a dataset."""

    name: str
    spec: str
    kind: str
    higher_is_better: bool
    corpus: float
    item_ids: list[ItemId]
    item_values: np.ndarray
    candidate_values: list[np.ndarray]
    signature: dict[str, str]
    p_values: np.ndarray | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def signature_string(self) -> str:
        return format_signature(self.signature)

    def to_dict(self) -> dict[str, Any]:
        items = []
        for i, item_id in enumerate(self.item_ids):
            entry: dict[str, Any] = {
                "id": item_id,
                "value": _num(self.item_values[i]),
                "candidates": [_num(v) for v in self.candidate_values[i]],
            }
            if self.p_values is not None:
                entry["p_value"] = _num(self.p_values[i])
            items.append(entry)
        return {
            "name": self.name,
            "spec": self.spec,
            "kind": self.kind,
            "higher_is_better": self.higher_is_better,
            "signature": self.signature,
            "signature_string": self.signature_string,
            "corpus": _num(self.corpus),
            "details": _plain(self.details),
            "items": items,
        }


@dataclass
class Results:
    """Every metric's result on one dataset."""

    source: str
    n_items: int
    n_candidates: int
    metrics: list[MetricResult]
    skipped: list[Problem] = field(default_factory=list)
    version: str = ""

    def __getitem__(self, name: str) -> MetricResult:
        for m in self.metrics:
            if name in (m.name, m.spec):
                return m
        raise KeyError(f"no metric {name!r} in these results; have {', '.join(m.name for m in self.metrics)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "capmetrics": self.version,
            "data": {
                "source": self.source,
                "items": self.n_items,
                "candidates": self.n_candidates,
                "skipped": [{"item": p.item, "line": p.line, "problem": p.message} for p in self.skipped],
            },
            "metrics": [m.to_dict() for m in self.metrics],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    def to_csv(self) -> str:
        """Long format: one row per (metric, level, item, candidate)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["metric", "level", "item", "candidate", "value", "p_value", "signature"])
        for m in self.metrics:
            sig = m.signature_string
            w.writerow([m.name, "corpus", "", "", _fmt(m.corpus), "", sig])
            for i, item_id in enumerate(m.item_ids):
                p = _fmt(m.p_values[i]) if m.p_values is not None else ""
                w.writerow([m.name, "item", item_id, "", _fmt(m.item_values[i]), p, sig])
                for j, v in enumerate(m.candidate_values[i]):
                    w.writerow([m.name, "candidate", item_id, j, _fmt(v), "", sig])
        return buf.getvalue()

    def to_table(self) -> str:
        """A plain-text table of corpus values with signatures (rich renders it on terminals)."""
        from rich.console import Console
        from rich.table import Table

        table = Table()
        table.add_column("metric")
        table.add_column("corpus", justify="right")
        with_p = any("hmp" in m.details for m in self.metrics)
        if with_p:
            table.add_column("p (HMP)", justify="right")
        table.add_column("signature", overflow="fold")
        for m in self.metrics:
            p = [_fmt(m.details["hmp"], 4) if "hmp" in m.details else ""] if with_p else []
            table.add_row(m.name, _fmt(m.corpus, 4), *p, m.signature_string)
        console = Console(file=io.StringIO(), width=120, color_system=None)
        console.print(f"{self.source}: {self.n_items} items, {self.n_candidates} candidates", soft_wrap=True)
        console.print(table)
        if self.skipped:
            console.print(f"skipped {len(self.skipped)} problem(s):")
            for p in self.skipped:
                console.print(f"  {p}")
        return console.file.getvalue()  # type: ignore[attr-defined]

    def render(self, fmt: str) -> str:
        if fmt not in OUTPUT_FORMATS:
            raise ValueError(f"unknown output format {fmt!r}; use one of {', '.join(OUTPUT_FORMATS)}")
        return {"json": self.to_json, "csv": self.to_csv, "table": self.to_table}[fmt]()

    def write(self, path: str | Path, fmt: str | None = None) -> None:
        """Write atomically; the format defaults to the file's suffix (json, csv, else table)."""
        path = Path(path)
        fmt = fmt or {".json": "json", ".csv": "csv"}.get(path.suffix, "table")
        text = self.render(fmt)
        with atomic_write(path) as handle:
            handle.write(text)


def _fmt(x: float | None, digits: int | None = None) -> str:
    v = _num(x)
    if v is None:
        return "nan" if x is not None else ""
    return f"{v:.{digits}f}" if digits is not None else repr(v)
