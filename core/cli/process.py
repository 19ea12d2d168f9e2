"""What the ``capmetrics`` command does to its own process, and nothing else does.

A library call leaves the process that made it as it found it: the garbage collector, the
signal handlers, the C allocator and interpreter teardown belong to the host program. The
command owns its process, and tunes it here, in one place:

- :func:`tune` (at the start of :func:`capmetrics.cli.main`): the collector is kept off the
  dataset while it is scored and paused while files are parsed
  (:mod:`capmetrics.runtime.collector`), freed heap memory is kept for reuse once statistics run
  here (:mod:`capmetrics.runtime.allocator`), SIGTERM and SIGHUP clean up as Ctrl-C does
  (:mod:`capmetrics.runtime.interrupts`), and warnings are one line on stderr.
- :func:`exit_now` (at the end of :func:`capmetrics.cli.run`, the script): the process ends
  without tearing the interpreter down.

Worker processes that capmetrics starts (:mod:`capmetrics.engine.parallel`) tune themselves: they
are capmetrics' own too.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

from capmetrics import allocator, collector, interrupts


def tune(showwarning: Callable[..., None] | None = None) -> None:
    """Tune this process for the command (see the module's text). ``showwarning``: how the
    command prints warnings (:data:`warnings.showwarning`)."""
    collector.own_process()
    allocator.own_process()
    interrupts.interrupt_on_signals()
    if showwarning is not None:
        warnings.showwarning = showwarning


def exit_now(code: Any) -> NoReturn:
    """End the process with ``code`` without tearing the interpreter down: freeing every object
    of a large run one by one takes 0.1-0.3 s that nobody waits for (what ``mypy`` skips the
    same way). The exit handlers (:mod:`atexit`, which also runs :func:`weakref.finalize`
    callbacks) still run and the standard streams are flushed first; with another thread still
    alive, a code that is not a number, or streams that cannot be flushed, the exit is the
    normal one (``SystemExit``)."""
    if threading.active_count() > 1 or not isinstance(code, (int, type(None))):
        raise SystemExit(code)
    import atexit
    import os

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise SystemExit(code) from None  # the usual exit reports what it can
    os._exit(code or 0)
