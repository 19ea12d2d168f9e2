"""Running pycocoevalcap's original ``spice-1.0.jar`` scorer on today's Java and reading its output.

``spice`` itself runs only the jar's parser (``_parse``); the scorer is the reference that the
tests, ``benchmarks/bench_spice.py`` and the pycocoevalcap comparisons run it against.

The command is the jar's main class with ``spice-1.0.jar``, the CoreNLP 3.6.0 jars, the rest of
pycocoevalcap's ``spice/lib`` and (Java 15+) a JavaScript engine on the class path, the
``--add-opens`` its serialisation needs on Java 9+, ``-subset`` for the category scores and the
parse cache (``-cache``, x86-64 only: lmdbjni has no other native library) in the user cache
folder. Input and output files live in a temporary folder, never in site-packages.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.errors import MetricError
from capmetrics.plugins.java import LOCALE_OPTIONS, java_env
from capmetrics.plugins.spice._graph import CATEGORIES, FIELDS
from capmetrics.plugins.spice._resources import (
    cache_root,
    java_options,
    private_folder,
    runtime_jars,
    spice_dir,
)

MAIN_CLASS = "edu.anu.spice.SpiceScorer"


def parse_cache_dir() -> Path:
    """The jar's own parse cache (an LMDB folder; ``-cache``)."""
    return cache_root() / "parses"


def parse_cache_supported() -> bool:
    """The jar's parse cache uses lmdbjni, whose native libraries are x86-64 only (Linux, macOS,
    Windows)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def classpath(corenlp_jars: Sequence[Path], extra_jars: Sequence[Path]) -> str:
    """spice-1.0.jar, the CoreNLP jars, every other jar of pycocoevalcap's spice/lib, then
    ``extra_jars``."""
    folder = spice_dir()
    names = {p.name for p in corenlp_jars}
    jars = [folder / "spice-1.0.jar", *corenlp_jars]
    jars += [p for p in sorted((folder / "lib").glob("*.jar")) if p.name not in names]
    return os.pathsep.join(map(str, [*jars, *extra_jars]))


def command(
    java: str,
    corenlp_jars: Sequence[Path],
    memory: str,
    input_file: str,
    output_file: str,
    threads: int | None = None,
) -> list[str]:
    """The java command line that scores ``input_file`` into ``output_file``."""
    cp = classpath(corenlp_jars, runtime_jars(java))
    cache = ["-cache", str(parse_cache_dir())] if parse_cache_supported() else []
    tail = ["-threads", str(threads)] if threads else []
    return [
        java,
        f"-Xmx{memory}",
        *java_options(java),
        *LOCALE_OPTIONS,
        "-cp",
        cp,
        MAIN_CLASS,
        input_file,
        *cache,
        "-out",
        output_file,
        "-subset",
        "-silent",
        *tail,
    ]


def run_jar(
    cmd_for: Any, items: list[dict[str, Any]], timeout: float, retries: int = 1
) -> list[dict[str, Any]]:
    """Run the jar on ``items`` (``image_id``/``test``/``refs``); ``cmd_for(in, out)`` builds the
    command.

    A JVM killed by a signal (e.g. the out-of-memory killer) is started again, up to ``retries``
    times; any other failure is reported at once with the end of the jar's error output.
    """
    private_folder(parse_cache_dir())
    with tempfile.TemporaryDirectory(prefix="capmetrics-spice-") as tmp:
        in_file, out_file = Path(tmp) / "input.json", Path(tmp) / "output.json"
        in_file.write_text(json.dumps(items), encoding="utf-8")
        cmd = cmd_for(str(in_file), str(out_file))
        for attempt in range(retries + 1):
            try:
                done = subprocess.run(
                    cmd, cwd=tmp, env=java_env(), capture_output=True, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired:
                raise MetricError(f"spice: the jar did not finish within {timeout:g} s") from None
            except OSError as err:
                raise MetricError(f"spice: cannot start {cmd[0]}: {err}") from None
            if done.returncode == 0 and out_file.is_file():
                return json.loads(out_file.read_text(encoding="utf-8"))
            if done.returncode >= 0 or attempt == retries:
                break
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-8:]
        raise MetricError(
            f"spice: the jar failed (exit code {done.returncode}, {len(items)} items, "
            f"{attempt + 1} attempt(s)): " + " | ".join(tail)
        )


def scores_by_id(results: list[dict[str, Any]], n_items: int) -> list[dict[str, Any]]:
    """The jar's ``scores`` object of every item, in item order; names items the jar left out."""
    by_id = {int(entry["image_id"]): entry["scores"] for entry in results}
    missing = sorted(set(range(n_items)) - set(by_id))
    if missing:
        raise MetricError(f"spice: the jar returned no scores for item(s) {missing[:10]}")
    return [by_id[i] for i in range(n_items)]


def number(value: Any) -> float:
    """A JSON number of the jar's output as a float (``null``/``"NaN"`` -> NaN), as coco-caption
    converts it."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def to_row(scores: dict[str, Any]) -> np.ndarray:
    """One item's ``scores`` object as a vector: ``FIELDS`` of each of ``CATEGORIES``, in order."""
    return np.array(
        [number(scores.get(c, {}).get(f)) for c in CATEGORIES for f in FIELDS], dtype=float
    )


def details_arrays(rows: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """``{category: {field: per-item array}}`` (coco-caption's ``imgToEval``) from stacked
    :func:`to_row` vectors."""
    table = np.asarray(rows, dtype=float).reshape(-1, len(CATEGORIES), len(FIELDS))
    return {
        c: {f: table[:, i, j].copy() for j, f in enumerate(FIELDS)}
        for i, c in enumerate(CATEGORIES)
    }
