"""Results of a scoring run: per-candidate, per-item and corpus values with a signature.

JSON layout (``schema`` = ``capmetrics.engine.results/1``; documented in docs/usage/results.md),
objects indented by 2 and each item on one line::

    {"schema": "capmetrics.engine.results/1", "capmetrics": "0.1.0",
     "data": {"source": ..., "items": N, "candidates": M, "skipped": [{"item": id, "problem": ...}],
              "empty_candidates": [{"item": id, "candidate": j}]},
     "metrics": [{"name": ..., "spec": ..., "kind": ..., "higher_is_better": ...,
                  "signature": {...}, "signature_string": "...", "corpus": x,
                  "items": [{"id": ..., "value": x, "candidates": [...], "p_value": p}]}]}
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from capmetrics.data.model import ItemId, Problem
from capmetrics.errors import OutputError
from capmetrics.io.atomic import atomic_write
from capmetrics.io.strict_json import jsonable

SCHEMA = "capmetrics.engine.results/1"
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


@dataclass(eq=False)
class MetricResult:
    """One metric's values on a dataset. Where a number is expected it is its corpus value, as
    a float: ``f"{r:.4f}"``, ``round(r, 3)``, ``r > 0.5``, ``2 * r``, ``float(r)``, ``sorted``,
    ``sum``, ``math`` functions (arithmetic gives plain floats); ``hash(r) == hash(float(r))``."""

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

    # a number where a number is expected: the corpus value, as a float ------------------------
    def __float__(self) -> float:
        """The corpus value: ``float(results["cider-d"])``."""
        return float(self.corpus)

    def __format__(self, spec: str) -> str:
        """``f"{r:.4f}"`` formats the corpus value; ``f"{r}"`` is the repr."""
        return format(float(self), spec) if spec else str(self)

    def __round__(self, ndigits: int | None = None) -> float | int:
        return round(float(self), ndigits)

    def __trunc__(self) -> int:
        return math.trunc(float(self))

    def __floor__(self) -> int:
        return math.floor(float(self))

    def __ceil__(self) -> int:
        return math.ceil(float(self))

    def __abs__(self) -> float:
        return abs(float(self))

    def __neg__(self) -> float:
        return -float(self)

    def __pos__(self) -> float:
        return float(self)

    def __bool__(self) -> bool:
        return bool(float(self))

    def __eq__(self, other: object) -> bool:
        """Equal to a number with the same corpus value, and to a result with the same name,
        spec, signature and values (NaN where both are NaN)."""
        if other is self:
            return True
        if isinstance(other, MetricResult):
            return (self.name, self.spec, self.kind, self.signature, self.item_ids) == (
                other.name,
                other.spec,
                other.kind,
                other.signature,
                other.item_ids,
            ) and _same(
                [self.corpus, self.item_values, *self.candidate_values, self.p_values],
                [other.corpus, other.item_values, *other.candidate_values, other.p_values],
            )
        value = _number(other)
        return NotImplemented if value is None else float(self) == value

    def __hash__(self) -> int:
        """The corpus value's hash, as ``hash(float(r))``: equal objects hash alike."""
        value = float(self)
        return object.__hash__(self) if math.isnan(value) else hash(value)

    def __lt__(self, other: object) -> bool:
        value = _number(other)
        return NotImplemented if value is None else float(self) < value

    def __le__(self, other: object) -> bool:
        value = _number(other)
        return NotImplemented if value is None else float(self) <= value

    def __gt__(self, other: object) -> bool:
        value = _number(other)
        return NotImplemented if value is None else float(self) > value

    def __ge__(self, other: object) -> bool:
        value = _number(other)
        return NotImplemented if value is None else float(self) >= value

    def __add__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) + value

    def __radd__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value + float(self)

    def __sub__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) - value

    def __rsub__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value - float(self)

    def __mul__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) * value

    def __rmul__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value * float(self)

    def __truediv__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) / value

    def __rtruediv__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value / float(self)

    def __floordiv__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) // value

    def __rfloordiv__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value // float(self)

    def __mod__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) % value

    def __rmod__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value % float(self)

    def __pow__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else float(self) ** value

    def __rpow__(self, other: object) -> float:
        value = _number(other)
        return NotImplemented if value is None else value ** float(self)

    def __repr__(self) -> str:
        n_cands = sum(len(v) for v in self.candidate_values)
        p = f", p (HMP) {_fmt(self.details['hmp'], 4)}" if "hmp" in self.details else ""
        return (
            f"<MetricResult {self.name}: corpus {_fmt(self.corpus, 4)}{p} over "
            f"{len(self.item_ids)} items "
            f"({n_cands} values); {self.signature_string}>"
        )

    def _repr_html_(self) -> str:
        rows = [
            ("corpus", _fmt(self.corpus, 4)),
            ("items", str(len(self.item_ids))),
            ("higher is better", "yes" if self.higher_is_better else "no"),
        ]
        if "hmp" in self.details:
            rows.append(("p (HMP)", _fmt(self.details["hmp"], 4)))
        rows.append(("signature", self.signature_string))
        shown = ", ".join(
            f"{html.escape(str(i))}: {_fmt(v, 4)}"
            for i, v in zip(self.item_ids[:5], self.item_values[:5])
        )
        more = " …" if len(self.item_ids) > 5 else ""
        return (
            f"<b>{html.escape(self.name)}</b>"
            + _html_table(("", ""), rows)
            + f"<small>per item: {shown}{more}</small>"
        )

    def item_entry(self, i: int) -> dict[str, Any]:
        """Item ``i`` as written in JSON."""
        entry: dict[str, Any] = {
            "id": self.item_ids[i],
            "value": _num(self.item_values[i]),
            "candidates": [_num(v) for v in self.candidate_values[i]],
        }
        if self.p_values is not None:
            entry["p_value"] = _num(self.p_values[i])
        return entry

    def to_dict(self) -> dict[str, Any]:
        return self._dict([self.item_entry(i) for i in range(len(self.item_ids))])

    def _dict(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "kind": self.kind,
            "higher_is_better": self.higher_is_better,
            "signature": self.signature,
            "signature_string": self.signature_string,
            "corpus": _num(self.corpus),
            "details": jsonable(self.details, f"{self.name}.details"),
            "items": items,
        }


