"""Pre-gen metrics (Tanti, Gatt & Muscat 2018): predict caption-quality metrics from a model's
probabilities of the reference captions, without generating captions.

Registers the ``pregen`` reduction, the probability sources (``prob-file``, ``torch-model``,
``hf-causal-lm``) and the ``capmetrics pregen`` command group. Tiers live in
:mod:`capmetrics.plugins.pregen.tiers`; third-party tiers are added with :func:`register_tier`.
"""

# No `from __future__ import annotations`: typer reads the CLI annotations at run time.

from collections.abc import Callable
from pathlib import Path
from typing import Any

from capmetrics import hookimpl
from capmetrics.plugins.pregen.compute import Pregen, RaggedProbs, evaluate
from capmetrics.plugins.pregen.tiers import (
    Composition,
    SentenceScore,
    TokenFilter,
    all_compositions,
    paper_compositions,
    parse_composition,
    register_tier,
)

__all__ = [
    "Composition",
    "Pregen",
    "RaggedProbs",
    "SentenceScore",
    "TokenFilter",
    "all_compositions",
    "evaluate",
    "paper_compositions",
    "parse_composition",
    "register_tier",
]


@hookimpl
def register_pregen_metrics(register: Callable[..., None]) -> None:
    register(Pregen, aliases=("pre-gen",))


@hookimpl
def register_probability_sources(register: Callable[..., None]) -> None:
    from capmetrics.plugins.pregen.sources import all_sources

    for cls in all_sources():
        register(cls)


@hookimpl
def register_commands(app: Any) -> None:
    if not any(getattr(g, "name", None) == "pregen" for g in app.registered_groups):
        app.add_typer(build_cli(), name="pregen")


def _compositions(metrics: list[str] | None, every: bool) -> list[Composition]:
    if metrics:
        return [parse_composition(m) for m in metrics]
    return all_compositions() if every else paper_compositions()


def _load_probs(
    probs_file: Path | None, source: str | None, data: Path | None, references: str
) -> RaggedProbs:
    from capmetrics.errors import SpecError
    from capmetrics.plugins.pregen.sources import read_probs

    if (probs_file is None) == (source is None):
        raise SpecError("give either a probability file or --source with --data")
    if probs_file is not None:
        probs = read_probs(probs_file)
    else:
        if data is None:
            raise SpecError("--source needs --data (the dataset whose references are scored)")
        from capmetrics.data.loaders import load_dataset
        from capmetrics.registry.compose import compose

        probs = compose(source, "probability-source").probabilities(load_dataset(data))  # type: ignore[attr-defined]
    return probs.with_reference_policy(references)  # type: ignore[arg-type]


