"""Statistics over items: fitted once, then compared item by item on an executor.

:func:`compare_items` fits a statistic on every item's references (in parts on the workers where
it declares :class:`~capmetrics.components.protocols.FitsInParts` or
:class:`~capmetrics.components.protocols.CountsInParts`, :func:`fit_statistic`), builds the
pooled matrices that need a model here (:func:`pooled_chunks`), and runs the per-item work on
the executor (:mod:`capmetrics.engine.executors`); :func:`evaluate_statistic` makes a
:class:`~capmetrics.engine.results.MetricResult` of it. The values never depend on the executor.

In the ``capmetrics`` command the run's lists are kept out of the collector's walks and freed
memory is kept for reuse (:mod:`capmetrics.runtime.collector`, :mod:`capmetrics.runtime.allocator`:
both act only in the command's own process); the statistics run with one BLAS thread, restored
after (:func:`~capmetrics.engine.workers.single_threaded_blas`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
from capmetrics.components.base import Statistic, StatResult
from capmetrics.components.permutation import PermutationStatistic, PooledItem, with_pooled
from capmetrics.components.protocols import (
    CountsInParts,
    FitsInParts,
    parts_in_parent,
    supports,
)
from capmetrics.engine.dask_executor import started
from capmetrics.engine.executors import Chunk, Executor, iter_stream, sized
from capmetrics.engine.workers import single_threaded_blas
from capmetrics.runtime.allocator import keep_freed_memory_if_owned
from capmetrics.runtime.collector import frozen

if TYPE_CHECKING:
    from capmetrics.data.model import Dataset
    from capmetrics.engine.results import MetricResult

R = TypeVar("R")


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


def pooled_chunks(
    statistic: PermutationStatistic,
    items: Sequence[tuple[list[str], list[str]]],
    executor: Executor,
) -> Iterator[Chunk]:
    """The items with their pooled matrices, built here block by block (:data:`POOLED_BLOCK`
    items per :meth:`~capmetrics.components.permutation.PermutationStatistic.pooled_many`
    call), cut into the executor's chunks."""
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
    """Fit ``statistic`` on every item's references: in parts on the workers (one part per job) when
    it fits in parts (:class:`~capmetrics.components.protocols.FitsInParts`), the executor is a
    local pool or a running Dask cluster of enough jobs (2 for parts in integer form,
    :class:`~capmetrics.components.protocols.CountsInParts`, else :data:`FIT_IN_PARTS_MIN_JOBS`) and
    there are at least :data:`FIT_IN_PARTS_MIN` distinct reference sets (the same fitted state as
    fitting whole), else here. Equal reference sets go to the same part, so no part tokenises what
    another part does. The workers get the references with the statistic (forked workers inherit
    them) and each part as item positions. A statistic whose parts need a model
    (:func:`~capmetrics.components.protocols.parts_in_parent`) is fitted here."""
    compact = supports(statistic, CountsInParts)
    pooled = executor.kind == "processes" or (executor.kind == "dask" and executor.address)
    enough_jobs = executor.jobs >= (2 if compact else FIT_IN_PARTS_MIN_JOBS)
    in_parts = (compact or supports(statistic, FitsInParts)) and not parts_in_parent(statistic)
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
    """The parts' results joined in order, each part reported to
    :func:`capmetrics.engine.progress.work` as ``total`` items (from the first part on: the work
    before it, embedding, reports itself)."""
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