#: Metrics shown in :class:`Results`' repr before "... and N more".
REPR_METRICS = 20


@dataclass(eq=False)
class Results(Mapping[str, MetricResult]):
    """Every metric's result on one dataset: a mapping from metric name to
    :class:`MetricResult`, in the order the metrics were given.

    ``results["CIDEr"]`` finds a metric by its name, its spec or any alias of the spec,
    case-insensitively; ``to_dict()`` gives ``{name: corpus value}`` as plain floats.
    """

    source: str
    n_items: int
    n_candidates: int
    metrics: list[MetricResult]
    skipped: list[Problem] = field(default_factory=list)
    version: str = ""
    #: (item id, candidate index) of each empty or whitespace-only candidate that was scored.
    empty_candidates: list[tuple[ItemId, int]] = field(default_factory=list)

    def __getitem__(self, name: str) -> MetricResult:
        if not isinstance(name, str):
            raise KeyError(
                (
                    "metrics are looked up by name, e.g. "
                    f"results[{self.metrics[0].name!r}]; got {name!r}"
                )
                if self.metrics
                else f"no metric {name!r}: these results are empty"
            )
        found = find_metric(self.metrics, name)
        if found is None:
            raise KeyError(
                f"no metric {name!r} in these results; have "
                f"{', '.join(m.name for m in self.metrics)}"
            )
        return found

    def __iter__(self) -> Iterator[str]:
        return iter([m.name for m in self.metrics])

    def __len__(self) -> int:
        return len(self.metrics)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and find_metric(self.metrics, name) is not None

    def to_dict(self) -> dict[str, float]:
        """``{metric name: corpus value}``, plain Python floats (NaN where undefined)."""
        return {m.name: float(m.corpus) for m in self.metrics}

    def __repr__(self) -> str:
        lines = [f"<Results {self.source}: {self.n_items} items, {self.n_candidates} candidates"]
        shown = self.metrics[:REPR_METRICS]
        width = max((len(m.name) for m in shown), default=0)
        for m in shown:
            p = f"  p (HMP) {_fmt(m.details['hmp'], 4)}" if "hmp" in m.details else ""
            lines.append(f"  {m.name:<{width}}  {_fmt(m.corpus, 4)}{p}")
        if len(self.metrics) > REPR_METRICS:
            lines.append(f"  ... and {len(self.metrics) - REPR_METRICS} more metrics")
        if self.empty_candidates:
            lines.append(f"  ({len(self.empty_candidates)} empty candidate(s) scored)")
        if self.skipped:
            lines.append(f"  ({len(self.skipped)} item problem(s) skipped)")
        return "\n".join(lines) + ">"

    def _repr_html_(self) -> str:
        with_p = any("hmp" in m.details for m in self.metrics)
        header = ("metric", "corpus", *(("p (HMP)",) if with_p else ()), "signature")
        rows = [
            (
                m.name,
                _fmt(m.corpus, 4),
                *((_fmt(m.details["hmp"], 4) if "hmp" in m.details else "",) if with_p else ()),
                m.signature_string,
            )
            for m in self.metrics
        ]
        notes = (
            [f"{len(self.empty_candidates)} empty candidate(s) scored"]
            if self.empty_candidates
            else []
        )
        notes += [f"{len(self.skipped)} item problem(s) skipped"] if self.skipped else []
        return (
            f"<b>{html.escape(self.source)}</b>: {self.n_items} items, "
            f"{self.n_candidates} candidates"
            + _html_table(header, rows)
            + "".join(f"<small>{html.escape(n)}</small><br>" for n in notes)
        )

    def to_pandas(self, form: str = "long", level: str = "item") -> Any:
        """The values as a pandas DataFrame (needs pandas: ``pip install pandas``).

        Args:
            form: ``long``: one row per value, columns ``metric, level, item, candidate, value,
                p_value`` (levels corpus, item, candidate); ``wide``: one column per metric.
            level: for ``wide``: ``item`` (one row per item, index ``item``) or ``candidate`` (one
                row per candidate, index ``item, candidate``). Statistics (one value per item)
                have no candidate rows.
        """
        try:
            import pandas as pd
        except ImportError as err:
            raise ImportError("Results.to_pandas needs pandas: pip install pandas") from err
        if form == "long":
            rows: list[tuple[Any, ...]] = []
            for m in self.metrics:
                rows.append((m.name, "corpus", None, None, _float(m.corpus), np.nan))
                for i, item_id in enumerate(m.item_ids):
                    p = _float(m.p_values[i]) if m.p_values is not None else np.nan
                    rows.append((m.name, "item", item_id, None, _float(m.item_values[i]), p))
                    if m.kind != "statistic":  # a statistic's value belongs to the item
                        rows += [
                            (m.name, "candidate", item_id, j, _float(v), np.nan)
                            for j, v in enumerate(m.candidate_values[i])
                        ]
            frame = pd.DataFrame(
                rows, columns=["metric", "level", "item", "candidate", "value", "p_value"]
            )
            frame["candidate"] = frame["candidate"].astype("Int64")
            return frame
        if form != "wide":
            raise ValueError(f"unknown form {form!r}; use 'long' or 'wide'")
        columns: dict[str, Any]
        if level == "item":
            columns = {
                m.name: pd.Series(
                    np.asarray(m.item_values, dtype=float), index=pd.Index(m.item_ids, name="item")
                )
                for m in self.metrics
            }
        elif level == "candidate":
            columns = {}
            for m in (m for m in self.metrics if m.kind != "statistic"):
                keys = [
                    (item_id, j)
                    for item_id, vs in zip(m.item_ids, m.candidate_values)
                    for j in range(len(vs))
                ]
                values: np.ndarray | list[float] = (
                    np.concatenate([np.asarray(v, dtype=float) for v in m.candidate_values])
                    if keys
                    else []
                )
                columns[m.name] = pd.Series(
                    values, index=pd.MultiIndex.from_tuples(keys, names=["item", "candidate"])
                )
        else:
            raise ValueError(f"unknown level {level!r}; use 'item' or 'candidate'")
        return pd.DataFrame(columns)

    def to_json_dict(self) -> dict[str, Any]:
        """Everything, as written in JSON (:meth:`to_json`): header, metrics, items."""
        return {**self._header(), "metrics": [m.to_dict() for m in self.metrics]}

    def _header(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "capmetrics": self.version,
            "data": {
                "source": self.source,
                "items": self.n_items,
                "candidates": self.n_candidates,
                "skipped": [
                    {"item": p.item, "line": p.line, "problem": p.message} for p in self.skipped
                ],
                "empty_candidates": [
                    {"item": item, "candidate": j} for item, j in self.empty_candidates
                ],
            },
        }

    def to_json(self) -> str:
        """Strict JSON (numpy values as numbers and lists, NaN/±inf as null): what
        :meth:`write_json` writes."""
        buf = io.StringIO()
        self.write_json(buf)
        return buf.getvalue()

    def write_json(self, handle: IO[str]) -> None:
        """The JSON of :meth:`to_json_dict`, written piece by piece without the whole text (or
        the whole dict of items) in memory: objects indented by 2, each item on one line.
        Every value is encoded by the :mod:`json` module; only the braces, commas and keys
        of the enclosing objects are joined here."""
        data = self.to_dict_without_items()
        metrics = data.pop("metrics")

        def write_metrics(indent: int) -> None:
            _write_list(
                handle,
                [
                    lambda ind, m=m, fields=fields: _write_object(
                        handle, {**fields, "items": lambda i, m=m: _write_items(handle, m, i)}, ind
                    )
                    for m, fields in zip(self.metrics, metrics)
                ],
                indent,
            )

        _write_object(handle, {**data, "metrics": write_metrics}, 0)
        handle.write("\n")

    def to_dict_without_items(self) -> dict[str, Any]:
        """:meth:`to_json_dict` (strict JSON types) with empty item lists."""
        out = jsonable(self._header())
        out["metrics"] = [jsonable(m._dict([]), m.name) for m in self.metrics]
        return out

    def to_csv(self) -> str:
        """Long format: one row per (metric, level, item, candidate)."""
        buf = io.StringIO()
        self.write_csv(buf)
        return buf.getvalue()

    def write_csv(self, handle: IO[str]) -> None:
        """:meth:`to_csv` written in blocks of rows: text fields quoted by the csv module (once
        per distinct text), numbers formatted in bulk."""
        quoted = _CsvQuoter()
        handle.write("metric,level,item,candidate,value,p_value,signature\n")
        for m in self.metrics:
            name, sig = quoted(m.name), quoted(m.signature_string)
            handle.write(f"{name},corpus,,,{_fmt(m.corpus)},,{sig}\n")
            items = _fmt_all(m.item_values)
            p_values = [""] * len(items) if m.p_values is None else [_fmt(p) for p in m.p_values]
            counts = [len(c) for c in m.candidate_values]
            cands = iter(_fmt_all(np.concatenate(m.candidate_values)) if sum(counts) else [])
            lines: list[str] = []
            for item_id, value, p, count in zip(m.item_ids, items, p_values, counts, strict=True):
                item = quoted(item_id)
                lines.append(f"{name},item,{item},,{value},{p},{sig}\n")
                lines.extend(
                    f"{name},candidate,{item},{j},{next(cands)},,{sig}\n" for j in range(count)
                )
                if (
                    len(lines) >= 4096
                ):  # in blocks: a streamed million items never sits in memory as text
                    handle.write("".join(lines))
                    lines.clear()
            handle.write("".join(lines))

    def to_table(self, width: int | None = None, signatures: bool = False) -> str:
        """A plain-text table: metric, value (and p (HMP) for statistics), and each row's
        signature shortened to what tells the rows apart (the spec, when the name differs from
        it, and the entries that differ between rows); the entries shared by every row follow.

        Args:
            width: the columns to fit in (a terminal's width); None: as wide as the content.
            signatures: list every full signature under the table (they are always in
                JSON and CSV).
        """
        from rich.console import Console
        from rich.table import Table

        short = short_signatures(
            [m.signature for m in self.metrics], [m.name for m in self.metrics]
        )
        with_p = any("hmp" in m.details for m in self.metrics)
        rows = [
            [
                m.name,
                _fmt(m.corpus, 4),
                *([_fmt(m.details["hmp"], 4) if "hmp" in m.details else ""] if with_p else []),
            ]
            for m in self.metrics
        ]
        header = ["metric", "value", *(["p (HMP)"] if with_p else [])]
        widths = [
            max(len(h), *(len(r[k]) for r in rows)) if rows else len(h)
            for k, h in enumerate(header)
        ]
        widths[0] = min(widths[0], 32)  # longer names fold inside their cell
        room = (
            (width - 1 - sum(w + 3 for w in widths) - 3) if width else None
        )  # borders and padding
        with_sig = any(short) and (room is None or room >= 12)
        table = Table()
        table.add_column("metric", overflow="fold", min_width=widths[0])
        for h in header[1:]:
            table.add_column(h, justify="right", no_wrap=True)
        if with_sig:
            table.add_column("signature", no_wrap=True, overflow="ellipsis")
        for row, sig in zip(rows, short):
            if room is not None and len(sig) > room:
                sig = sig[: room - 1] + "…"
            table.add_row(*row, *([sig] if with_sig else []))
        console = Console(
            file=io.StringIO(),
            width=width or 10_000,
            color_system=None,
            emoji=False,
            highlight=False,
        )
        line: dict[str, Any] = {"overflow": "ellipsis", "no_wrap": True, "crop": True}
        console.print(
            f"{self.source}: {self.n_items} items, {self.n_candidates} candidates", **line
        )
        console.print(table)
        common = common_signature([m.signature for m in self.metrics])
        if signatures:
            console.print("signatures:")
            for m in self.metrics:
                console.print(f"  {m.name}: {m.signature_string}", soft_wrap=True)
        elif common:
            console.print(f"same for all: {common} (full signatures: --signatures)", **line)
        if self.empty_candidates:
            console.print(
                f"{len(self.empty_candidates)} empty candidate(s) scored "
                "(data.empty_candidates in JSON)",
                **line,
            )
        if self.skipped:
            console.print(f"skipped {len(self.skipped)} problem(s):")
            for p in self.skipped:
                console.print(f"  {p}", soft_wrap=True)
        return "\n".join(text.rstrip() for text in console.file.getvalue().split("\n"))  # type: ignore[attr-defined]

    def render(self, fmt: str) -> str:
        if fmt not in OUTPUT_FORMATS:
            raise ValueError(
                f"unknown output format {fmt!r}; use one of {', '.join(OUTPUT_FORMATS)}"
            )
        return {"json": self.to_json, "csv": self.to_csv, "table": self.to_table}[fmt]()

    def write(self, path: str | Path, fmt: str | None = None) -> None:
        """Write to ``path`` as :func:`capmetrics.io.atomic.atomic_write` does (a regular file is
        replaced atomically, a FIFO or device written into, ``-`` is stdout); the format
        defaults to the file's suffix (json, csv, else table).

        Raises:
            OutputError: the path cannot be written, or a text cannot be encoded as UTF-8.
        """
        path = Path(path)
        fmt = fmt or {".json": "json", ".csv": "csv"}.get(path.suffix, "table")
        if fmt not in OUTPUT_FORMATS:
            raise ValueError(
                f"unknown output format {fmt!r}; use one of {', '.join(OUTPUT_FORMATS)}"
            )
        try:
            with atomic_write(path) as handle:
                if fmt == "json":
                    self.write_json(handle)
                elif fmt == "csv":
                    self.write_csv(handle)
                else:
                    handle.write(self.to_table())
        except UnicodeEncodeError as err:  # a lone surrogate in an id given from Python
            bad = (
                err.object[max(0, err.start - 20) : err.end + 20]
                if isinstance(err.object, str)
                else ""
            )
            raise OutputError(
                f"cannot write {path}: a text cannot be encoded as UTF-8 "
                f"({err.reason} near {bad!r}); the old file, if any, is kept"
            ) from err


