"""What runs in the worker processes that capmetrics starts, and how those processes are tuned.

A worker process of a local pool (:mod:`capmetrics.engine.executors`) or of a Dask LocalCluster
is capmetrics' own, so it is tuned for the work once, as it starts (:func:`tune_worker`):

- freed heap memory is kept for reuse (:func:`capmetrics.runtime.allocator.keep_freed_memory`);
- it freezes what it inherited (:func:`gc.freeze`), so its collector never walks (and so, in a
  forked worker, copies) the caller's pages: ~10 % of the workers' CPU on TRM-CIDEr-D;
- a local pool's worker that runs statistics keeps BLAS at one thread from its first chunk on
  (:func:`single_threaded_blas`): it runs that one function until it ends.

The caller's process is never tuned here: the ``capmetrics`` command tunes its own
(:mod:`capmetrics.cli.process`), and a program that calls the library is left as it was. The
one exception is :func:`single_threaded_blas` around the statistics that run in the caller's
process: scoped, and the BLAS setting is restored when it ends.

Module state, in worker processes only (the caller's stays empty; a test checks it): ``_task``,
the task of a local pool's worker, set by the pool's initializer :func:`start_worker` and gone
with the worker; ``_blas_limited``, set where such a worker limited BLAS for its life.
"""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from capmetrics.errors import CapmetricsError
from capmetrics.runtime.allocator import keep_freed_memory, keep_freed_memory_if_owned


class ExecutorError(CapmetricsError, RuntimeError):
    """The executor failed (unreachable scheduler, dead worker); no results were kept."""


@dataclass(frozen=True)
class _Task:
    """What a local pool's worker runs on each chunk: ``function(shared, items)``, the items
    being ``[source[i] for i in span]`` when the worker inherited ``source`` (fork)."""

    function: Callable[[Any, list[Any]], Any]
    shared: Any
    per_item: bool
    source: Sequence[Any] | None


_task: _Task | None = None
_blas_limited = False


def tune_worker() -> None:
    """Tune a worker process that capmetrics started (see the module's text); never called in
    the caller's process."""
    keep_freed_memory()
    gc.freeze()


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """One BLAS thread while the block runs, then the setting as it was: the statistics'
    matrices are tiny, so BLAS threads only add overhead (and oversubscribe the cores when items
    already run on several processes). In a local pool's worker (ours, running this one kind of
    task until it ends) the limit is set once and kept: ~1.7 ms saved per chunk."""
    global _blas_limited
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own setting
        yield
        return
    if _task is not None and not _blas_limited:
        threadpool_limits(limits=1, user_api="blas")  # for the worker's life
        _blas_limited = True
    if _blas_limited:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def run_chunk(
    function: Callable[[Any, list[Any]], Any], shared: Any, items: list[Any], per_item: bool = True
) -> Any:
    """``function(shared, items)``, checked to give one result per item when ``per_item``."""
    keep_freed_memory_if_owned()  # the command's own process (workers tuned themselves)
    out = function(shared, items)
    if per_item and len(out) != len(items):
        raise ExecutorError(f"a task returned {len(out)} results for {len(items)} items")
    return out


def start_worker(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    per_item: bool,
    source: Sequence[Any] | None = None,
    caller: int = -1,
) -> None:
    """The initializer of a local pool's worker processes: the task, and the process tuned."""
    global _task
    _task = _Task(function, shared, per_item, source)
    if os.getpid() != caller:  # always so in a pool's worker; the caller is never tuned
        tune_worker()


def run_process_chunk(items: list[Any] | range) -> Any:
    """A local pool's task: one chunk, given as items or as positions in the inherited source."""
    if _task is None:
        raise ExecutorError("a worker task ran before its worker was started")
    if isinstance(items, range):  # positions in the items this forked worker inherited
        assert _task.source is not None
        items = [_task.source[i] for i in items]
    return run_chunk(_task.function, _task.shared, items, _task.per_item)


def run_pickled_chunks(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    chunks: bytes,
    per_item: bool,
    caller: int = -1,
) -> list[Any]:
    """A Dask task: consecutive chunks, pickled (as lists Dask would walk every string of them
    looking for futures). A Dask worker process tunes its allocator; a thread worker in the
    caller's process (``caller``) leaves it alone."""
    if os.getpid() != caller:
        keep_freed_memory()
    return [run_chunk(function, shared, items, per_item) for items in pickle.loads(chunks)]
