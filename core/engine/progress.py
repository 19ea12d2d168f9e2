"""Progress of a run, counted in work (items scored, sentences embedded, captions parsed)
rather than in metrics.

Components report work through :func:`work`, which does nothing unless a front end (the CLI)
listens with :func:`reporting`::

    from capmetrics.engine.progress import work

    with work(len(texts), "sentences") as advance:
        for block in blocks:
            ...
            advance(len(block))

Work blocks nest: the innermost one running is what a progress bar shows (a statistic's
"items" while it tests them, the "sentences" of its embedder while that runs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import IO, Any, Protocol


class Reporter(Protocol):
    """What listens to :func:`work`: told when a block of work starts, advances and ends."""

    def start(self, total: int, unit: str) -> None: ...

    def advance(self, n: int) -> None: ...

    def end(self) -> None: ...


_reporter: ContextVar[Reporter | None] = ContextVar("capmetrics_progress", default=None)
#: The run's live progress bar on a terminal, if one is up (in any thread): messages print
#: above it (:func:`message`) and no second bar starts beside it.
_live: RunProgress | None = None
_live_lock = threading.Lock()


def message(text: str) -> None:
    """Print one line of ``text`` on stderr: above the run's progress bar when one is live
    (the bar's own console, so that a warning never lands on the bar's line), else plainly."""
    live = _live
    if live is not None and live.bar is not None:
        live.bar.console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)
    else:
        print(text, file=sys.stderr, flush=True)


def bar_is_live() -> bool:
    """Whether a run's progress bar is live on the terminal now (any thread)."""
    return _live is not None


class _ConsoleFile:
    """A text file whose complete lines go to :func:`message` (what ``warnings.showwarning``
    writes to while a bar is live)."""

    def __init__(self) -> None:
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            message(line)
        return len(text)

    def flush(self) -> None:
        if self.pending:
            message(self.pending)
            self.pending = ""


@contextlib.contextmanager
def work(total: int, unit: str) -> Iterator[Callable[[int], None]]:
    """Announce ``total`` units of work (``unit``: "items", "sentences", "captions"); yields
    ``advance(n)``. Costs nothing when nobody listens."""
    reporter = _reporter.get()
    if reporter is None:
        yield _ignore
        return
    reporter.start(total, unit)
    try:
        yield reporter.advance
    finally:
        reporter.end()


def _ignore(n: int = 1) -> None:
    return None


def listening() -> bool:
    """Whether a front end listens to :func:`work` here (a run's progress bar is up)."""
    return _reporter.get() is not None


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the :func:`work` of this context (this thread, this process) to ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


#: Environment variables that keep third-party progress bars and chatter off stderr
#: (huggingface_hub and transformers' tqdm bars, "Loading weights", any tqdm).
QUIET_THIRD_PARTY = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def silence_third_party() -> None:
    """Keep other libraries' progress bars off the terminal (the run has its own bar); set in
    the environment, so worker processes inherit it, and applied to libraries already imported."""
    for key, value in QUIET_THIRD_PARTY.items():
        os.environ.setdefault(key, value)
    if "transformers" in sys.modules:
        with contextlib.suppress(Exception):
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
    if "huggingface_hub" in sys.modules:
        with contextlib.suppress(Exception):
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()