def _differing(signatures: list[dict[str, str]]) -> set[str]:
    keys = {k for sig in signatures for k in sig if k != "spec"}
    return {k for k in keys if len({sig.get(k) for sig in signatures}) > 1}


def short_signatures(signatures: list[dict[str, str]], names: list[str]) -> list[str]:
    """Each signature cut to what distinguishes it from the others: its spec where the name
    differs from it, and the entries whose values differ between the signatures."""
    differing = _differing(signatures)
    out = []
    for sig, name in zip(signatures, names):
        parts = [sig["spec"]] if sig.get("spec", name) != name else []
        parts += [f"{k}:{v}" for k, v in sig.items() if k in differing]
        out.append("|".join(parts))
    return out


def common_signature(signatures: list[dict[str, str]]) -> str:
    """The entries (other than the spec) that every signature has with the same value."""
    if not signatures:
        return ""
    differing = _differing(signatures)
    shared = [
        (k, v)
        for k, v in signatures[0].items()
        if k != "spec" and k not in differing and all(k in sig for sig in signatures)
    ]
    return "|".join(f"{k}:{v}" for k, v in shared)


def find_metric(metrics: list[MetricResult], key: str) -> MetricResult | None:
    """The metric that ``key`` names: its name or spec, case-insensitively and with ``_`` as
    ``-`` (``Bleu_4``), else a spec that builds the same component (an alias: ``CIDEr`` for
    ``cider-d``, ``trm(distance=cider)``); None if none does."""
    from capmetrics.components.spec import normalize_name

    wanted = normalize_name(key.strip())
    for m in metrics:
        if wanted in (normalize_name(m.name), normalize_name(m.spec)):
            return m
    from capmetrics.errors import DataError, MetricError, SpecError, UnknownComponentError
    from capmetrics.registry.compose import METRIC_KINDS, compose

    try:
        spec = compose(key, METRIC_KINDS).spec
    except (SpecError, UnknownComponentError, MetricError, DataError):
        return None  # not a spec, or not one that can be built here: not in these results
    # anything else (a broken plugin, a bug) is not "not found": it propagates
    return next((m for m in metrics if m.spec == spec), None)


