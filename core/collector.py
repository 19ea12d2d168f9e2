"""Keeping Python's cyclic garbage collector off large, long-lived data.

A run holds its dataset (tens of thousands of items, each a few tuples) from start to end, and
creates many small containers while scoring (per-item results). Every full collection walks all
tracked objects, the dataset included: on 20,000 items that was ~15 % of a serial TRM-CIDEr-D
run. Objects that live for the whole run are moved out of the collector's reach
(:func:`gc.freeze`) while it runs, and parsing (which makes no reference cycles) runs with the
collector paused. Nothing here changes what is freed: frozen objects are unfrozen at the end,
and cyclic garbage made meanwhile is collected as usual.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_depth = 0
_lock = threading.Lock()  # runs on several threads nest as well


@contextmanager
def frozen() -> Iterator[None]:
    """Freeze every object tracked now (:func:`gc.freeze`): later collections, and the
    collectors of processes forked meanwhile, do not walk them. Nested uses freeze what came
    since; everything is unfrozen when the outermost one ends."""
    global _depth
    with _lock:
        gc.freeze()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.unfreeze()


@contextmanager
def paused() -> Iterator[None]:
    """The collector off (for building acyclic data: parsed JSON, items), then as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
