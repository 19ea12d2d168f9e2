"""Atomic output: write a file (or fill a folder) under a temporary name next to the target,
then rename, so that no reader ever sees it half-written."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file next to ``path``; on success it replaces ``path`` in one rename,
    on any error it is removed, so an interrupted run never leaves a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        kwargs = {"encoding": encoding, "newline": ""} if "b" not in mode else {}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_folder(folder: str | Path, replace: bool = False) -> Iterator[Path]:
    """A fresh temporary folder next to ``folder``; when the block succeeds it becomes ``folder``
    in one rename (``replace``: an existing ``folder`` is removed first; otherwise, if another
    process published ``folder`` meanwhile, that one is kept). On any error it is removed."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        yield tmp
        if replace:
            shutil.rmtree(folder, ignore_errors=True)
        try:
            tmp.rename(folder)
        except OSError:  # another process published the same folder meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
