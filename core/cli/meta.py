"""``capmetrics meta``: agreement of metrics with human judgments (see
:mod:`capmetrics.analysis.meta`)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from capmetrics.errors import CapmetricsError, SpecError, UnknownComponentError

if TYPE_CHECKING:
    from capmetrics.analysis.meta import Agreement, PairwiseAccuracy
    from capmetrics.data.judgments import Judgments, PairJudgments

DEFAULT_META_METRICS = ("bleu-1", "bleu-4", "meteor", "rouge-l", "cider-d")
COLUMNS = ("pearson", "spearman", "kendall_b", "kendall_c")


def load_judgments_arg(
    judgments: str | None,
    preset: str | None,
    root: Path | None,
    references: Path | None,
    images: Path | None = None,
) -> tuple[Judgments | PairJudgments, str]:
    """Judgments from a preset name or a JSONL file; returns (judgments, primary statistic)."""
    from capmetrics.analysis.meta import PRESETS, load_preset
    from capmetrics.data.judgments import load_judgments

    if (judgments is None) == (preset is None):
        raise SpecError(
            "give either a judgments JSONL file or --preset "
            f"({', '.join(PRESETS)}), not both or neither"
        )
    if preset is not None:
        loaded, p = load_preset(preset, root)
        return loaded, p.primary
    refs = None
    if references is not None:
        from capmetrics.data.loaders import load_dataset

        refs = load_dataset(references)
    from capmetrics.data.clipscore_json import is_polaris_csv, load_polaris_csv

    assert judgments is not None  # the check above: a file when there is no preset
    if is_polaris_csv(judgments):
        return load_polaris_csv(judgments, images), "kendall_c"  # Polos reports tau-c on Polaris
    primary = (
        "kendall_c" if str(judgments).endswith(".json") else "kendall_b"
    )  # CLIPScore's files: tau-c
    return load_judgments(judgments, refs, images), primary


def _table(rows: list[dict[str, object]], primary: str, pairwise: bool) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table()
    if pairwise:
        keys = [k for k in rows[0] if k != "metric"]
    else:
        keys = [*COLUMNS, "mean_score", "human_ceiling_mean", "length_tau_b"]
    table.add_column("metric")
    for k in keys:
        table.add_column(k + (" *" if k == primary else ""), justify="right")
    for row in rows:
        cells = []
        for k in keys:
            v = row.get(k)
            if isinstance(v, float) and k in COLUMNS:
                low, high = row.get(f"{k}_low"), row.get(f"{k}_high")
                ci = ""
                if isinstance(low, float) and isinstance(high, float) and not math.isnan(low):
                    ci = f" [{100 * low:.2f}, {100 * high:.2f}]"
                cells.append(f"{100 * v:.3f}{ci}")
            elif isinstance(v, float):
                cells.append(f"{v:.4f}")
            else:
                cells.append("" if v is None else str(v))
        table.add_row(str(row["metric"]), *cells)
    buf = io.StringIO()
    Console(file=buf, width=200).print(table)
    note = "" if pairwise else "correlations x100 with bootstrap CI; * = the protocol's statistic\n"
    human = rows[0].get("human_length_tau_b") if rows and not pairwise else None
    if isinstance(human, float):  # the length bias: a metric that only rewards length shows it
        note += (
            f"length_tau_b: Kendall tau-b of the metric's score with the caption's length in words "
            f"(the human ratings': {human:.4f})\n"
        )
    return buf.getvalue() + note


def render(rows: list[dict[str, object]], fmt: str, primary: str, pairwise: bool) -> str:
    """Rows as json, csv or a table."""
    if fmt == "json":
        from capmetrics.io.strict_json import dumps

        return dumps(rows) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    return _table(rows, primary, pairwise)


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and say so on stderr."""
    from capmetrics.io.atomic import atomic_write

    with atomic_write(path) as handle:
        handle.write(text)
    typer.echo(f"wrote {path}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``meta`` to the ``capmetrics`` application."""

    @app.command("meta")
    def meta_cli(
        judgments: Annotated[
            str | None,
            typer.Argument(
                help="Judgments JSONL (rated or pairwise), a CLIPScore-format .json "
                "(flickr8k.json) or a Polaris .csv."
            ),
        ] = None,
        preset: Annotated[str | None, typer.Option(help="flickr8k-expert or flickr8k-cf.")] = None,
        root: Annotated[
            Path | None,
            typer.Option(help="Folder of the raw Flickr8k files (or $CAPMETRICS_FLICKR8K)."),
        ] = None,
        references: Annotated[
            Path | None, typer.Option(help="Dataset with the references of records that lack them.")
        ] = None,
        metric: Annotated[
            list[str] | None,
            typer.Option("--metric", "-m", help="Metric spec; repeat for several."),
        ] = None,
        bootstrap: Annotated[
            int, typer.Option(help="Bootstrap resamples over items (0: no intervals).")
        ] = 1000,
        seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
        confidence: Annotated[
            float, typer.Option(help="Confidence level of the intervals.")
        ] = 0.95,
        ceiling: Annotated[
            bool,
            typer.Option("--ceiling/--no-ceiling", help="Add each metric's human-ceiling mean."),
        ] = True,
        fmt: Annotated[str, typer.Option("--format", help="table, json or csv.")] = "table",
        out: Annotated[Path | None, typer.Option(help="Write the result to this file.")] = None,
        lang: Annotated[
            str | None,
            typer.Option(
                "--lang",
                help="The text's language (zh, ja, ko, en): every metric gets its segmenter, "
                "English-only metrics are refused by name and left out of the default set (as in "
                "`capmetrics score`).",
            ),
        ] = None,
        images: Annotated[
            Path | None,
            typer.Option(
                "--images",
                help="Folder of the images (CLIPScore-format .json or Polaris .csv judgments; "
                "clip-score and kin).",
            ),
        ] = None,
    ) -> None:
        """Agreement of metrics with human judgments: Pearson, Spearman, Kendall tau-b/tau-c
        with bootstrap intervals, or pairwise accuracy per category for pairwise judgments."""
        from capmetrics.analysis.meta import agreement, build_metric, pairwise_accuracy
        from capmetrics.cli import EXIT_USAGE, fail
        from capmetrics.data.judgments import PairJudgments

        try:
            if fmt not in ("table", "json", "csv"):
                raise SpecError(f"unknown format {fmt!r}; use table, json or csv")
            from capmetrics.io.atomic import check_output

            check_output(out, (judgments, references))
            if bootstrap < 0:
                raise SpecError(f"--bootstrap must be 0 (no intervals) or more, got {bootstrap}")
            if not 0 < confidence < 1:
                raise SpecError(f"--confidence must lie strictly between 0 and 1, got {confidence}")
            specs = list(metric or DEFAULT_META_METRICS)
            if lang is None:
                built = [build_metric(s) for s in specs]
            else:  # the language's segmenter in every spec (capmetrics.components.language)
                from capmetrics.components.language import (
                    check_language,
                    default_metrics,
                    get_language,
                    localize,
                )

                get_language(lang)
                if not metric:
                    specs, note = default_metrics(DEFAULT_META_METRICS, lang)
                    if note:
                        typer.echo(f"note: {note}", err=True)
                built = [build_metric(localize(s, lang)) for s in specs]
                for spec, component in zip(specs, built):
                    check_language(component, lang, spec)
        except (SpecError, UnknownComponentError) as err:
            fail(err, EXIT_USAGE)
        except CapmetricsError as err:
            fail(err)
        try:
            data, primary = load_judgments_arg(judgments, preset, root, references, images)
            pairwise = isinstance(data, PairJudgments)
            rows = []
            for spec, component in zip(specs, built):
                res: PairwiseAccuracy | Agreement
                if isinstance(data, PairJudgments):
                    res = pairwise_accuracy(component, data)
                    res.metric = spec
                else:
                    res = agreement(
                        component,
                        data,
                        n_boot=bootstrap,
                        seed=seed,
                        confidence=confidence,
                        ceiling=ceiling,
                    )
                    res.metric = spec
                rows.append(res.as_dict())
            text = render(rows, fmt, primary, pairwise)
        except SpecError as err:
            fail(err, EXIT_USAGE)
        except CapmetricsError as err:
            fail(err)
        if out:
            write_output(out, text)
        else:
            typer.echo(text, nl=False)
