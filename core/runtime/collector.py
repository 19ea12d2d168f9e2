"""Keeping Python's cyclic garbage collector off large, long-lived data, in the command's process.

A run holds its dataset (tens of thousands of items, each a few tuples) from start to end, and
creates many small containers while scoring (per-item results). Every full collection walks all
tracked objects, the dataset included: on 20,000 items that was ~15 % of a serial TRM-CIDEr-D
run. Objects that live for the whole run are moved out of the collector's reach
(:func:`gc.freeze`) while it runs, and parsing (which makes no reference cycles) runs with the
collector paused. Nothing here changes what is freed: frozen objects are unfrozen at the end,
and cyclic garbage made meanwhile is collected as usual.

The collector belongs to the process, so this is the ``capmetrics`` command's own tuning
(:mod:`capmetrics.cli.process` switches it on with :func:`own_process`). In any other process
(a program that calls :func:`capmetrics.score`) :func:`frozen` and :func:`paused` do nothing:
a library call leaves the host's collector, and the objects the host froze, as it found them.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0
_lock = threading.Lock()  # runs on several threads nest as well
_owned = False  # the process is the capmetrics command's (own_process)
_ours = False  # the outermost frozen() froze, so it unfreezes


def own_process(owned: bool = True) -> None:
    """Let :func:`frozen` and :func:`paused` tune the collector of this process: only for the
    process of the ``capmetrics`` command (:mod:`capmetrics.cli.process`), never a host's."""
    global _owned
    _owned = owned


def owns_process() -> bool:
    """Whether :func:`own_process` was called in this process."""
    return _owned


@contextmanager
def frozen() -> Iterator[None]:
    """In the command's process, freeze every object tracked now (:func:`gc.freeze`): later
    collections, and the collectors of processes forked meanwhile, do not walk them. Nested
    uses freeze what came since; everything is unfrozen when the outermost one ends. It acts
    only where nothing was frozen before it (so unfreezing restores the state exactly), and
    not at all in a process the command does not own."""
    global _depth, _ours
    with _lock:
        if _depth == 0:
            _ours = _owned and gc.get_freeze_count() == 0
        if _ours:
            gc.freeze()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _ours:
                _ours = False
                gc.unfreeze()


@contextmanager
def paused() -> Iterator[None]:
    """In the command's process, the collector off (for building acyclic data: parsed JSON,
    items), then as it was; elsewhere nothing."""
    was = gc.isenabled()
    if _owned:
        gc.disable()
    try:
        yield
    finally:
        if _owned and was:
            gc.enable()
