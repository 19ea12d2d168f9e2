"""Slow first steps of some metrics started at the beginning of a run, beside the others.

A component may declare :class:`Prepares`: a ``prepare(candidates, references, stop)`` method
that does, ahead of ``score``, the work ``score`` of those texts will need and that mostly waits
on other processes (SPICE parses new captions with its JVMs; METEOR builds its resource tables
and compiles its aligner in child processes on first use). :func:`capmetrics.score` runs the
``prepare`` of every such component (or one nested in a metric) in a background thread while it
computes the other metrics in this one, and evaluates the prepared metrics last, each after its
own preparation has ended. ``prepare`` never changes a value: it fills the caches ``score``
reads (or hands ``score`` what it prepared); a preparation that fails is ignored, and ``score``
then does the work and reports the error as it would have.

No thread outlives the run: on leaving the block every thread is joined; when the run fails or
is interrupted, ``stop`` is set first and a preparation abandons its work (SPICE kills its JVMs).
Statistics wait for every preparation before they start: their workers may be forked, and a
process must not fork while other threads run.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

from capmetrics.components.base import Component, Distance, ImageTextMetric
from capmetrics.engine.progress import reporting


@runtime_checkable
class Prepares(Protocol):
    """A component whose ``score`` has slow first steps it can take ahead (optional)."""

    def prepare(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], stop: threading.Event
    ) -> None:
        """Do ahead what ``score(candidates, references)`` (or ``pairwise`` of those texts) will
        need; return early, leaving no process behind, once ``stop`` is set. Must not change
        any value the component computes."""


def preparing(component: Component) -> list[Component]:
    """``component`` and the components nested in its parameters that declare :class:`Prepares`."""
    found: list[Component] = []

    def walk(c: Component) -> None:
        if isinstance(c, Prepares) and all(c is not f for f in found):
            found.append(c)
        for value in c.get_params().values():
            if isinstance(value, Component):
                walk(value)

    walk(component)
    return found


class Prestart:
    """The background preparations of a run's ``components`` for these texts (a context
    manager: threads start on entry and are all joined on exit)."""

    def __init__(
        self,
        components: Sequence[Component],
        candidates: Sequence[str],
        references: Sequence[Sequence[str]],
    ) -> None:
        self.components = list(components)
        self.candidates, self.references = candidates, references
        self.stop = threading.Event()
        self._threads: dict[int, threading.Thread] = {}  # id(component) -> the thread preparing it
        self._all: list[threading.Thread] = []

    def worthwhile(self) -> bool:
        """Whether anything can run beside a preparation (more than one metric, one of them
        prepares)."""
        return len(self.components) > 1 and any(preparing(c) for c in self.components)

    def __enter__(self) -> Prestart:  # noqa: PYI034 - Python 3.10 has no typing.Self
        if not self.worthwhile():
            return self
        by_class: dict[
            type, list[Component]
        ] = {}  # one class's preparations share resources: in turn
        for component in self.components:
            for part in preparing(component):
                group = by_class.setdefault(type(part), [])
                if all(part is not p for p in group):
                    group.append(part)
        for cls, group in by_class.items():
            context = (
                contextvars.copy_context()
            )  # the caller's settings; its progress bar is not shown to
            thread = threading.Thread(
                target=context.run,
                args=(self._prepare, group),
                daemon=False,
                name=f"capmetrics-prepare-{cls.__name__}",
            )
            for part in group:
                self._threads[id(part)] = thread
            self._all.append(thread)
        for thread in self._all:
            thread.start()
        return self

    def _prepare(self, group: list[Component]) -> None:
        with reporting(None):  # one bar, the main thread's
            for part in group:
                if self.stop.is_set():
                    return
                try:
                    part.prepare(self.candidates, self.references, self.stop)  # type: ignore[attr-defined]
                except Exception:  # noqa: BLE001, S110 - score does the work again and reports its error
                    pass

    def order(self) -> list[int]:
        """The positions of the components in the order to evaluate them: those that wait for no
        preparation first (computed while the preparations run), the others after, each group
        in the given order."""
        waits = [k for k, c in enumerate(self.components) if self._waits_for(c)]
        return [k for k in range(len(self.components)) if k not in waits] + waits

    def _waits_for(self, component: Component) -> bool:
        return bool(self._all) and (
            not isinstance(component, (Distance, ImageTextMetric)) or bool(preparing(component))
        )

    def wait(self, component: Component) -> None:
        """Block until the preparations ``component`` depends on have ended (every one, for a
        statistic: its workers may fork)."""
        if not self._all:
            return
        if not isinstance(component, (Distance, ImageTextMetric)):
            threads: Iterator[threading.Thread] = iter(self._all)
        else:
            threads = (self._threads[id(p)] for p in preparing(component) if id(p) in self._threads)
        for thread in threads:
            thread.join()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None:
            self.stop.set()  # the run failed or was interrupted: abandon the preparations
        for thread in self._all:
            while thread.is_alive():
                try:
                    thread.join()
                except (
                    KeyboardInterrupt
                ):  # a second Ctrl-C: stop them, still wait (no thread is left)
                    self.stop.set()