#: JSON of one value on one line, by the C encoder (``indent=None``): strict, UTF-8 kept.
_ONE_LINE = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _write_object(handle: IO[str], fields: dict[str, Any], indent: int) -> None:
    """``fields`` as a JSON object at ``indent`` spaces, one key a line; a value is plain JSON
    data (written by ``json.dumps(indent=2)``) or a callable that writes itself given its
    indent."""
    pad = " " * (indent + 2)
    handle.write("{")
    for k, (key, value) in enumerate(fields.items()):
        handle.write(("," if k else "") + f"\n{pad}{_ONE_LINE.encode(key)}: ")
        if callable(value):
            value(indent + 2)
        else:
            handle.write(
                json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False).replace(
                    "\n", "\n" + pad
                )
            )  # a JSON string holds no raw newline
    handle.write(f"\n{' ' * indent}}}" if fields else "}")


def _write_list(handle: IO[str], writers: list[Any], indent: int) -> None:
    """A JSON list whose elements write themselves (callables given their indent)."""
    if not writers:
        handle.write("[]")
        return
    pad = " " * (indent + 2)
    handle.write("[")
    for k, write in enumerate(writers):
        handle.write(("," if k else "") + f"\n{pad}")
        write(indent + 2)
    handle.write(f"\n{' ' * indent}]")


