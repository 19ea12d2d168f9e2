"""Executors: run independent items in this process, on local processes or on Dask.

Items are cut into contiguous chunks; each chunk runs ``function(shared, items)`` and the chunks'
results are joined in item order. Whatever computes an item, its result is the same (the
statistics seed their Monte-Carlo splits from the item's own texts), so a run gives the same
bytes with any executor and any number of workers. A failed chunk fails the whole run: results
are never returned partially.

The pools are :class:`concurrent.futures.ProcessPoolExecutor` and a Dask
:class:`distributed.Client`, used as they are. What is added on top: chunks submitted through a
bounded window, in order (:func:`in_order`; ``Executor.map`` of Python 3.11 submits its whole
input at once, so a lazily embedded stream would be held whole), the start method chosen by
explicit rules (:func:`_start_method`), and the sizing of ``--jobs`` to the work (:func:`sized`).
What runs inside the workers, and how they are tuned, is :mod:`capmetrics.engine.workers`.

Module state: ``_NOTED``, the notes already printed by this process (each says once what
``--jobs`` chose). Nothing else is kept between maps: the forkserver's preload list is set for a
pool and put back after it; the workers' task lives in the workers.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import multiprocessing.context
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from capmetrics.engine.workers import (
    ExecutorError,
    run_chunk,
    run_process_chunk,
    start_worker,
)
from capmetrics.errors import CapmetricsError
from capmetrics.runtime.collector import frozen

T = TypeVar("T")
R = TypeVar("R")
ExecutorName = Literal["serial", "processes", "dask"]
EXECUTORS: tuple[str, ...] = ("serial", "processes", "dask")


@dataclass(frozen=True)
class Executor:
    """Where items run.

    Args:
        kind: ``serial`` (this process), ``processes`` (``jobs`` local processes) or ``dask``.
        jobs: number of local processes, or of workers of the Dask LocalCluster.
        address: a Dask scheduler address (``tcp://host:8786``); none starts a LocalCluster.
        chunk_size: items per task. Chunk boundaries never depend on the executor or on the
            number of workers, so batched work (n-gram batches, embedding batches) sees the
            same inputs everywhere and the results are the same bytes.
        timeout: seconds to wait for a Dask scheduler.
        dask_processes: LocalCluster workers are processes (True) or threads (False).
        to_the_work: local processes are sized to the work (``--jobs``, :meth:`from_options`):
            at most the cores and the chunks of work, and this process alone when the items are
            too few to pay for workers (:func:`sized`). Otherwise ``jobs`` is taken as given.
    """

    kind: ExecutorName = "serial"
    jobs: int = 1
    address: str | None = None
    chunk_size: int = 64
    timeout: float = 10.0
    dask_processes: bool = True
    to_the_work: bool = False

    @classmethod
    def from_options(
        cls, executor: str | None = None, jobs: int = 1, address: str | None = None
    ) -> Executor:
        """The executor that CLI options name: ``--jobs N`` alone means local processes."""
        kind = executor or ("dask" if address else "processes" if jobs > 1 else "serial")
        if kind not in EXECUTORS:
            raise CapmetricsError(f"unknown executor {kind!r}; use one of {', '.join(EXECUTORS)}")
        if jobs < 1:
            raise CapmetricsError(f"--jobs must be at least 1, got {jobs}")
        return cls(kind, jobs, address, to_the_work=True)  # type: ignore[arg-type]

    def chunks(self, count: int) -> list[range]:
        """Contiguous index ranges covering ``count`` items."""
        size = max(1, self.chunk_size)
        return [range(start, min(count, start + size)) for start in range(0, count, size)]


#: Items per worker process below which local processes do not pay for themselves (forking,
#: starting the pool and sending results back against each worker's share of the items): with
#: fewer, the items run in this process. Measured with TRM-CIDEr-D 5+5 (benchmarks/bench_cold.py):
#: 200 items are faster serial, 6,000 faster on two processes.
PROCESS_MIN_ITEMS = 256
_NOTED: set[str] = set()


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _note(message: str) -> None:
    """One line on stderr, once per process (``CAPMETRICS_QUIET=1`` silences it)."""
    from capmetrics.engine.notices import QUIET_ENV

    if message not in _NOTED and os.environ.get(QUIET_ENV, "") in ("", "0"):
        _NOTED.add(message)
        print(f"capmetrics: {message}", file=sys.stderr, flush=True)


def sized(executor: Executor, count: int | None, chunks: int | None = None) -> Executor:
    """The executor to run ``count`` items on (None: a stream of unknown length). Local processes
    are capped at the cores and at the chunks of work, and give way to this process when there
    are fewer than :data:`PROCESS_MIN_ITEMS` items per process; what was chosen is said in one
    line on stderr. ``chunks``: how many tasks the items make (default: the executor's chunks
    of ``count``). A Dask LocalCluster (no address) is capped at the cores too; other
    executors are returned as they are."""
    if executor.kind == "dask" and not executor.address and executor.to_the_work:
        return _dask_sized(executor)
    if executor.kind != "processes" or not executor.to_the_work:
        return executor
    asked, cores = executor.jobs, available_cores()
    jobs, why = min(asked, cores), []
    if jobs < asked:
        why.append(f"{cores} CPU cores")
    if count is not None:
        chunks = len(executor.chunks(count)) if chunks is None else chunks
        if jobs > chunks:
            jobs = max(1, chunks)
            why.append(f"{chunks} chunk{'s' * (chunks != 1)} of work")
        if count // PROCESS_MIN_ITEMS < jobs:
            jobs = max(1, count // PROCESS_MIN_ITEMS)
            why.append(
                f"{count} items: fewer than {PROCESS_MIN_ITEMS} per process "
                "do not pay for starting it"
            )
    reason = f" ({'; '.join(why)})" if why else ""
    if jobs <= 1:
        _note(f"--jobs {asked}: running in this process{reason}")
        return replace(executor, kind="serial", jobs=1)
    _note(f"--jobs {asked}: {jobs} worker processes ({_start_method()} start){reason}")
    return replace(executor, jobs=jobs)


def _dask_sized(executor: Executor) -> Executor:
    """A LocalCluster's workers capped at the cores (each is a single-threaded process)."""
    asked, cores = executor.jobs, available_cores()
    if asked <= cores:
        return executor
    _note(f"--jobs {asked}: a Dask LocalCluster of {cores} workers ({cores} CPU cores)")
    return replace(executor, jobs=cores)


#: A contiguous range of item positions with the task inputs of those items.
Chunk = tuple[range, list[Any]]


def map_chunks(
    function: Callable[[T, list[Any]], list[R]],
    shared: T,
    items: Sequence[Any],
    executor: Executor | None = None,
) -> list[R]:
    """``function(shared, chunk)`` over contiguous chunks of ``items`` on ``executor``; the
    chunks' result lists are joined in item order.

    ``function`` must be importable by name (a module-level function) for process and Dask
    executors; ``shared`` (e.g. a built, fitted statistic) goes once to each worker.

    Raises:
        ExecutorError: the pool or cluster failed; no partial results are returned.
    """
    executor = sized(executor or Executor(), len(items))
    chunks = ((r, [items[i] for i in r]) for r in executor.chunks(len(items)))
    return map_stream(function, shared, chunks, executor)


def map_stream(
    function: Callable[[T, list[Any]], list[R]],
    shared: T,
    chunks: Iterable[Chunk],
    executor: Executor | None = None,
) -> list[R]:
    """:func:`map_chunks` over chunks produced lazily (e.g. embedded in this process block by
    block while the workers test the previous block); at most a few chunks per worker wait in
    flight, so the producer's memory stays bounded.

    Raises:
        ExecutorError: the pool or cluster failed, naming the executor and the items that were
            running; no partial results are returned.
    """
    return [r for part in iter_stream(function, shared, chunks, executor) for r in part]


def iter_stream(
    function: Callable[[T, list[Any]], Any],
    shared: T,
    chunks: Iterable[Chunk],
    executor: Executor | None = None,
    per_item: bool = True,
    while_running: Callable[[], None] | None = None,
    source: Sequence[Any] | None = None,
) -> Iterator[Any]:
    """``function(shared, chunk)`` of every chunk, yielded in chunk order as they finish (the
    caller can fold them as they come). ``per_item``: the function returns one result per item
    of its chunk (checked); otherwise one object per chunk. ``while_running`` is called once in
    this process while local workers have chunks to run (other executors: after the last).
    ``source``: every chunk is ``[source[i] for i in span]``; forked workers then read their
    items from the memory they inherit, and only the spans are sent to them."""
    executor = executor or Executor()
    stream = iter(chunks)
    if executor.kind == "serial":
        for _, chunk in stream:
            yield run_chunk(function, shared, chunk, per_item)
    else:
        first = next(stream, None)  # produced before any worker starts (see _process_context)
        if first is not None:
            stream = itertools.chain([first], stream)
            if executor.kind == "processes":
                yield from _map_processes(
                    function, shared, stream, executor, per_item, while_running, source
                )
                return
            from capmetrics.engine.dask_executor import map_dask

            yield from map_dask(function, shared, stream, executor, per_item)
    if while_running is not None:
        while_running()


def in_order(
    submit: Callable[[Any], Any],
    result: Callable[[Any], Any],
    chunks: Iterator[tuple[range, Any]],
    window: int,
    failed: Callable[[BaseException, range], ExecutorError | None],
    succeeded: Callable[[Any], bool],
    idle: Callable[[], None] | None = None,
) -> Iterator[Any]:
    """Submit chunks with at most ``window`` in flight; yield their results in order.
    ``failed(error, items)`` turns an executor failure into the error to raise (None: re-raise),
    ``items`` spanning the chunks in flight that had not succeeded. ``idle`` runs once, when the
    first window is in flight, in a thread of this process (its own work, overlapping the
    workers', while this thread keeps them fed); its error, if any, is raised after the last
    result."""
    pending: collections.deque[tuple[range, Any]] = collections.deque()
    helper: ThreadPoolExecutor | None = None
    helped: Any = None

    def use_idle() -> None:
        nonlocal idle, helper, helped
        if idle is not None:
            todo, idle = idle, None
            helper = ThreadPoolExecutor(1, thread_name_prefix="capmetrics-idle")
            helped = helper.submit(todo)

    def collect() -> Any:
        span, future = pending.popleft()
        try:
            return result(future)
        except BaseException as err:
            unfinished = [s for s, f in pending if not succeeded(f)]
            error = failed(err, range(span.start, unfinished[-1].stop if unfinished else span.stop))
            if error is None:
                raise
            raise error from err

    try:
        for span, chunk in chunks:
            pending.append((span, submit(chunk)))
            if len(pending) >= window:
                use_idle()
                yield collect()
        use_idle()
        while pending:
            yield collect()
        if helped is not None:
            helped.result()
    finally:
        if helper is not None:
            helper.shutdown(wait=True)


def items_text(items: range) -> str:
    return f"item {items.start}" if len(items) == 1 else f"items {items.start}-{items.stop - 1}"


#: Shared libraries whose thread pools do not survive a fork: OpenMP runtimes (GNU, Intel, LLVM).
#: A forked child that enters a parallel region of a pool its parent started can hang.
FORK_UNSAFE_LIBRARIES = ("libgomp", "libiomp", "libomp")


def _start_method() -> str:
    """How local worker processes start: ``fork`` where it is safe, else ``forkserver``.

    The rules, in order (docs/usage/scale.md says the same):

    1. not Linux: ``spawn`` (macOS's system libraries are not fork-safe; Windows has no fork);
    2. torch is imported: ``forkserver`` (its thread pools and CUDA do not survive a fork);
    3. an OpenMP runtime is loaded (:data:`FORK_UNSAFE_LIBRARIES`): ``forkserver``;
    4. another non-daemon thread is running: ``forkserver`` (a thread at work may hold a lock,
       of a stream or of a library, that a forked child would find held forever; daemon threads
       are helpers that wait, as a progress bar's refresher or a notebook's heartbeat);
    5. else ``fork``: the workers inherit this process's imports, ``shared`` and the items
       without pickling them.

    The forkserver has imported :data:`FORKSERVER_PRELOAD` and the task's module once, and never
    imports torch; its workers get ``shared`` pickled. The first chunk is produced before this
    is decided, so an embedder that loads torch for it is seen here.
    """
    if not sys.platform.startswith("linux"):
        return "spawn"
    if "torch" in sys.modules or _fork_unsafe_library_loaded():
        return "forkserver"
    current = threading.current_thread()
    if any(t is not current and not t.daemon for t in threading.enumerate()):
        return "forkserver"
    return "fork"


def _fork_unsafe_library_loaded() -> bool:
    """Whether a library of :data:`FORK_UNSAFE_LIBRARIES` is mapped into this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:  # no /proc: nothing known to be unsafe
        return False
    return any(f"/{name}" in text for name in FORK_UNSAFE_LIBRARIES)


#: Modules a worker process imports as it starts: the forkserver once, before it forks any worker
#: (with the task's module), and each worker of a Dask LocalCluster.
FORKSERVER_PRELOAD = (
    "capmetrics",
    "capmetrics.engine.workers",
    "capmetrics.components.permutation",
    "numpy",
)


@contextmanager
def _process_context(
    function: Callable[..., Any] | None = None,
) -> Iterator[multiprocessing.context.BaseContext]:
    """The multiprocessing context of a local pool (:func:`_start_method`). A forkserver is
    given :data:`FORKSERVER_PRELOAD` and ``function``'s module to import when it starts (within
    the block); the process-wide preload list is put back as it was on leaving. (The server
    itself, once started, stays for the life of the process: multiprocessing keeps one per
    process, and later pools reuse it.)"""
    context = multiprocessing.get_context(_start_method())
    if context.get_start_method() != "forkserver":
        yield context
        return
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    before = getattr(server, "_preload_modules", None)
    extra = (
        [function.__module__] if function is not None and function.__module__ != "__main__" else []
    )
    context.set_forkserver_preload([*FORKSERVER_PRELOAD, *extra])
    try:
        yield context
    finally:
        if server is not None and before is not None:
            server._preload_modules = before


def _map_processes(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    chunks: Iterator[Chunk],
    executor: Executor,
    per_item: bool,
    idle: Callable[[], None] | None = None,
    source: Sequence[Any] | None = None,
) -> Iterator[Any]:
    with _process_context(function) as context:
        yield from _run_pool(function, shared, chunks, executor, per_item, idle, source, context)


def _run_pool(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    chunks: Iterator[Chunk],
    executor: Executor,
    per_item: bool,
    idle: Callable[[], None] | None,
    source: Sequence[Any] | None,
    context: multiprocessing.context.BaseContext,
) -> Iterator[Any]:
    def failed(err: BaseException, running: range) -> ExecutorError | None:
        if isinstance(err, BrokenProcessPool):
            return ExecutorError(
                f"the processes executor ({executor.jobs} jobs) lost a worker process (killed "
                f"or crashed) while {items_text(running)} were running or queued; the run was "
                "stopped and no results were kept"
            )
        return None

    # Workers freeze what they inherit (capmetrics.engine.workers). The capmetrics command also
    # keeps this process's own collector off it while the pool runs (capmetrics.runtime.collector:
    # frozen() acts only in the command's process; a library call leaves gc as it found it).
    forked = context.get_start_method() == "fork"
    inherited = source if forked else None  # other start methods would pickle it to each worker
    spans = ((span, span) for span, _ in chunks) if inherited is not None else chunks
    with frozen() if forked else nullcontext():
        with ProcessPoolExecutor(
            max_workers=executor.jobs,
            mp_context=context,
            initializer=start_worker,
            initargs=(function, shared, per_item, inherited, os.getpid()),
        ) as pool:
            try:
                yield from in_order(
                    lambda chunk: pool.submit(run_process_chunk, chunk),
                    lambda f: f.result(),
                    spans,
                    2 * executor.jobs + 2,
                    failed,
                    lambda f: f.done() and not f.cancelled() and f.exception() is None,
                    idle,
                )
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
