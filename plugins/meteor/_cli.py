"""``capmetrics setup meteor``: build (or check) what the native ``meteor`` needs, ahead of its
first use: the resource cache and the compiled aligner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from capmetrics.errors import CapmetricsError


def setup_meteor(
    check_only: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Only report what is in place (reading what a run reads); build nothing.",
        ),
    ] = False,
) -> None:
    """METEOR: build the resource cache (from the jar and paraphrase table pycocoevalcap installs,
    5-15 s) and compile the aligner (numba.pycc, 5-20 s), which the first use would otherwise do;
    each step is announced on stderr with a progress bar on a terminal. Idempotent. ``--check``
    reads what a run reads (the jar's word list, every cache manifest and array checksum, the
    compiled aligner or numba) and says ready only when a run would use them as they are."""
    from capmetrics.plugins.meteor._compiled import describe
    from capmetrics.plugins.meteor._resources import (
        cache_root,
        load_resources,
        meteor_files,
        resource_key,
    )

    root = cache_root()
    if check_only:
        lines, ready = check_lines(root)
    else:
        lines, ready = [], True
        try:
            jar, table = meteor_files()
            lines.append(f"METEOR 1.5 jar and paraphrase table: {jar}, {table}")
            load_resources()
            lines.append(f"resource cache: {root / 'meteor' / resource_key()}")
        except CapmetricsError as err:
            lines.append(f"missing: {err}")
            ready = False
        lines.append(f"aligner: {describe(root)}")
    lines.append("meteor is ready" if ready else "meteor is not ready")
    for line in lines:
        typer.echo(line)
    if not ready:
        raise typer.Exit(1)


def check_lines(root: Path) -> tuple[list[str], bool]:
    """What ``setup meteor --check`` reports, and whether a run would find everything in order:
    the same reads a run's start makes (the jar and table found, the jar's function words read,
    each cache part's manifest parsed and every array checked against its checksum, the compiled
    aligner loaded or else numba imported), changing nothing (a damaged part is not moved aside)."""
    from capmetrics.plugins.meteor._resources import PARTS, _jar_text, meteor_files, resource_key
    from capmetrics.plugins.meteor._tables import CorruptFolder, check_folder

    lines: list[str] = []
    try:
        jar, table = meteor_files()
        lines.append(f"METEOR 1.5 jar and paraphrase table: {jar}, {table}")
        _jar_text(jar, "function/english.words")  # read at every start
        folder = root / "meteor" / resource_key()
    except CapmetricsError as err:
        return [*lines, f"missing: {err}"], False
    ready = True
    for part, names in PARTS.items():
        try:
            check_folder(folder / part, names)
        except FileNotFoundError:
            lines.append(
                f"missing: the resource cache ({folder / part}); run `capmetrics setup meteor`"
            )
            ready = False
        except (OSError, CorruptFolder) as err:
            lines.append(
                f"damaged: the resource cache {folder / part} ({err}); a run would rebuild it: "
                "run `capmetrics setup meteor`"
            )
            ready = False
    if ready:
        lines.append(f"resource cache: {folder} (manifests and checksums verified)")
    aligner, ok = _aligner_line(root)
    lines.append(aligner)
    return lines, ready and ok


def _aligner_line(root: Path) -> tuple[str, bool]:
    """The aligner a run would use, checked as the run loads it."""
    import os

    from capmetrics.plugins.meteor._compiled import _failed, _try_load, module_folder

    module = module_folder(root)
    if module.is_dir() and os.environ.get("CAPMETRICS_METEOR_AOT", "1") != "0":
        if _try_load(module) is not None:
            return f"aligner: compiled module in {module} (loads; checksum verified)", True
        return (
            f"damaged: the compiled aligner in {module} does not load or fails its checksum; a run "
            "would compile it again: run `capmetrics setup meteor`"
        ), False
    try:
        import numba  # noqa: F401 - what a run without the compiled module imports
    except ImportError as err:
        how = f"plain Python (numba does not import: {err}; slow: pip install 'capmetrics[coco]')"
    except Exception as err:  # noqa: BLE001 - a broken numba makes the run fail: report it
        return (
            f"broken: numba does not import ({type(err).__name__}: {err}); a run would fail: "
            "pip install --force-reinstall 'capmetrics[coco]'"
        ), False
    else:
        how = "numba's JIT"
    if module.is_dir() or _failed(module).is_file():
        return f"aligner: {how} (the compiled module is off or could not be built)", True
    return (
        f"aligner: not compiled yet ({module}); the first use (or `capmetrics setup meteor`) "
        f"builds it; until then {how}"
    ), True


def add_setup_command(app: Any) -> None:
    """Add ``meteor`` to the ``capmetrics setup`` group."""
    from capmetrics.cli.setup import command_names, setup_group

    group = setup_group(app)
    if "meteor" not in command_names(group):
        group.command("meteor")(setup_meteor)
