"""SIGTERM and SIGHUP take the path Ctrl-C takes.

Python turns SIGINT into :class:`KeyboardInterrupt`, so every ``with`` block and ``finally`` on
the way out runs: child JVMs are killed and reaped, worker pools shut down, temporary files and
folders removed. SIGTERM (``kill``, ``timeout``, a CI runner, systemd) and SIGHUP (a closed
terminal) would end the process on the spot and leave all of that behind.
:func:`interrupt_on_signals` makes them raise :class:`Terminated`, a ``KeyboardInterrupt``, in
the main process, so they clean up exactly as Ctrl-C does; the ``capmetrics`` command installs it
(:mod:`capmetrics.cli.process`, its own process only: a library call never touches a host's
signal handlers) and then exits with ``128 + signal number`` (143 for SIGTERM), as a shell
reports a killed job.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

#: The signals that :func:`interrupt_on_signals` turns into :class:`Terminated`.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM or SIGHUP (``signum``); handled as Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"received {signal.Signals(signum).name}")


_received: list[int] = []


def received() -> int | None:
    """The first signal :func:`interrupt_on_signals` turned into :class:`Terminated`, or None."""
    return _received[0] if _received else None


def interrupt_on_signals() -> None:
    """Make SIGTERM and SIGHUP raise :class:`Terminated` in this (the main) process.

    Only the first one raises; later ones are ignored, so the clean-up it starts can finish.
    A process forked from this one (a worker) that receives them ends as it would have
    without this handler. Does nothing outside the main thread (Python allows signal
    handlers only there)."""
    if threading.current_thread() is not threading.main_thread():
        return
    owner = os.getpid()

    def handler(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a forked worker: the default action, as before
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if _received:
            return
        _received.append(signum)
        raise Terminated(signum)

    for signum in SIGNALS:
        signal.signal(signum, handler)