def _write_items(handle: IO[str], metric: MetricResult, indent: int, block: int = 4096) -> None:
    """A metric's ``items`` list, one item a line (:meth:`MetricResult.item_entry`, encoded by
    the json module), in blocks of ``block`` items."""
    n = len(metric.item_ids)
    if not n:
        handle.write("[]")
        return
    pad = "\n" + " " * (indent + 2)
    handle.write("[")
    for start in range(0, n, block):
        stop = min(start + block, n)
        values = jsonable(np.asarray(metric.item_values[start:stop], dtype=np.float64))
        p_values = (
            None
            if metric.p_values is None
            else jsonable(np.asarray(metric.p_values[start:stop], dtype=np.float64))
        )
        cands = metric.candidate_values[start:stop]
        flat = jsonable(np.concatenate(cands).astype(np.float64, copy=False)) if cands else []
        ends = np.cumsum([len(c) for c in cands]).tolist()
        lines = []
        for k, i in enumerate(range(start, stop)):  # as item_entry(i), the arrays converted at once
            item_id = metric.item_ids[i]
            if type(item_id) is not str:
                item_id = jsonable(item_id, f"{metric.name}.items[{i}].id")
            entry = {
                "id": item_id,
                "value": values[k],
                "candidates": flat[ends[k - 1] if k else 0 : ends[k]],
            }
            if p_values is not None:
                entry["p_value"] = p_values[k]
            lines.append(pad + _ONE_LINE.encode(entry))
        handle.write(("," if start else "") + ",".join(lines))
    handle.write(f"\n{' ' * indent}]")


