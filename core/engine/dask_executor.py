"""The Dask path of the executors: a LocalCluster or a running scheduler, used as it is.

A LocalCluster (no address) is started with :data:`LOCAL_CLUSTER_CONFIG`, in a thread while the
caller does its own part first (:func:`started`); ``shared`` is scattered to every worker once;
consecutive chunks go as one task (:data:`DASK_TASK_ITEMS`), pickled, and come back in order
through :func:`capmetrics.engine.executors.in_order`. What a task runs in the worker is
:func:`capmetrics.engine.workers.run_pickled_chunks`.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from capmetrics.engine.executors import FORKSERVER_PRELOAD, Chunk, Executor, in_order, items_text
from capmetrics.engine.workers import ExecutorError, run_pickled_chunks

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
            preload=list(FORKSERVER_PRELOAD),
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


def map_dask(
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
                    f"{where} lost a worker while {items_text(running)} were running or queued "
                    f"({type(err).__name__}: {err}); the run was stopped and no results were kept"
                )
            if isinstance(err, (OSError, TimeoutError)):
                return ExecutorError(
                    f"lost the connection to the Dask scheduler while {items_text(running)} "
                    f"were running: {err}"
                )
            return None

        shared_future = client.scatter(shared, broadcast=True)
        workers = max(1, len(client.scheduler_info().get("workers", {})) or executor.jobs)
        # the items go pickled: as lists, Dask would walk every string of them looking for futures
        for results in in_order(
            lambda group: client.submit(
                run_pickled_chunks,
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
