"""Score a JSONL file too large for memory: the file is read in chunks, twice.

Pass 1 reads every chunk, validates it (every problem of the file is reported before anything
is scored, as when the file is loaded whole) and, for metrics with corpus statistics (CIDEr-D's
document frequencies), computes each chunk's part of them (``fit_state``), which are summed
(``merge_fit_states``, then ``fit_states``). Pass 2 scores chunk after chunk on the executor
(in this process, on local processes or on Dask workers) and joins the parts (``merge_scores``:
BLEU's corpus value from the summed n-gram statistics, the others' as the mean). Only the
chunks in flight and the per-candidate values are in memory, and the values are the bytes that
scoring the file whole gives.

Metrics that can stream are the distances that take part in the statistics protocol
(:mod:`capmetrics.components.protocols`):
:class:`~capmetrics.components.protocols.ScoresInParts`, and
:class:`~capmetrics.components.protocols.FitsInParts` as well when they have corpus statistics
(the n-gram family: BLEU, ROUGE-L, CIDEr-D, CIDEr; chrF from its contrib package); any other
metric is refused with the reason. A run with a metric whose parts need a model
(:func:`~capmetrics.components.protocols.parts_in_parent`: BERTScore) scores its chunks in this
process, whatever the executor: workers never load the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from capmetrics.components.base import (
    METRIC_KINDS,
    Component,
    Distance,
    Scores,
    scores_with_images,
)
from capmetrics.components.protocols import (
    FitsInParts,
    ScoresInParts,
    fits_in_parts,
    parts_in_parent,
    supports_parts,
    why_unsupported,
)
from capmetrics.components.spec import Spec
from capmetrics.data.loaders import EMPTY_CANDIDATE_POLICIES, EmptyCandidates, OnError, iter_jsonl
from capmetrics.data.model import Dataset, ItemId, Problem
from capmetrics.engine.executors import Executor, iter_stream, sized
from capmetrics.engine.prepared import run_scope
from capmetrics.engine.results import Results
from capmetrics.errors import DataError, MetricError, component_errors
from capmetrics.io.models import installed_version

#: JSONL inputs larger than this are streamed even without ``--chunk-size``.
AUTO_STREAM_BYTES = 256 * 2**20
#: Items per chunk when streaming was not given a chunk size.
DEFAULT_CHUNK_ITEMS = 10_000


def should_stream(path: str | Path, input_format: str, chunk_size: int | None) -> bool:
    """Stream when a chunk size is given, or for a JSONL file over :data:`AUTO_STREAM_BYTES`."""
    path = Path(path)
    jsonl = input_format == "jsonl" or (input_format == "auto" and path.suffix == ".jsonl")
    if chunk_size is not None:
        if not jsonl:
            raise MetricError(
                f"--chunk-size streams JSONL files only; {path} is not JSONL (--input-format jsonl)"
            )
        return True
    return jsonl and path.is_file() and path.stat().st_size > AUTO_STREAM_BYTES


def streamable(component: Component) -> str | None:
    """Why ``component`` cannot be scored in chunks, or None when it can."""
    if scores_with_images(component):
        return (
            f"{component.spec} scores captions with their images, which streaming does not read "
            "(a JSONL read in chunks gives texts only): score it without --chunk-size, with "
            "--images for relative image paths"
        )
    if not isinstance(component, Distance):
        return (
            f"{component.spec} is a {component.kind}; streaming scores distances only "
            "(multi-candidate statistics need their whole corpus: score without --chunk-size)"
        )
    if isinstance(component, ScoresInParts) and not supports_parts(component):  # it declines
        return (
            f"{component.spec} cannot be scored in chunks: "
            f"{why_unsupported(component, ScoresInParts)}; score it without --chunk-size"
        )
    if not supports_parts(component):
        return (
            f"{component.spec} has no score_part/merge_scores, so its corpus value cannot be "
            "joined from chunks; score it without --chunk-size"
        )
    if type(component).fit is not Distance.fit and not fits_in_parts(component):
        return (
            f"{component.spec} has corpus statistics (fit) without "
            "fit_state/merge_fit_states/fit_states, so they cannot be fitted from chunks; score it "
            "without --chunk-size"
        )
    return None


def _scored_references(items: Sequence[Any]) -> list[list[str]]:
    """The reference list that goes with each candidate: what a distance's corpus statistics are
    computed over when the items are scored whole (CIDEr-D counts an image once per candidate)."""
    return [list(item.references) for item in items for _ in item.candidates]


def _fit_part(components: Sequence[FitsInParts], references: list[list[str]]) -> list[Any]:
    with run_scope():
        return [c.fit_state(references) for c in components]


def _score_part(
    components: Sequence[ScoresInParts], items: list[tuple[tuple[str, ...], tuple[str, ...]]]
) -> list[tuple[Scores, Any]]:
    cands = [c for candidates, _ in items for c in candidates]
    refs = [list(r) for candidates, r in items for _ in candidates]
    with run_scope():  # the metrics of a chunk share its tokens
        return [c.score_part(cands, refs) for c in components]


class _Scan:
    """What pass 1 learns about the file."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.items = 0
        self.candidates = 0
        self.nrefs: set[int] = set()
        self.empties: list[tuple[ItemId, int]] = []
        self.chunks = 0

    def add(self, part: Dataset) -> Dataset:
        self.problems.extend(part.skipped)
        self.items += len(part)
        self.candidates += part.n_candidates
        self.nrefs.update(len(item.references) for item in part)
        self.empties.extend(part.empty_candidates())
        self.chunks += 1
        return part

    @property
    def bad_ids(self) -> set[Any]:
        return {p.item for p in self.problems if p.item is not None}