class RunProgress:
    """One progress line for a whole run on ``stream``: which metric runs (k/N) and the work of
    the innermost :func:`work` block, with its rate and time left.

    On a terminal it is a live bar (rich); elsewhere (``plain=True``) a line at most every
    ``every`` seconds and at the end of each metric.
    """

    def __init__(
        self, stream: IO[str], items: int | None = None, plain: bool = False, every: float = 10.0
    ) -> None:
        self.stream, self.items, self.plain, self.every = stream, items, plain, every
        self.label = "scoring"
        self.stack: list[list[Any]] = []  # [total, unit, done, started]
        self.last_print = 0.0
        self.bar: Any = None
        self.task: Any = None

    # the ``progress(name, done, total)`` callback of capmetrics.score ------------------------
    def __call__(self, name: str, done: int, total: int) -> None:
        if self.items is None:  # a streamed file: the steps are its chunks ("chunk 2/9")
            self.label = "scoring" if not name else f"scoring {name.split()[0]}s"
            self.stack[:] = [
                [total, "chunks", done, self.stack[0][3] if self.stack else time.perf_counter()]
            ]
            self._show(force=True)
            return
        if self.stack:  # the previous metric's own block
            self._finish_metric()
        if not name:
            return
        self.label = f"{name} ({done + 1}/{total})" if total > 1 else name
        self.start(self.items, "items")

    def _finish_metric(self) -> None:
        while self.stack:
            self.stack[-1][2] = self.stack[-1][0]
            self._show(force=True)
            self.stack.pop()

    # Reporter ---------------------------------------------------------------------------------
    def start(self, total: int, unit: str) -> None:
        self.stack.append([max(int(total), 0), unit, 0, time.perf_counter()])
        self._show(force=not self.plain)

    def advance(self, n: int) -> None:
        if self.stack:
            self.stack[-1][2] += n
            self._show()

    def end(self) -> None:
        if self.stack:
            self.stack.pop()
            self._show(force=not self.plain)

    # display ------------------------------------------------------------------------------------
    def _show(self, force: bool = False) -> None:
        total, unit, done, started = (
            self.stack[-1] if self.stack else (None, "", 0, time.perf_counter())
        )
        if self.bar is not None:
            if force:  # a block starts or ends: show it now, whatever the refresh rate
                self.bar.reset(
                    self.task, total=total, completed=done, description=self.label, unit=unit
                )
                self.bar.refresh()
            else:
                self.bar.update(self.task, completed=done, description=self.label, unit=unit)
            return
        now = time.perf_counter()
        if self.plain and (force or now - self.last_print >= self.every) and total is not None:
            self.last_print = now
            rate = done / (now - started) if now > started else 0.0
            print(
                f"capmetrics: {self.label}: {done:,}/{total:,} {unit} ({_rate(rate)} {unit}/s)",
                file=self.stream,
                flush=True,
            )

    def __enter__(self) -> RunProgress:
        if not self.plain:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"),
                _rate_column(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self.bar.__enter__()
            self.task = self.bar.add_task(self.label, total=None, unit="")
            self._go_live()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self._end_live()
            self.bar.__exit__(*exc)

    def _go_live(self) -> None:
        """Route warnings through the bar's console while it is live (restored by _end_live)."""
        global _live
        with _live_lock:
            self._outer = _live
            _live = self
        self._showwarning = previous = warnings.showwarning

        def showwarning(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            out: Any = _ConsoleFile() if file is None else file
            previous(message, category, filename, lineno, out, line)
            if isinstance(out, _ConsoleFile):
                out.flush()

        self._ours = showwarning
        warnings.showwarning = showwarning

    def _end_live(self) -> None:
        global _live
        if warnings.showwarning is self._ours:  # unless someone replaced it meanwhile
            warnings.showwarning = self._showwarning
        with _live_lock:
            _live = self._outer


def _rate(per_second: float) -> str:
    """A rate with the digits that matter: ``1,234``, ``56``, ``0.22``."""
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:.2g}"


def _rate_column() -> Any:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Units per second of the running block."""

        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{_rate(speed)} {task.fields.get('unit', '')}/s")

    return RateColumn()


@contextlib.contextmanager
def run_progress(
    show: bool | None, items: int | None = None, stream: IO[str] | None = None
) -> Iterator[RunProgress | None]:
    """The progress of one CLI run on ``stream`` (stderr): a live bar on a terminal, plain
    lines elsewhere when ``show`` is True, nothing when ``show`` is False or (``None``) when
    ``stream`` is not a terminal. Third-party bars are silenced either way."""
    silence_third_party()
    stream = stream or sys.stderr
    terminal = stream.isatty()
    if show is False or (show is None and not terminal):
        yield None
        return
    with RunProgress(stream, items, plain=not terminal) as progress, reporting(progress):
        yield progress
