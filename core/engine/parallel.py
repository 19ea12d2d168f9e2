"""Run independent items on an executor: in this process, on local processes or on Dask.

Items are cut into contiguous chunks; each chunk runs ``function(shared, item)`` for its items
and the chunks' results are joined in item order. Whatever computes an item, its result is
the same (the statistics seed their Monte-Carlo splits from the item's own texts), so a run
gives the same bytes with any executor and any number of workers. A failed chunk fails the
whole run: results are never returned partially.
"""

from __future__ import annotations

import collections
import gc
import itertools
import multiprocessing
import multiprocessing.context
import os
import pickle
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import CancelledError, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import numpy as np
from capmetrics.components.base import Statistic, StatResult
from capmetrics.components.permutation import PermutationStatistic, PooledItem, with_pooled
from capmetrics.components.protocols import CountsInParts, FitsInParts, supports
from capmetrics.errors import CapmetricsError
from capmetrics.runtime.allocator import keep_freed_memory, keep_freed_memory_if_owned
from capmetrics.runtime.collector import frozen

if TYPE_CHECKING:
    from capmetrics.data.model import Dataset
    from capmetrics.engine.results import MetricResult

T = TypeVar("T")
R = TypeVar("R")
ExecutorName = Literal["serial", "processes", "dask"]
EXECUTORS: tuple[str, ...] = ("serial", "processes", "dask")


class ExecutorError(CapmetricsError, RuntimeError):
    """The executor failed (unreachable scheduler, dead worker); no results were kept."""


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
                f"{count} items: fewer than {PROCESS_MIN_ITEMS} per process do not pay for starting it"
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


# ------------------------------------------------------------------------------------------
# workers
# ------------------------------------------------------------------------------------------
_SHARED: dict[str, Any] = {}
#: A contiguous range of item positions with the task inputs of those items.
Chunk = tuple[range, list[Any]]


def _run_chunk(
    function: Callable[[Any, list[Any]], Any], shared: Any, items: list[Any], per_item: bool = True
) -> Any:
    keep_freed_memory_if_owned()  # the command's own process (workers tune themselves as they start)
    out = function(shared, items)
    if per_item and len(out) != len(items):
        raise ExecutorError(f"a task returned {len(out)} results for {len(items)} items")
    return out


def _run_pickled_chunks(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    chunks: bytes,
    per_item: bool,
    caller: int = -1,
) -> list[Any]:
    if os.getpid() != caller:  # a Dask worker process, not the caller's (thread workers)
        keep_freed_memory()
    return [_run_chunk(function, shared, items, per_item) for items in pickle.loads(chunks)]


def _set_process_shared(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    per_item: bool,
    source: Sequence[Any] | None = None,
    caller: int = -1,
) -> None:
    """The initializer of the local worker processes: the task inputs, and the process tuned
    for the work (it is capmetrics' own; the caller's process is never tuned here)."""
    _SHARED["function"], _SHARED["shared"], _SHARED["per_item"] = function, shared, per_item
    _SHARED["source"] = source
    if os.getpid() != caller:
        keep_freed_memory()
        # A forked worker inherits every object of the caller; its collector walking them would
        # write to (and so copy) those pages: ~10 % of the workers' CPU on TRM-CIDEr-D. Frozen
        # here, in the worker, they are never walked; the caller's collector is left alone.
        gc.freeze()


def _run_process_chunk(items: list[Any] | range) -> Any:
    if isinstance(items, range):  # positions in the items this forked worker inherited
        items = [_SHARED["source"][i] for i in items]
    return _run_chunk(_SHARED["function"], _SHARED["shared"], items, _SHARED["per_item"])


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
            yield _run_chunk(function, shared, chunk, per_item)
    else:
        first = next(stream, None)  # produced before any worker starts (see _process_context)
        if first is not None:
            stream = itertools.chain([first], stream)
            if executor.kind == "processes":
                yield from _map_processes(
                    function, shared, stream, executor, per_item, while_running, source
                )
                return
            yield from _map_dask(function, shared, stream, executor, per_item)
    if while_running is not None:
        while_running()


