"""``capmetrics doctor``: what this installation can run, in one table: versions, the torch
device, Java, the cache folder, the optional extras, and every ``capmetrics setup <name>
--check`` that plugins add (jars, resource caches, compiled code)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

#: Distributions whose versions the doctor reports (when installed).
VERSIONS = (
    "numpy",
    "scipy",
    "torch",
    "transformers",
    "sentence-transformers",
    "pycocoevalcap",
    "numba",
    "dask",
    "rich",
    "typer",
)

Row = tuple[str, str, str]  # what, status ("ok", "missing", "info"), details


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def version_rows() -> list[Row]:
    """Python, capmetrics and the libraries it runs on."""
    rows: list[Row] = [
        ("python", "info", f"{platform.python_version()} ({sys.executable})"),
        ("capmetrics", "info", _version("capmetrics") or "not installed (a source tree)"),
    ]
    for dist in VERSIONS:
        found = _version(dist)
        if found:
            rows.append((dist, "info", found))
    return rows


def device_row() -> Row:
    """Where embedders run by default (``--device auto``)."""
    from capmetrics.runtime.device import cuda_report

    if _version("torch") is None:
        return ("torch device", "info", "torch is not installed (pip install 'capmetrics[torch]')")
    from capmetrics.runtime.device import resolve_device

    try:
        device = resolve_device("auto")
    except Exception as err:  # noqa: BLE001 - a broken torch install is what the doctor reports
        return ("torch device", "missing", f"{type(err).__name__}: {err}")
    return ("torch device", "ok", f"{device}: {cuda_report()}")


def java_row() -> Row:
    """The Java runtime (SPICE, the METEOR and PTB jars)."""
    java = shutil.which("java")
    if java is None:
        return (
            "java",
            "missing",
            "no `java` on PATH (SPICE and the jar-based references need Java 8+)",
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
        found = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    except (OSError, subprocess.SubprocessError) as err:
        return ("java", "missing", f"{java} does not run: {err}")
    return ("java", "ok", f"{java} ({found.group(1) if found else 'version unknown'})")


def _size(folder: Any) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def cache_rows() -> list[Row]:
    """The cache root (``$CAPMETRICS_CACHE_DIR``, else the XDG cache folder) and its parts."""
    from capmetrics.io.cache import CACHE_ENV, cache_root

    root = cache_root()
    how = (
        f"${CACHE_ENV}"
        if os.environ.get(CACHE_ENV)
        else "default; set $" + CACHE_ENV + " to move it"
    )
    if not root.is_dir():
        return [("cache", "info", f"{root} ({how}; nothing cached yet)")]
    rows: list[Row] = [("cache", "ok", f"{root} ({how})")]
    for part in sorted(p for p in root.iterdir() if p.is_dir()):
        rows.append((f"cache: {part.name}", "info", f"{_size(part) / 2**20:,.1f} MiB"))
    return rows


def extra_rows(only: Sequence[str] | None = None) -> list[Row]:
    """Each optional extra of capmetrics (or those in ``only``): ready only when every one of its
    distributions is installed and its modules import (the import a run makes), else what is
    missing or broken and the command that fixes it."""
    from capmetrics.cli.setup import extra_problems, missing_distributions

    try:
        extras = importlib.metadata.metadata("capmetrics").get_all("Provides-Extra") or []
    except importlib.metadata.PackageNotFoundError:
        return [("extras", "info", "capmetrics is not installed: no extras to check")]
    extras = [e for e in extras if only is None or e in only]
    rows: list[Row] = []
    for extra in extras:
        if extra in ("all", "test"):
            continue
        missing = missing_distributions(extra)
        if missing:
            rows.append(
                (
                    f"extra: {extra}",
                    "missing",
                    f"pip install 'capmetrics[{extra}]' (missing {', '.join(missing)})",
                )
            )
            continue
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            broken = extra_problems(extra, smoke=True, essential=False)
        rows.append(
            (
                f"extra: {extra}",
                "missing" if broken else "ok",
                f"pip install --force-reinstall 'capmetrics[{extra}]' ({'; '.join(broken)})"
                if broken
                else "installed (imports)",
            )
        )
    return rows


def setup_rows(commands: dict[str, Any]) -> list[Row]:
    """``capmetrics setup <name> --check`` of every set-up step plugins add: its verdict and
    what it reports (jars, resource caches, compiled code)."""
    rows: list[Row] = []
    for name, callback in sorted(commands.items()):
        out = io.StringIO()
        ok = True
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                callback(check_only=True)
        except typer.Exit as done:
            ok = not done.exit_code
        except TypeError:  # a set-up command without --check
            rows.append(
                (f"setup {name}", "info", f"run `capmetrics setup {name}` (no --check to report)")
            )
            continue
        except Exception as err:  # noqa: BLE001 - the doctor reports, it does not fail
            ok = False
            out.write(f"{type(err).__name__}: {err}")
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        details = "; ".join(lines) if lines else ""
        if not ok:
            details = f"run `capmetrics setup {name}`: {details}"
        rows.append((f"setup {name}", "ok" if ok else "missing", details))
    return rows


def doctor_rows(commands: dict[str, Any]) -> list[Row]:
    """Every row of the doctor's table."""
    sections: list[Callable[[], list[Row]]] = [
        version_rows,
        lambda: [device_row(), java_row()],
        cache_rows,
        extra_rows,
        lambda: setup_rows(commands),
    ]
    return [row for section in sections for row in section()]


def doctor_cli(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when a set-up step is not ready.")
    ] = False,
) -> None:
    """Check this installation in one table: versions, torch device, Java, the cache folder, the
    optional extras and every set-up step (jars, resource caches)."""
    from capmetrics.cli import get_app
    from capmetrics.cli.setup import setup_commands

    rows = doctor_rows(setup_commands(get_app()))
    if as_json:
        from capmetrics.io.strict_json import dumps

        typer.echo(dumps([{"what": w, "status": s, "details": d} for w, s, d in rows]))
    else:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table()
        table.add_column("what", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("details", overflow="fold", ratio=1)
        for what, status, details in rows:
            table.add_row(
                *(Text(cell) for cell in (what, status, details))
            )  # brackets are not markup
        Console(highlight=False, emoji=False).print(table)
    if strict and any(
        status == "missing" and what.startswith("setup ") for what, status, _ in rows
    ):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to the root ``capmetrics`` app."""
    app.command("doctor")(doctor_cli)
