"""One-line notices for one-time steps (a resource cache built on first use, a compile, a set-up),
so that a first run says what it is doing instead of sitting silent.

>>> with one_time_step("building the METEOR resource cache",
...                    "about 20 s") as advance:  # doctest: +SKIP
...     for chunk in chunks:
...         advance(len(chunk))

On stderr it prints ``capmetrics: building the METEOR resource cache (once; usually about 20 s)...``
and, when done, ``capmetrics: ... done in 12.3 s``, above a run's progress bar when one is live
(:func:`capmetrics.engine.progress.message`). On a terminal, and when ``total`` is given, a
progress bar shows the advance: the run's own bar when one is up (never a second one beside it).
``CAPMETRICS_QUIET=1`` silences it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

QUIET_ENV = "CAPMETRICS_QUIET"


def _quiet() -> bool:
    return os.environ.get(QUIET_ENV, "") not in ("", "0")


def _no_progress(n: int = 1) -> None:
    """``advance(n)`` where nobody shows progress."""


@contextmanager
def one_time_step(
    what: str, usual: str, total: int | None = None, unit: str = ""
) -> Iterator[Callable[[int], None]]:
    """Announce a one-time step; yields ``advance(n)`` for its progress (a no-op off a terminal).

    Args:
        what: what happens, in words ("compiling METEOR's aligner").
        usual: how long it usually takes ("about a minute").
        total: units of work, for a progress bar on a terminal; none = no bar.
        unit: the unit's name shown beside the bar ("lines", "captions").
    """
    if _quiet():
        yield _no_progress
        return
    from capmetrics.engine.progress import bar_is_live, listening, message, work

    stream = sys.stderr
    message(f"capmetrics: {what} (once; usually {usual})...")  # above a run's bar, if one is up
    start = time.perf_counter()
    bar = None
    if total and stream.isatty() and not bar_is_live():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        bar = Progress(
            TextColumn("  "),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn(unit),
            TimeRemainingColumn(),
            console=Console(file=stream),
            transient=True,
        )
    if total and listening():  # a run's progress bar is up: it shows this step (one bar per run)
        with work(total, unit or "steps") as advance:
            yield advance
    elif bar is None:  # no terminal, no total, or a run's bar is up in another thread: one bar only
        yield _no_progress
    else:
        with bar:
            task = bar.add_task(what, total=total)

            def advance_bar(n: int = 1) -> None:
                bar.update(task, advance=n)

            yield advance_bar
    message(f"capmetrics: {what}: done in {time.perf_counter() - start:.1f} s")
