"""``capmetrics setup meteor``: build (or check) what the native ``meteor`` needs, ahead of its
first use: the resource cache and the compiled aligner."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from capmetrics.errors import CapmetricsError


def setup_meteor(
    check_only: Annotated[bool, typer.Option(
        "--check", help="Only report what is in place; build nothing.")] = False,
) -> None:
    """METEOR: build the resource cache (from the jar and paraphrase table pycocoevalcap installs,
    10-30 s) and compile the aligner (numba.pycc, 5-20 s), which the first use would otherwise do;
    each step is announced on stderr with a progress bar on a terminal. Idempotent."""
    from capmetrics.plugins.meteor._compiled import describe, module_folder
    from capmetrics.plugins.meteor._resources import cache_root, load_resources, meteor_files, resource_key

    root = cache_root()
    lines, ready = [], True
    try:
        jar, table = meteor_files()
        lines.append(f"METEOR 1.5 jar and paraphrase table: {jar}, {table}")
        resources = root / "meteor" / resource_key()
        if check_only:
            built = resources.is_dir()
            ready &= built
            lines.append(f"resource cache: {resources}" if built else
                         f"missing: the resource cache ({resources}); run `capmetrics setup meteor`")
        else:
            load_resources()
            lines.append(f"resource cache: {resources}")
    except CapmetricsError as err:
        lines.append(f"missing: {err}")
        ready = False
    module = module_folder(root)
    if check_only:
        lines.append(f"aligner: compiled module in {module}" if module.is_dir() else
                     f"aligner: not compiled yet ({module}); the first use (or `capmetrics setup meteor`) builds it")
    else:
        lines.append(f"aligner: {describe(root)}")
    lines.append("meteor is ready" if ready else "meteor is not ready")
    for line in lines:
        typer.echo(line)
    if not ready:
        raise typer.Exit(1)


def add_setup_command(app: Any) -> None:
    """Add ``meteor`` to the ``capmetrics setup`` group."""
    from capmetrics.cli.setup import command_names, setup_group

    group = setup_group(app)
    if "meteor" not in command_names(group):
        group.command("meteor")(setup_meteor)