def _in_order(
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


def _items_text(items: range) -> str:
    return f"item {items.start}" if len(items) == 1 else f"items {items.start}-{items.stop - 1}"


def _start_method() -> str:
    # fork (Linux) hands ``shared`` to the workers without pickling it and starts them with
    # everything this process has imported, but a process that has started torch's (or OpenMP's)
    # threads cannot fork safely: the children can hang, and CUDA cannot be used in a forked
    # child. Then the workers come from a forkserver (which never imports torch) that has
    # imported capmetrics once (``set_forkserver_preload``), and get ``shared`` pickled. The
    # first chunk is produced before this is decided, so an embedder that loads torch for it
    # is seen here.
    if not sys.platform.startswith("linux"):
        return "spawn"
    return "fork" if "torch" not in sys.modules else "forkserver"


#: Modules the forkserver imports once, before it forks any worker.
FORKSERVER_PRELOAD = [
    "capmetrics",
    "capmetrics.engine.parallel",
    "capmetrics.components.permutation",
    "numpy",
]


def _process_context(
    function: Callable[..., Any] | None = None,
) -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context(_start_method())
    if context.get_start_method() == "forkserver":
        extra = (
            [function.__module__]
            if function is not None and function.__module__ != "__main__"
            else []
        )
        context.set_forkserver_preload(FORKSERVER_PRELOAD + extra)  # used when the server starts
    return context


def _map_processes(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    chunks: Iterator[Chunk],
    executor: Executor,
    per_item: bool,
    idle: Callable[[], None] | None = None,
    source: Sequence[Any] | None = None,
) -> Iterator[Any]:
    def failed(err: BaseException, running: range) -> ExecutorError | None:
        if isinstance(err, BrokenProcessPool):
            return ExecutorError(
                f"the processes executor ({executor.jobs} jobs) lost a worker process (killed "
                f"or crashed) while {_items_text(running)} were running or queued; the run was stopped "
                "and no results were kept"
            )
        return None

    context = _process_context(function)
    # Forked workers freeze what they inherit (_set_process_shared). The capmetrics command also
    # keeps this process's own collector off it while the pool runs (capmetrics.runtime.collector:
    # frozen() acts only in the command's process; a library call leaves gc as it found it).
    forked = context.get_start_method() == "fork"
    inherited = (
        source if forked else None
    )  # other start methods would pickle it whole to each worker
    spans = ((span, span) for span, _ in chunks) if inherited is not None else chunks
    with frozen() if forked else nullcontext():
        with ProcessPoolExecutor(
            max_workers=executor.jobs,
            mp_context=context,
            initializer=_set_process_shared,
            initargs=(function, shared, per_item, inherited, os.getpid()),
        ) as pool:
            try:
                yield from _in_order(
                    lambda chunk: pool.submit(_run_process_chunk, chunk),
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


#: Dask settings of the LocalClusters started here. Dask's periodic checks (the event-loop health
#: "tick" every 20 ms, psutil system monitoring every 500 ms, the memory monitor every 100 ms, the
#: statistical profiler sampling the running task every 10 ms) cost an idle 2-worker cluster ~4 %
#: of a core per worker and ~5 % in the scheduler; at these settings ~0.2 % and ~0.6 % (measured
#: on 10 idle seconds). What is lost: finer dashboard and profile data, and the memory limits are
#: checked once a second instead of ten times.
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.worker.profile.enabled": False,
}


def _local_cluster(executor: Executor) -> Any:
    """A LocalCluster of ``executor.jobs`` single-threaded workers that import capmetrics as they
    start, with :data:`LOCAL_CLUSTER_CONFIG`."""
    try:
        import dask
        from distributed import LocalCluster
    except ImportError as err:
        raise ExecutorError(
            "the Dask executor needs dask[distributed]: pip install 'capmetrics[dask]'"
        ) from err
    nanny = (
        {"config": LOCAL_CLUSTER_CONFIG} if executor.dask_processes else {}
    )  # worker processes get it here
    with dask.config.set(
        LOCAL_CLUSTER_CONFIG
    ):  # the scheduler (and thread workers) read it as they start
        return LocalCluster(
            n_workers=executor.jobs,
            threads_per_worker=1,
            processes=executor.dask_processes,
            dashboard_address=None,
            preload=["capmetrics.engine.parallel"],
            **nanny,
        )


def _dask_client(executor: Executor) -> tuple[Any, Any]:
    if not executor.address:
        cluster = _local_cluster(executor)
        from distributed import Client

        return Client(cluster), cluster
    from distributed import Client

    try:
        return Client(executor.address, timeout=executor.timeout), None
    except (OSError, TimeoutError) as err:
        raise ExecutorError(
            f"cannot reach the Dask scheduler at {executor.address} "
            f"within {executor.timeout:g} s: {err}"
        ) from err


@contextmanager
def started(executor: Executor) -> Iterator[Callable[[], Executor]]:
    """Start a Dask executor's LocalCluster (none given by address) now, in a thread, while this
    process does its own part first (fitting, embedding); ``ready()`` waits for the cluster and
    gives the executor with its address. The cluster is closed on exit. Other executors are
    given back as they are."""
    if executor.kind != "dask" or executor.address:
        yield lambda: executor
        return
    with ThreadPoolExecutor(max_workers=1) as starter:
        cluster = starter.submit(_local_cluster, executor)
        try:
            yield lambda: replace(executor, address=cluster.result().scheduler_address)
        finally:
            if cluster.exception() is None:
                cluster.result().close()


#: Items per Dask task: consecutive chunks go together (their boundaries, and so the values, do
#: not change), so the scheduler and the workers' event loops handle fewer, larger messages.
DASK_TASK_ITEMS = 512


def _grouped(chunks: Iterator[Chunk], size: int) -> Iterator[tuple[range, list[list[Any]]]]:
    """Consecutive chunks joined into groups of at most ``size`` items (or one larger chunk)."""
    group: list[list[Any]] = []
    start = stop = 0
    for span, items in chunks:
        if group and stop - start + len(span) > size:
            yield range(start, stop), group
            group = []
        if not group:
            start = span.start
        group.append(items)
        stop = span.stop
    if group:
        yield range(start, stop), group


def _map_dask(
    function: Callable[[Any, list[Any]], Any],
    shared: Any,
    chunks: Iterator[Chunk],
    executor: Executor,
    per_item: bool,
) -> Iterator[Any]:
    client, cluster = _dask_client(executor)
    where = f"the Dask executor ({executor.address or f'LocalCluster of {executor.jobs} workers'})"
    try:
        from distributed import KilledWorker

        def failed(err: BaseException, running: range) -> ExecutorError | None:
            if isinstance(err, (KilledWorker, CancelledError)):
                return ExecutorError(
                    f"{where} lost a worker while {_items_text(running)} were running or queued "
                    f"({type(err).__name__}: {err}); the run was stopped and no results were kept"
                )
            if isinstance(err, (OSError, TimeoutError)):
                return ExecutorError(
                    f"lost the connection to the Dask scheduler while {_items_text(running)} "
                    f"were running: {err}"
                )
            return None

        shared_future = client.scatter(shared, broadcast=True)
        workers = max(1, len(client.scheduler_info().get("workers", {})) or executor.jobs)
        # the items go pickled: as lists, Dask would walk every string of them looking for futures
        for results in _in_order(
            lambda group: client.submit(
                _run_pickled_chunks,
                function,
                shared_future,
                pickle.dumps(group, pickle.HIGHEST_PROTOCOL),
                per_item,
                os.getpid(),
                pure=False,
            ),
            lambda f: f.result(),
            _grouped(chunks, DASK_TASK_ITEMS),
            2 * workers + 2,
            failed,
            lambda f: f.status == "finished",
        ):
            yield from results
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# ------------------------------------------------------------------------------------------
# statistics over items
# ------------------------------------------------------------------------------------------
#: Items whose pooled matrices (embeddings) the parent builds in one go for the workers; fixed,
#: so that embedding batches, and with them the values, never depend on the executor.
POOLED_BLOCK = 1024


def _compare_chunk(
    statistic: Statistic, items: list[tuple[list[str], list[str]]]
) -> list[StatResult]:
    with single_threaded_blas():
        if isinstance(statistic, PermutationStatistic):
            return list(statistic.compare_many(items))
        return [statistic.compare(c, r) for c, r in items]


def _compare_pooled_chunk(
    statistic: PermutationStatistic, tasks: list[PooledItem]
) -> list[StatResult]:
    with single_threaded_blas():
        return statistic.compare_pooled(tasks)


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """One BLAS thread: the statistics' matrices are tiny, so BLAS threads only add overhead
    (and oversubscribe the cores when items already run on several processes)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own setting
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def pooled_chunks(
    statistic: PermutationStatistic,
    items: Sequence[tuple[list[str], list[str]]],
    executor: Executor,
) -> Iterator[Chunk]:
    """The items with their pooled matrices, built here block by block (:data:`POOLED_BLOCK`
    items per :meth:`~capmetrics.components.permutation.PermutationStatistic.pooled_many` call), cut into
    the executor's chunks."""
    for start in range(0, len(items), POOLED_BLOCK):
        block = with_pooled(statistic, items[start : start + POOLED_BLOCK])
        for span in executor.chunks(len(block)):
            yield range(start + span.start, start + span.stop), [block[i] for i in span]


#: Distinct reference sets from which a statistic that fits in parts is fitted on the workers
#: (fewer: in this process). Fitting costs per distinct set (equal sets are tokenised once), so
#: parts only pay when there are many distinct sets to share out.
FIT_IN_PARTS_MIN = 2_000
#: Jobs from which fitting in parts pays when the parts are string tables (``fit_state``): they
#: cost the workers ~1.6x the CPU of fitting whole (shipping the references and the partial
#: tables) and merging them costs this process ~0.35x, so two jobs lose to fitting here
#: (measured on 20,000 items, 2,700-20,000 distinct reference sets). Parts in integer form
#: (``count_state``: CIDEr-D's frequencies as arrays) with the references inherited by forked
#: workers cost what fitting whole does, and summing them ~0.1x: they pay from two jobs.
FIT_IN_PARTS_MIN_JOBS = 4


def _fit_part(shared: tuple[Any, list[list[str]], bool], indices: list[int]) -> Any:
    statistic, references, compact = shared
    part = [references[i] for i in indices]
    return statistic.count_state(part) if compact else statistic.fit_state(part)


def fit_statistic(statistic: Statistic, references: list[list[str]], executor: Executor) -> None:
    """Fit ``statistic`` on every item's references: in parts on the workers (one part per job)
    when it fits in parts (:class:`~capmetrics.components.protocols.FitsInParts`), the executor is a local
    pool or a running Dask cluster of enough jobs (2 for parts in integer form,
    :class:`~capmetrics.components.protocols.CountsInParts`, else :data:`FIT_IN_PARTS_MIN_JOBS`) and there
    are at least :data:`FIT_IN_PARTS_MIN` distinct reference sets (the same fitted state as
    fitting whole), else here. Equal reference sets go to the same part, so no part tokenises
    what another part does. The workers get the references with the statistic (forked workers
    inherit them) and each part as item positions."""
    compact = supports(statistic, CountsInParts)
    pooled = executor.kind == "processes" or (executor.kind == "dask" and executor.address)
    enough_jobs = executor.jobs >= (2 if compact else FIT_IN_PARTS_MIN_JOBS)
    in_parts = compact or supports(statistic, FitsInParts)
    if not (pooled and enough_jobs and in_parts and len(references) >= FIT_IN_PARTS_MIN):
        statistic.fit(references)
        return
    sets: dict[tuple[str, ...], int] = {}
    set_of = [sets.setdefault(tuple(r), len(sets)) for r in references]
    if len(sets) < FIT_IN_PARTS_MIN:
        statistic.fit(references)
        return
    grouped = sorted(range(len(references)), key=set_of.__getitem__)
    size = -(-len(grouped) // executor.jobs)
    parts = (
        (range(a, min(a + size, len(grouped))), grouped[a : a + size])
        for a in range(0, len(grouped), size)
    )
    states = list(
        iter_stream(_fit_part, (statistic, references, compact), parts, executor, per_item=False)
    )
    if compact:
        cast(CountsInParts, statistic).fit_counts(states)
    else:
        cast(FitsInParts, statistic).fit_states(states)


def compare_items(
    statistic: Statistic,
    items: Sequence[tuple[Sequence[str], Sequence[str]]],
    executor: Executor | None = None,
    while_running: Callable[[], None] | None = None,
) -> list[StatResult]:
    """Run ``statistic.compare(candidates, references)`` for every item on ``executor``.

    The statistic is first fitted on all the items' references (e.g. CIDEr-D's document
    frequencies), in this process, so every worker uses the same fitted state. A permutation
    statistic whose pooled matrices need a model (embeddings, anything on a GPU) builds them
    here in large batches; the workers get only the matrices and a model-free copy of the
    statistic, so they never load torch or touch CUDA.

    Local processes are sized to the work (:func:`sized`: capped at the cores and the chunks,
    this process when the items are too few). ``while_running`` is this process's own work, run
    once while the workers run the items (after them where there are none).
    """
    lists = [(list(c), list(r)) for c, r in items]
    executor = sized(executor or Executor(), len(lists))
    keep_freed_memory_if_owned()
    with frozen():  # in the capmetrics command: the items' lists live until the end
        return _compare_items(statistic, lists, executor, while_running)


def _compare_items(
    statistic: Statistic,
    lists: list[tuple[list[str], list[str]]],
    executor: Executor,
    while_running: Callable[[], None] | None,
) -> list[StatResult]:
    if isinstance(statistic, PermutationStatistic) and statistic.tests_in_parent:
        fit_statistic(statistic, [r for _, r in lists], executor)
        with single_threaded_blas():
            out = _counted(
                (
                    statistic.compare_pooled(chunk)
                    for _, chunk in pooled_chunks(statistic, lists, executor)
                ),
                len(lists),
            )
        if while_running is not None:
            while_running()
        return out
    if not lists:
        if while_running is not None:
            while_running()
        return []
    with started(executor) as ready:  # a LocalCluster starts while this process fits and embeds
        fit_statistic(statistic, [r for _, r in lists], executor)
        if isinstance(statistic, PermutationStatistic) and statistic.pooled_in_parent:
            chunks = pooled_chunks(statistic, lists, executor)
            first = next(chunks)  # the first block's matrices (embeddings) while the cluster starts
            return _counted(
                iter_stream(
                    _compare_pooled_chunk,
                    statistic.for_workers(),
                    itertools.chain([first], chunks),
                    ready(),
                    while_running=while_running,
                ),
                len(lists),
            )
        running = ready()
        spans = ((r, [lists[i] for i in r]) for r in running.chunks(len(lists)))
        return _counted(
            iter_stream(
                _compare_chunk, statistic, spans, running, while_running=while_running, source=lists
            ),
            len(lists),
        )


def _counted(parts: Iterator[list[R]], total: int) -> list[R]:
    """The parts' results joined in order, each part reported to :func:`capmetrics.engine.progress.work`
    as ``total`` items (from the first part on: the work before it, embedding, reports itself)."""
    from capmetrics.engine.progress import work

    out: list[R] = []
    first = next(parts, None)  # embeddings and fits report their own work before the items'
    if first is None:
        return out
    out.extend(first)
    with work(total, "items") as advance:
        advance(len(first))
        for part in parts:
            out.extend(part)
            advance(len(part))
    return out


def evaluate_statistic(
    component: Statistic,
    dataset: Dataset,
    name: str | None = None,
    executor: Executor | None = None,
) -> MetricResult:
    """A statistic's :class:`MetricResult` on a dataset, items run on ``executor``.

    The corpus value is the mean over the items where the statistic is defined; ``details``
    lists the undefined items with the reason, counts the p-value methods, and holds the
    asymptotically exact harmonic mean p-value of the per-item p-values (``hmp``).
    """
    from capmetrics.components.pvalues import harmonic_mean_p, prepare
    from capmetrics.engine.results import MetricResult
    from capmetrics.engine.scoring import run_signature

    def while_running() -> None:  # this process's own work while the workers run the items
        signature.append(run_signature(component, dataset))  # it needs the fitted state
        if getattr(component, "p_value", "none") != "none":
            prepare()

    signature: list[dict[str, str]] = []
    stats = compare_items(
        component,
        [(item.candidates, item.references) for item in dataset],
        executor,
        while_running=while_running,
    )
    values = np.array([s.value for s in stats], dtype=float)
    p = [s.p_value for s in stats]
    p_values = (
        None
        if all(x is None for x in p)
        else np.array([np.nan if x is None else x for x in p], dtype=float)
    )
    defined = np.isfinite(values)
    details: dict[str, Any] = {
        "undefined": [
            {"item": item.id, "problem": s.details.get("undefined", "not finite")}
            for item, s, ok in zip(dataset, stats, defined)
            if not ok
        ],
        "p_methods": dict(Counter(s.details["p_method"] for s in stats if "p_method" in s.details)),
    }
    if p_values is not None and np.isfinite(p_values).any():
        details["hmp"] = float(harmonic_mean_p(p_values[np.isfinite(p_values)]))
    corpus = float(values[defined].mean()) if defined.any() else float("nan")
    return MetricResult(
        name or component.spec,
        component.spec,
        component.kind,
        bool(component.higher_is_better),
        corpus,
        dataset.ids,
        values,
        [np.array([v]) for v in values],
        signature[0] if signature else run_signature(component, dataset),
        p_values=p_values,
        details=details,
    )
