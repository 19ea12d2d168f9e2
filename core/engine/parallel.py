"""Executors and statistics over items, under one name (``capmetrics.parallel`` before).

The code lives where its concern is:

- :mod:`capmetrics.engine.executors`: :class:`Executor`, sizing ``--jobs`` to the work,
  :func:`map_chunks` / :func:`map_stream` / :func:`iter_stream`, the local process pool;
- :mod:`capmetrics.engine.dask_executor`: the Dask path (:func:`started`);
- :mod:`capmetrics.engine.workers`: what runs in the worker processes and how they are tuned
  (:func:`single_threaded_blas`, :class:`ExecutorError`);
- :mod:`capmetrics.engine.statistics`: :func:`fit_statistic`, :func:`compare_items`,
  :func:`pooled_chunks`, :func:`evaluate_statistic`.

This module re-exports their public names. Settings (``PROCESS_MIN_ITEMS``,
``FIT_IN_PARTS_MIN``, ...) are read from the module that defines them: change them there.
"""

from __future__ import annotations

from capmetrics.engine.dask_executor import DASK_TASK_ITEMS, LOCAL_CLUSTER_CONFIG, started
from capmetrics.engine.executors import (
    EXECUTORS,
    FORK_UNSAFE_LIBRARIES,
    FORKSERVER_PRELOAD,
    PROCESS_MIN_ITEMS,
    Chunk,
    Executor,
    ExecutorName,
    available_cores,
    iter_stream,
    map_chunks,
    map_stream,
    sized,
)
from capmetrics.engine.statistics import (
    FIT_IN_PARTS_MIN,
    FIT_IN_PARTS_MIN_JOBS,
    POOLED_BLOCK,
    compare_items,
    evaluate_statistic,
    fit_statistic,
    pooled_chunks,
)
from capmetrics.engine.workers import ExecutorError, single_threaded_blas

__all__ = [
    "DASK_TASK_ITEMS",
    "EXECUTORS",
    "FIT_IN_PARTS_MIN",
    "FIT_IN_PARTS_MIN_JOBS",
    "FORKSERVER_PRELOAD",
    "FORK_UNSAFE_LIBRARIES",
    "LOCAL_CLUSTER_CONFIG",
    "POOLED_BLOCK",
    "PROCESS_MIN_ITEMS",
    "Chunk",
    "Executor",
    "ExecutorError",
    "ExecutorName",
    "available_cores",
    "compare_items",
    "evaluate_statistic",
    "fit_statistic",
    "iter_stream",
    "map_chunks",
    "map_stream",
    "pooled_chunks",
    "single_threaded_blas",
    "sized",
    "started",
]
