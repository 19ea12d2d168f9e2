"""Output files that never clobber what they did not create.

* A regular file (or a new path) is written under a temporary name next to it and renamed over
  it in one step, so no reader ever sees it half-written and a failed write keeps the old file.
  A symlink to a regular file replaces the file it points to; the link stays.
* Anything else that exists at the path (a FIFO, a terminal, ``/dev/null``, a device) and any
  path under ``/dev`` (``/dev/stdout`` may be a file the shell opened) is written *into*,
  never replaced; ``-`` is standard output.
* The new file gets the usual permissions: the replaced file's mode, else ``0666 & ~umask``
  (the temporary file is ``0600`` until then, so it is never more open than the result).
* Temporary names carry the writer's process id; a temporary file or folder of ours whose
  process is gone (killed by SIGKILL, a power cut) is removed by the next write next to it.
* Any OS failure (full disk, read-only folder, a directory at the path) is an
  :class:`~capmetrics.errors.OutputError` naming the path and the OS's reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from capmetrics.errors import OutputError, SpecError

STDOUT = "-"
#: ``.<name>.<pid>.<random>.tmp``: the temporary names this module creates.
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp$")


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """A handle to write ``path`` through (see the module docstring for what happens to each
    kind of path). On any error a temporary file is removed and the old file kept.

    Raises:
        OutputError: the path cannot be written; the message names it and the OS's reason.
    """
    text_kwargs: dict[str, Any] = {"encoding": encoding, "newline": ""} if "b" not in mode else {}
    if str(path) == STDOUT:
        sys.stdout.flush()
        with _os_errors(Path("<stdout>")):
            yield sys.stdout.buffer if "b" in mode else sys.stdout
            sys.stdout.flush()
        return
    path = Path(path)
    target = _existing_target(path)
    if target is not None and (not stat.S_ISREG(target.st_mode) or _is_device_path(path)):
        fd = _descriptor(path)
        with _os_errors(path):
            if fd is not None:  # the open descriptor itself: reopening would truncate a ">>" file
                sys.stdout.flush()
                sys.stderr.flush()
                handle = os.fdopen(os.dup(fd), mode.replace("x", "w"), **text_kwargs)
            else:
                handle = open(path, mode.replace("x", "w"), **text_kwargs)  # noqa: SIM115 - written into
        with _os_errors(path), handle:
            yield handle
        return
    real = Path(os.path.realpath(path))  # a link to a regular file: replace the file, keep the link
    with _os_errors(path):
        real.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(real.parent, real.name)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{real.name}.{os.getpid()}.", suffix=".tmp", dir=real.parent
        )
    try:
        with _os_errors(path):
            handle = os.fdopen(fd, mode, **text_kwargs)
        with _os_errors(path), handle:
            yield handle
            handle.flush()
            os.fchmod(handle.fileno(), stat.S_IMODE(target.st_mode) if target else 0o666 & ~umask())
            os.fsync(handle.fileno())
        with _os_errors(path):
            os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_folder(folder: str | Path, replace: bool = False) -> Iterator[Path]:
    """A fresh temporary folder next to ``folder``; when the block succeeds it becomes ``folder``
    in one rename (``replace``: an existing ``folder`` is removed first; otherwise, if another
    process published ``folder`` meanwhile, that one is kept). On any error it is removed."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(folder.parent, folder.name)
    tmp = Path(
        tempfile.mkdtemp(prefix=f".{folder.name}.{os.getpid()}.", suffix=".tmp", dir=folder.parent)
    )
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


def check_output(
    path: str | Path | None, inputs: Iterable[str | Path | None] = (), option: str = "--out"
) -> None:
    """Refuse, before any work, an output path that cannot be written or that is one of the
    run's ``inputs`` (the same file by any name: links, ``..``, relative paths).

    Raises:
        SpecError: the output is an input of the run (``option`` names it in the message).
        OutputError: the output is a directory or its folder is not a folder.
    """
    if path is None or str(path) == STDOUT:
        return
    path = Path(path)
    for source in inputs:
        if source is not None and str(source) != STDOUT and _same_file(path, Path(source)):
            raise SpecError(
                f"{option} {path} is an input of this run ({source}); "
                "write the output to another file"
            )
    if path.is_dir():
        raise OutputError(f"cannot write {path}: {os.strerror(errno.EISDIR)}")
    parent = Path(os.path.realpath(path)).parent
    for folder in (parent, *parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise OutputError(f"cannot write {path}: {os.strerror(errno.ENOTDIR)} ({folder})")
            break


def remove_stale_temporaries(folder: str | Path, name: str | None = None) -> list[Path]:
    """Remove the temporary files and folders this module left in ``folder`` (for the target
    ``name``, or any) whose writing process no longer runs; return what was removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            match = _TEMP_RE.match(entry.name)
            if (
                not match
                or (name is not None and match["name"] != name)
                or _alive(int(match["pid"]))
            ):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def umask() -> int:
    """The process's umask (read from /proc where it can be, so no thread sees it changed)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii") as status:
            return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _existing_target(path: Path) -> os.stat_result | None:
    """``stat`` of what ``path`` names (following links), or None when nothing is there."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise OutputError(f"cannot write {path}: {err.strerror}") from err


def _is_device_path(path: Path) -> bool:
    """A path under ``/dev`` or an open descriptor's ``/proc/<pid>/fd/N``: ``/dev/stdout`` may be a
    regular file the shell opened (``> out.txt``, ``>> log``), to be written into as the shell
    meant."""
    text = os.path.abspath(path)
    return text.startswith("/dev/") or (text.startswith("/proc/") and "/fd/" in text)


def _descriptor(path: Path) -> int | None:
    """The descriptor number of ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or
    ``/proc/self/fd/N``, or None."""
    text = os.path.abspath(path)
    named = {"/dev/stdout": 1, "/dev/stderr": 2}.get(text)
    if named is not None:
        return named
    match = re.fullmatch(rf"/dev/fd/(\d+)|/proc/(?:self|{os.getpid()})/fd/(\d+)", text)
    return int(match[1] or match[2]) if match else None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet): compare the resolved paths
        return os.path.realpath(a) == os.path.realpath(b)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


@contextlib.contextmanager
def _os_errors(path: Path) -> Iterator[None]:
    """An OSError while writing ``path`` as an :class:`OutputError` with the OS's reason."""
    try:
        yield
    except OutputError:
        raise
    except OSError as err:
        reason = err.strerror or str(err)
        raise OutputError(f"cannot write {path}: {reason}") from err
