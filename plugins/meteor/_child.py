"""METEOR's one-time steps in a child process (``main(["tables"|"aligner", <cache root>])``).

Building the resource tables and compiling the aligner each hold a few hundred MB (the table's
arrays; numba and LLVM) that a scoring process should not keep for the rest of its life: a child
builds into the cache and exits, and the parent memory-maps or imports the result. On a first use
both start at once (two cores), and the table build waits for the compile to end before it holds
more than 140 MB (the compile holds ~300 MB with the C compiler), so the processes together stay
under ~500 MB. Each child inherits stderr, so its one-line announcement and progress bar reach
the user's terminal. A child
that cannot run or fails leaves the cache as it was; the caller then does the step itself (so a
first use never depends on starting a process).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from capmetrics.runtime.allocator import return_freed_memory

STEPS = ("tables", "aligner")
#: The stop events of the preparations running now (see :func:`stoppable`).
_STOPS: list[threading.Event] = []
#: The children started and not yet finished.
_LIVE: set[subprocess.Popen[bytes]] = set()


#: While the aligner compiles beside it (numba, LLVM and the C compiler: ~300 MB), the table
#: build holds at most about this much before it waits for the compile to end, so that all the
#: processes together stay under ~500 MB (measured: 485-495 MB at 160 MB).
TABLES_BESIDE_COMPILE = 140 * 2**20


def lock_path(root: Path) -> Path:
    """The lock a compiling child holds (the table build waits on it before it grows)."""
    return root / "meteor" / ".aligner-compiling.lock"


def start_child(step: str, root: Path) -> subprocess.Popen[bytes] | None:
    """Start ``step`` for the cache root ``root`` in a child Python (None if it cannot start).
    An ``aligner`` child holds :func:`lock_path` while it compiles; this returns once it does."""
    if stopped():
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [p for p in sys.path if p] + [env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    code = f"import sys; from {__name__} import main; sys.exit(main(sys.argv[1:]))"
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", code, step, str(root)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
    except OSError:
        return None
    _LIVE.add(child)
    if step == "aligner" and child.stdout is not None:
        child.stdout.read(1)  # "locked" (or nothing, if the child ended without compiling)
    return child


def finish(child: subprocess.Popen[bytes] | None) -> bool:
    """Wait for a child of :func:`start_child`; whether it succeeded."""
    if child is None:
        return False
    if child.stdout is not None:
        child.stdout.read()
        child.stdout.close()
    code = child.wait()
    _LIVE.discard(child)
    return code == 0


def stopped() -> bool:
    """Whether a preparation running now was told to stop (then no step starts here either)."""
    return any(stop.is_set() for stop in _STOPS)


@contextlib.contextmanager
def stoppable(stop: threading.Event) -> Iterator[None]:
    """For a preparation (``capmetrics.engine.prestart``): while the block runs, once ``stop`` is
    set, every child of this module is terminated and no other starts (a step's folder is written
    atomically: nothing half-built is left), so an interrupted first use ends at once instead of
    after its build. A watcher thread, joined on leaving the block."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(0.1):
                for child in list(_LIVE):
                    with contextlib.suppress(OSError):
                        child.terminate()
                return

    _STOPS.append(stop)
    watcher = threading.Thread(target=watch, name="capmetrics-meteor-stop", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        _STOPS.remove(stop)
        if stop.is_set():  # reap the terminated (finish or the end of the process forgets them)
            for child in list(_LIVE):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(30)


def run_child(step: str, root: Path) -> bool:
    """Run ``step`` for the cache root ``root`` in a child Python; whether it succeeded."""
    return finish(start_child(step, root))


def _resident() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _lock(path: Path, exclusive: bool) -> Any:
    """An open file holding a lock on ``path`` (blocking), or None where locks are not available."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        return handle
    except (ImportError, OSError):
        return None


def wait_beside_compile(root: Path) -> Callable[[], None]:
    """For the table build: a check to call now and then that, once this process holds more than
    :data:`TABLES_BESIDE_COMPILE`, waits for a compiling child to finish (once)."""
    done = False

    def check() -> None:
        nonlocal done
        if not done and _resident() > TABLES_BESIDE_COMPILE:
            done = True
            handle = _lock(lock_path(root), exclusive=False)
            if handle is not None:
                handle.close()

    return check


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in STEPS:
        print(f"usage: main([{'|'.join(STEPS)}, <cache root>])", file=sys.stderr)
        return 2
    step, root = argv[0], Path(argv[1])
    return_freed_memory()
    try:
        if step == "tables":
            from capmetrics.plugins.meteor._resources import build_tables

            build_tables(root, wait_beside_compile(root))
        else:
            from capmetrics.plugins.meteor._compiled import build_or_mark

            held = _lock(lock_path(root), exclusive=True)
            sys.stdout.write("L")  # the parent waits for this before it starts the table build
            sys.stdout.flush()
            quiet = os.open(
                os.devnull, os.O_WRONLY
            )  # nothing more on the pipe: no one reads it yet
            os.dup2(quiet, 1)
            os.close(quiet)
            try:
                build_or_mark(root)
            finally:
                if held is not None:
                    held.close()
    except Exception:  # noqa: BLE001 - the parent does the step itself and reports what stops it
        return 1
    return 0