def score_file(
    path: str | Path,
    metrics: Sequence[str | Component],
    *,
    chunk_size: int | None = None,
    definitions: Mapping[str, Spec] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    executor: Executor | None = None,
    empty_candidates: EmptyCandidates = "score",
    on_error: OnError = "raise",
) -> Results:
    """:func:`capmetrics.score` of a JSONL file, read in chunks of ``chunk_size`` lines
    (default :data:`DEFAULT_CHUNK_ITEMS`); same values, bounded memory.

    Args:
        path: the JSONL file (``{"id", "references", "candidates"}`` per line).
        metrics: specs of streamable distances (see :func:`streamable`).
        chunk_size: lines per chunk (and per task on the executor).
        executor: where the chunks are scored; the values do not depend on it.
        empty_candidates, on_error: as for :func:`capmetrics.data.loaders.load_dataset`.

    Raises:
        DataError: problems in the file (all of them, before anything is scored).
        MetricError: a metric that cannot stream, or empty candidates it does not score.
    """
    # the registry sits above core (it loads the plugins): names are resolved per call
    from capmetrics.engine.scoring import (
        check_empty_candidates,
        signature_with,
        warn_empty_candidates,
    )
    from capmetrics.registry.compose import compose

    if empty_candidates not in EMPTY_CANDIDATE_POLICIES:
        raise MetricError(f"empty_candidates must be 'score' or 'error', got {empty_candidates!r}")
    size = DEFAULT_CHUNK_ITEMS if chunk_size is None else chunk_size
    if size < 1:
        raise MetricError(f"--chunk-size must be at least 1, got {size}")
    asked = executor or Executor()
    executor = sized(
        asked, None
    )  # pass 1: capped at the cores (the file's length is not known yet)
    built: list[tuple[str, Any]] = []  # streamable distances (ScoresInParts)
    for m in metrics:
        name = m if isinstance(m, str) else m.spec
        with component_errors(name):
            component = compose(m, METRIC_KINDS, definitions=definitions)
            problem = streamable(component)
            if problem:
                raise MetricError(problem)
            built.append((name, component))
    if any(parts_in_parent(c) for _, c in built):  # their parts need a model: this process
        asked = executor = Executor()
    source = str(path)
    fitting: list[Any] = [c for _, c in built if fits_in_parts(c)]
    signatures: list[dict[str, str]] = []

    # pass 1: validate every chunk; corpus statistics per chunk on the executor
    scan = _Scan()

    def references() -> Iterator[tuple[range, list[Any]]]:
        for part in iter_jsonl(path, size, empty_candidates, seen=set()):
            scan.add(part)
            yield range(scan.items - len(part), scan.items), _scored_references(part.items)

    states = _fold_states(fitting, references(), executor)
    if scan.problems and (on_error == "raise" or any(p.item is None for p in scan.problems)):
        raise DataError(scan.problems, header=f"cannot load {source}")
    bad = scan.bad_ids
    if fitting and bad:  # skipped duplicates drop items of earlier chunks: fit again without them

        def kept_references() -> Iterator[tuple[range, list[Any]]]:
            for k, part in enumerate(iter_jsonl(path, size, empty_candidates, seen=set())):
                yield (
                    range(k, k + 1),
                    _scored_references([item for item in part if item.id not in bad]),
                )

        states = _fold_states(fitting, kept_references(), executor)
    if not scan.items:
        raise MetricError("the dataset has no items to score")
    for _, component in built:
        check_empty_candidates(component, scan.empties)
    warn_empty_candidates(scan.empties)
    for _, component in built:  # as the in-memory run signs: before any corpus statistic is fixed
        signatures.append(signature_with(component, scan.nrefs))
    for component, state in zip(fitting, states):
        component.fit_states([state])

    # pass 2: score chunk after chunk
    ids: list[ItemId] = []
    offsets = [0]

    def parts() -> Iterator[tuple[range, list[Any]]]:
        for k, part in enumerate(iter_jsonl(path, size, empty_candidates, seen=None)):
            kept = [item for item in part if item.id not in bad]
            start = len(ids)
            for item in kept:
                ids.append(item.id)
                offsets.append(offsets[-1] + len(item.candidates))
            if progress:
                progress(f"chunk {k + 1}/{scan.chunks}", k, scan.chunks)
            yield range(start, len(ids)), [(item.candidates, item.references) for item in kept]

    executor = sized(asked, scan.items, scan.chunks)  # pass 2: sized to the work
    scored = list(
        iter_stream(_score_part, [c for _, c in built], parts(), executor, per_item=False)
    )
    if not ids:
        raise MetricError("the dataset has no items to score")
    results = []
    from capmetrics.engine.scoring import distance_result

    for k, (name, component) in enumerate(built):
        with component_errors(name):
            merged = component.merge_scores([chunk[k] for chunk in scored])
            results.append(distance_result(component, name, merged, ids, offsets, signatures[k]))
    if progress:
        progress("", scan.chunks, scan.chunks)
    return Results(
        source,
        len(ids),
        offsets[-1],
        results,
        scan.problems,
        installed_version("capmetrics"),
        empty_candidates=[e for e in scan.empties if e[0] not in bad],
    )


def _fold_states(
    fitting: list[Any], chunks: Iterator[tuple[range, list[Any]]], executor: Executor
) -> list[Any]:
    """Each fitting component's ``fit_state`` of every chunk, summed as they arrive (the
    chunks are always read, to validate them, even when nothing needs fitting)."""
    if not fitting:
        for _ in chunks:
            pass
        return []
    totals: list[Any] = [None] * len(fitting)
    for chunk_states in iter_stream(_fit_part, fitting, chunks, executor, per_item=False):
        totals = [
            state if total is None else c.merge_fit_states([total, state])
            for c, total, state in zip(fitting, totals, chunk_states)
        ]
    return totals