def _number(x: object) -> float | None:
    """``x`` as a float when it is a real number (a result is its corpus value), else None."""
    if isinstance(x, MetricResult):
        return float(x)
    if isinstance(x, (numbers.Real, np.bool_)):
        return float(x)
    return None


def _same(a: list[Any], b: list[Any]) -> bool:
    """Pairwise equality of numbers and arrays, NaN equal to NaN."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is None or y is None:
            if x is not y:
                return False
        elif not np.array_equal(
            np.asarray(x, dtype=float), np.asarray(y, dtype=float), equal_nan=True
        ):
            return False
    return True


def _float(x: float | None) -> float:
    return np.nan if x is None else float(x)


def _html_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header) if any(header) else ""
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table>{'<tr>' + head + '</tr>' if head else ''}{body}</table>"


class _CsvQuoter(dict[object, str]):
    """text -> the field as ``csv.writer`` writes it (quoted where needed), memoised."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\n")

    def __call__(self, value: object) -> str:
        return self[value]

    def __missing__(self, value: object) -> str:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow([value, ""])  # a second field: a lone empty field would be quoted
        field = self._buffer.getvalue()[:-2]
        if "\r" in field and not field.startswith(
            '"'
        ):  # the writer quotes only "\n" (its line end)
            field = '"' + field.replace('"', '""') + '"'
        self[value] = field
        return field


def _fmt_all(values: Any) -> list[str]:
    """:func:`_fmt` of every value of a numeric array, at once."""
    array = np.asarray(values, dtype=np.float64).ravel()
    out = list(map(repr, array.tolist()))
    for i in np.flatnonzero(~np.isfinite(array)).tolist():
        out[i] = "nan"
    return out


def _fmt(x: float | None, digits: int | None = None) -> str:
    v = _num(x)
    if v is None:
        return "nan" if x is not None else ""
    return f"{v:.{digits}f}" if digits is not None else repr(v)