def build_cli() -> Any:
    """The ``capmetrics pregen`` command group."""
    from typing import Annotated

    import typer
    from capmetrics.cli import fail
    from capmetrics.errors import CapmetricsError

    cli = typer.Typer(
        help="Pre-gen metrics: predict caption metrics from reference probabilities.",
        no_args_is_help=True,
    )

    @cli.command("score")
    def score_cmd(
        probs_file: Annotated[
            Path | None, typer.Argument(help="Probabilities: .jsonl, .npz or nested .json.")
        ] = None,
        metric: Annotated[
            list[str] | None,
            typer.Option(
                "--metric",
                "-m",
                help=(
                    "Composition, e.g. mean_max_normcount_prefix0; repeat. Default: the paper's "
                    "504."
                ),
            ),
        ] = None,
        every: Annotated[
            bool,
            typer.Option("--all", help="Every composition of the known tiers (672 with nonmax)."),
        ] = False,
        source: Annotated[
            str | None,
            typer.Option(help="Probability source spec instead of a file, e.g. 'hf-causal-lm'."),
        ] = None,
        data: Annotated[
            Path | None, typer.Option(help="Dataset whose references --source scores.")
        ] = None,
        save_probs: Annotated[
            Path | None, typer.Option(help="Also write the probabilities (.npz or .jsonl).")
        ] = None,
        references: Annotated[
            str, typer.Option(help="Unequal reference counts: allow, error or truncate.")
        ] = "allow",
        out: Annotated[
            Path | None, typer.Option(help="Write name/value rows (.tsv, .csv or .jsonl).")
        ] = None,
    ) -> None:
        """Compute pre-gen metrics from probabilities."""
        from capmetrics.plugins.pregen.search import write_rows
        from capmetrics.plugins.pregen.sources import write_probs

        try:
            from capmetrics.io.atomic import check_output

            check_output(out, (probs_file, data))
            comps = _compositions(metric, every)
            probs = _load_probs(probs_file, source, data, references)
            if save_probs:
                write_probs(probs, save_probs)
            values = evaluate(probs, comps)
        except CapmetricsError as err:
            fail(err)
        rows = [{"metric": c.name, "value": float(v)} for c, v in zip(comps, values)]
        if out:
            write_rows(rows, out)
        else:
            typer.echo("metric\tvalue")
            for row in rows:
                typer.echo(f"{row['metric']}\t{row['value']!r}")

    @cli.command("search")
    def search_cmd(
        rows_file: Annotated[
            Path,
            typer.Argument(help="Rows (.csv, .tsv, .jsonl): label, post-gen and pre-gen columns."),
        ],
        post: Annotated[
            list[str] | None,
            typer.Option(
                "--post",
                "-p",
                help="Post-gen column; repeat. Default: every numeric non-pre-gen column.",
            ),
        ] = None,
        group: Annotated[
            str | None, typer.Option(help="Column whose groups must each be usable (e.g. dataset).")
        ] = None,
        colour: Annotated[
            str | None,
            typer.Option("--colour", help="Column that colours the plot (default: --group)."),
        ] = None,
        top: Annotated[
            int, typer.Option(help="Rows of the ranked table shown per post-gen metric.")
        ] = 10,
        out: Annotated[
            Path | None, typer.Option(help="Write the full ranking (.tsv, .csv or .jsonl).")
        ] = None,
        plot: Annotated[
            Path | None,
            typer.Option(help="Write the best composition vs each post-gen metric (.png)."),
        ] = None,
    ) -> None:
        """Rank compositions by R² against post-gen metrics; list the dropped ones."""
        from capmetrics.errors import DataError
        from capmetrics.plugins.pregen.search import (
            plot_best,
            read_rows,
            search,
            split_columns,
            write_rows,
        )

        try:
            columns = read_rows(rows_file)
            for name in filter(None, (group, colour)):
                if name not in columns:
                    raise DataError([f"no column {name!r}"], "pre-gen search")
            pre_names, post_names, _ = split_columns(columns, post or ())
            pre = {n: columns[n] for n in pre_names}
            posts = {n: columns[n] for n in post_names}
            result = search(pre, posts, columns[group] if group else None)
        except CapmetricsError as err:
            fail(err)
        for name, ranking in result.rankings.items():
            typer.echo(f"# {name}: {len(ranking.names)} compositions ranked, {ranking.n} rows")
            typer.echo("rank\tcomposition\tR\tR2\tp")
            for row in ranking.rows(top):
                typer.echo(
                    f"{row['rank']}\t{row['composition']}\t{row['r']:.5f}\t{row['r2']:.5f}\t{row['p_value']:.3g}"
                )
        typer.echo(f"# dropped: {len(result.dropped)}")
        for name, reason in result.dropped.items():
            typer.echo(f"{name}\t{reason}")
        if out:
            write_rows([r for ranking in result.rankings.values() for r in ranking.rows()], out)
        if plot:
            by = colour or group
            plot_best(result, pre, posts, plot, columns[by] if by else None)
            typer.echo(f"# plot: {plot}")

    @cli.command("names")
    def names_cmd(
        every: Annotated[
            bool, typer.Option("--all", help="Include extra tiers (nonmax, plugins).")
        ] = False,
    ) -> None:
        """List composition names in the released code's order."""
        for c in _compositions(None, every):
            typer.echo(c.name)

    return cli
