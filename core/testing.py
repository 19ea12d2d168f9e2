"""The conformance kit: one battery of checks for any capmetrics component, bundled or
third-party, in the spirit of scikit-learn's ``check_estimator``.

>>> from capmetrics.testing import check_component
>>> check_component("bleu-4")                              # doctest: +SKIP
['check_spec_round_trip', 'check_signature_fresh_process', ...]

In a plugin's test suite::

    from capmetrics.testing import parametrize_with_checks

    @parametrize_with_checks(["chrf", "over-candidates(distance=chrf, reduce=max)"])
    def test_conformance(component, check):
        check(component)

Each check is a named function ``check_*(component, context)`` that raises
:class:`CheckFailed` with what a plugin author has to fix. The checks are listed in
docs/plugins/testing.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pickle
import random
import re
import subprocess
import sys
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from capmetrics.components.base import (
    METRIC_KINDS,
    Aggregator,
    Component,
    ImageTextMetric,
    ImageTextModel,
    Tokenizer,
    init_hints,
    scores_with_images,
    union_args,
)
from capmetrics.data.model import Dataset, Item
from capmetrics.engine.results import Results
from capmetrics.errors import CapmetricsError, InternalError
from capmetrics.io.strict_json import loads_strict

SAMPLE = Path(__file__).resolve().parent / "sample" / "flickr8k_expert_sample.jsonl"


class CheckFailed(AssertionError):
    """A component failed a conformance check; the message says what to fix."""

    def __init__(self, check: str, spec: str, problem: str) -> None:
        self.check, self.spec, self.problem = check, spec, problem
        super().__init__(f"{check} failed for {spec!r}: {problem}")


@dataclass
class CheckContext:
    """What the checks share: the dataset they score and options of the run."""

    dataset: Dataset
    executors: tuple[str, ...] = ("serial", "processes", "dask")
    fresh_process: bool = True
    _built: dict[str, Component] = field(default_factory=dict)
    _scored: dict[str, Results] = field(default_factory=dict)

    def build(self, spec: str) -> Component:
        """The component of ``spec``, built once per context (JVMs and models load once)."""
        if spec not in self._built:
            from capmetrics.registry.compose import compose

            self._built[spec] = compose(spec)
        return self._built[spec]

    def results(self, spec: str) -> Results:
        """The component's results on the context's dataset, computed once."""
        if spec not in self._scored:
            self._scored[spec] = _score(self.build(spec), self.dataset)
        return self._scored[spec]


def default_dataset(n_items: int = 8) -> Dataset:
    """The first ``n_items`` items of the bundled Flickr8k-Expert sample."""
    from capmetrics.data.loaders import load_dataset

    data = load_dataset(SAMPLE)
    return Dataset(list(data.items[:n_items]), source=data.source)


def _score(component: Component, dataset: Dataset, executor: Any = None) -> Results:
    from capmetrics.engine.scoring import score

    return score(with_images(component, dataset), [component], executor=executor)


def with_images(component: Component, dataset: Dataset) -> Dataset:
    """``dataset`` as a component that scores with images sees it: each item without an image
    gets one of the kit's drawn images (:func:`_toy_images`), chosen by its id, so that an item
    keeps its image whatever the order of the items. Other components get ``dataset`` itself."""
    if not scores_with_images(component) or all(it.image is not None for it in dataset):
        return dataset
    import zlib

    images = _toy_images()
    items = [
        it
        if it.image is not None
        else dataclasses.replace(it, image=images[zlib.crc32(repr(it.id).encode()) % len(images)])
        for it in dataset
    ]
    return Dataset(items, source=dataset.source, skipped=list(dataset.skipped))


# ----------------------------------------------------------------------------------------------
# the checks
# ----------------------------------------------------------------------------------------------
CHECKS: dict[str, tuple[tuple[str, ...], Callable[[str, CheckContext], None]]] = {}


def _check(
    *kinds: str,
) -> Callable[[Callable[[str, CheckContext], None]], Callable[[str, CheckContext], None]]:
    def add(func: Callable[[str, CheckContext], None]) -> Callable[[str, CheckContext], None]:
        CHECKS[func.__name__] = (kinds, func)
        return func

    return add


def _fail(check: str, spec: str, problem: str) -> CheckFailed:
    return CheckFailed(check, spec, problem)


@_check()
def check_spec_round_trip(spec: str, ctx: CheckContext) -> None:
    """``compose(c.spec)`` rebuilds an equal component whose spec prints the same."""
    from capmetrics.registry.compose import compose

    c = ctx.build(spec)
    again = compose(c.spec)
    if again.spec != c.spec:
        raise _fail(
            "check_spec_round_trip",
            spec,
            f"compose({c.spec!r}).spec is {again.spec!r}; the "
            "constructor must store each parameter unchanged under its own name",
        )
    if again != c:
        raise _fail(
            "check_spec_round_trip",
            spec,
            f"compose({c.spec!r}) has other parameters than the "
            f"original: {again.get_params()} != {c.get_params()}",
        )


@_check()
def check_signature_fresh_process(spec: str, ctx: CheckContext) -> None:
    """The signature is the same in a new Python process (no ids, times or random state in it);
    the component must be installed as an entry point for a new process to find it."""
    if not ctx.fresh_process:
        return
    here = ctx.build(spec).signature()
    code = (
        "import json, sys; from capmetrics import compose; "
        "print(json.dumps(compose(sys.argv[1]).signature()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, spec], capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise _fail(
            "check_signature_fresh_process",
            spec,
            f"a new process could not build it: {last} "
            "(is the plugin installed with an entry point in group 'capmetrics'?)",
        )
    there = json.loads(proc.stdout.strip().splitlines()[-1])
    if there != here:
        diff = {
            k: (here.get(k), there.get(k))
            for k in set(here) | set(there)
            if here.get(k) != there.get(k)
        }
        raise _fail(
            "check_signature_fresh_process", spec, f"signature differs in a new process: {diff}"
        )


@_check()
def check_pickle(spec: str, ctx: CheckContext) -> None:
    """The component pickles (process and Dask executors send it to workers) and scores the same."""
    c = ctx.build(spec)
    try:
        copy = pickle.loads(pickle.dumps(c))
    except Exception as err:  # noqa: BLE001 - any pickling failure is what the check reports
        raise _fail(
            "check_pickle",
            spec,
            f"pickling fails ({type(err).__name__}: {err}); keep "
            "unpicklable state (processes, models) out of __getstate__ or load it lazily",
        ) from err
    if copy.spec != c.spec:
        raise _fail("check_pickle", spec, f"the unpickled component's spec is {copy.spec!r}")
    if (
        c.kind in METRIC_KINDS
        and _score(copy, ctx.dataset).to_json() != ctx.results(spec).to_json()
    ):
        raise _fail("check_pickle", spec, "the unpickled component gives other values")


#: A value no choice parameter accepts.
NOT_A_CHOICE = "not-a-choice"


def choice_parameters(cls: type[Component]) -> dict[str, tuple[Any, ...]]:
    """The constructor parameters of ``cls`` annotated with a ``Literal`` or an ``Enum`` (alone
    or in a union), each with the values it accepts."""
    import enum
    import typing

    hints = init_hints(cls)
    out: dict[str, tuple[Any, ...]] = {}
    for key in cls.constructor_parameters():
        allowed: list[Any] = []
        for option in union_args(hints.get(key, Any)):
            if typing.get_origin(option) is typing.Literal:
                allowed += typing.get_args(option)
            elif isinstance(option, type) and issubclass(option, enum.Enum):
                allowed += [m.value for m in option]
        if allowed:
            out[key] = tuple(allowed)
    return out


@_check()
def check_choice_parameters(spec: str, ctx: CheckContext) -> None:
    """Every ``Literal``/``Enum`` parameter refuses a value outside its choices with a
    ``SpecError`` naming the parameter, and builds (or refuses with a capmetrics error) each
    of its choices. ``compose`` does this for every component; the check catches an
    annotation it cannot read (e.g. a forward reference that does not resolve)."""
    import typing

    from capmetrics.components.spec import Spec, parse
    from capmetrics.errors import SpecError
    from capmetrics.registry.compose import compose

    c = ctx.build(spec)
    try:
        typing.get_type_hints(type(c).__init__)
    except Exception as err:  # noqa: BLE001 - any failure leaves compose blind to the annotations
        raise _fail(
            "check_choice_parameters",
            spec,
            f"the constructor's annotations do not resolve "
            f"({type(err).__name__}: {err}), so compose cannot validate its parameters; import "
            "the annotated types at module level",
        ) from err
    base = parse(c.spec)
    for key, allowed in choice_parameters(type(c)).items():
        args = tuple(a for a in base.args if a[0] != key)
        try:
            compose(Spec(base.name, (*args, (key, NOT_A_CHOICE)), called=True))
        except SpecError as err:
            if key not in str(err):
                raise _fail(
                    "check_choice_parameters",
                    spec,
                    f"the error for {key}={NOT_A_CHOICE} does not name the parameter: {err}",
                ) from err
        else:
            raise _fail(
                "check_choice_parameters",
                spec,
                f"{key}={NOT_A_CHOICE} is accepted though {key} "
                f"takes only {', '.join(map(repr, allowed))}; annotate it with a Literal that "
                "typing.get_type_hints can resolve",
            )
        for value in allowed:
            try:
                built = compose(Spec(base.name, (*args, (key, value)), called=True))
            except CapmetricsError:
                continue  # a choice that needs something missing here (a file, an extra) may say so
            except Exception as err:  # noqa: BLE001 - any other exception is what the check reports
                raise _fail(
                    "check_choice_parameters",
                    spec,
                    f"{key}={value!r} raises {type(err).__name__}: "
                    f"{err}; raise a SpecError for a combination that is not allowed",
                ) from err
            stored = getattr(built, key)
            if stored != value and getattr(stored, "value", None) != value:
                raise _fail(
                    "check_choice_parameters", spec, f"{key}={value!r} is stored as {stored!r}"
                )


#: A text parameter so named takes a local file or folder: ``*path*``, ``*file*``, ``*_dir``,
#: ``*folder*``, ``vectors``, ``df``.
_FILE_NAMED = re.compile(r"path|file|_dir$|^dir$|folder|^vectors$|^df$")


def _takes_text(tp: Any) -> bool:
    """Whether the annotation ``tp`` admits a string (or a list or tuple of strings)."""
    for option in union_args(tp):
        if option is Any or option is str or option is os.PathLike:
            return True
        if typing.get_origin(option) in (list, tuple, Sequence) and str in typing.get_args(option):
            return True
    return False


@_check()
def check_path_params_declared(spec: str, ctx: CheckContext) -> None:
    """A text parameter named like a file or folder (``*path*``, ``*file*``, ``*_dir``,
    ``*folder*``, ``vectors``, ``df``) is declared in ``path_params`` (or ``program_params``): a
    model file may then name it only inside its own folder (a folder it creates, such as a
    ``cache_dir``, too), and the signature shows ``<local>`` with the file's checksum."""
    cls = type(ctx.build(spec))
    hints = init_hints(cls)
    declared = set(cls.path_params) | set(cls.program_params)
    for name in cls.constructor_parameters():
        if name not in declared and _FILE_NAMED.search(name) and _takes_text(hints.get(name, Any)):
            raise _fail(
                "check_path_params_declared",
                spec,
                f"parameter {name!r} takes a file but is not in path_params (or program_params); "
                f"declare it: path_params = {(*cls.path_params, name)!r}, and give the file's "
                "checksum in signature_extra",
            )


@_check(*METRIC_KINDS)
def check_results_formats(spec: str, ctx: CheckContext) -> None:
    """JSON is strict and loads back equal; CSV has one row per value; the table renders."""
    res = ctx.results(spec)
    m = res.metrics[0]
    try:
        data = loads_strict(res.to_json())
    except (CapmetricsError, ValueError) as err:
        raise _fail(
            "check_results_formats",
            spec,
            f"to_json() is not strict JSON: {err}; put numbers, "
            "lists and dicts in Scores.details (numpy arrays are converted)",
        ) from err
    loaded = data["metrics"][0]
    if not _same(loaded["corpus"], m.corpus):
        raise _fail(
            "check_results_formats",
            spec,
            f"corpus {loaded['corpus']} in JSON, {m.corpus} in memory",
        )
    for i, entry in enumerate(loaded["items"]):
        if (
            not _same(entry["value"], m.item_values[i])
            or len(entry["candidates"]) != len(m.candidate_values[i])
            or not all(_same(a, b) for a, b in zip(entry["candidates"], m.candidate_values[i]))
        ):
            raise _fail(
                "check_results_formats", spec, f"item {entry['id']!r} does not load back equal"
            )
    rows = res.to_csv().splitlines()
    expected = 2 + len(m.item_ids) + sum(len(v) for v in m.candidate_values)
    if len(rows) != expected:
        raise _fail(
            "check_results_formats",
            spec,
            f"CSV has {len(rows)} lines, expected {expected} "
            "(header, corpus, one per item and one per candidate)",
        )
    if m.name not in res.to_table():
        raise _fail("check_results_formats", spec, "the table does not show the metric")


@_check(*METRIC_KINDS)
def check_item_permutation(spec: str, ctx: CheckContext) -> None:
    """Shuffling the items permutes item and candidate values; the corpus value is unchanged."""
    order = list(range(len(ctx.dataset)))
    random.Random(0).shuffle(order)
    shuffled = Dataset([ctx.dataset[i] for i in order], source=ctx.dataset.source)
    m, s = ctx.results(spec).metrics[0], _score(ctx.build(spec), shuffled).metrics[0]
    for new, old in enumerate(order):
        if not np.allclose(
            s.candidate_values[new], m.candidate_values[old], rtol=1e-9, atol=1e-12, equal_nan=True
        ):
            raise _fail(
                "check_item_permutation",
                spec,
                f"item {ctx.dataset[old].id!r} scores differently when "
                "the items come in another order (state leaking between items?)",
            )
    if not np.isclose(s.corpus, m.corpus, rtol=1e-9, atol=1e-12, equal_nan=True):
        raise _fail(
            "check_item_permutation",
            spec,
            f"corpus value {s.corpus} after shuffling, {m.corpus} before",
        )


@_check(*METRIC_KINDS)
def check_determinism(spec: str, ctx: CheckContext) -> None:
    """A second component built from the same spec gives the same bytes (seeded p-values)."""
    from capmetrics.registry.compose import compose

    if _score(compose(spec), ctx.dataset).to_json() != ctx.results(spec).to_json():
        raise _fail(
            "check_determinism",
            spec,
            "two runs give different results; seed every random "
            "choice from the component's parameters",
        )


@_check("statistic")
def check_executors(spec: str, ctx: CheckContext) -> None:
    """Serial, local processes and Dask give the same bytes."""
    from capmetrics.engine.parallel import Executor

    kinds = [k for k in ctx.executors if k != "dask" or _has_dask()]
    outputs = {
        k: _score(ctx.build(spec), ctx.dataset, Executor(k, jobs=2, chunk_size=2)).to_json()  # type: ignore[arg-type]
        for k in kinds
    }
    first = outputs[kinds[0]]
    for kind, text in outputs.items():
        if text != first:
            raise _fail(
                "check_executors", spec, f"the {kind} executor gives other values than {kinds[0]}"
            )


def _splits(n: int) -> list[tuple[int, int]]:
    """Consecutive parts of ``n`` items of unequal sizes, one of them empty."""
    cut = max(1, n // 3)
    return [(0, min(1, n)), (min(1, n), min(1, n)), (min(1, n), cut), (cut, n)]


def _crossed(value: Any, what: str, check: str, spec: str) -> Any:
    """``value`` as a worker or another rank receives it: checked as plain data, pickled."""
    from capmetrics.components.protocols import check_portable
    from capmetrics.errors import MetricError

    try:
        return pickle.loads(pickle.dumps(check_portable(value, what)))
    except MetricError as err:
        raise _fail(check, spec, f"{err}; parts cross process and rank boundaries") from err


def _equal_scores(a: Any, b: Any) -> bool:
    return np.array_equal(
        np.asarray(a.values), np.asarray(b.values), equal_nan=True
    ) and _same_float(a.corpus, b.corpus)


def _same_float(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or float(a) == float(b)


@_check(*METRIC_KINDS)
def check_merged_parts(spec: str, ctx: CheckContext) -> None:
    """A component of the statistics protocol (:mod:`capmetrics.components.protocols`) gives from
    parts of the corpus (of unequal sizes, one empty) exactly what it gives on the whole:
    ``score_part`` and ``merge_scores`` the same values and corpus value, also from the parts'
    summed statistics (what DDP ranks exchange); ``fit_state``/``merge_fit_states``/``fit_states``
    (and ``count_state``/``fit_counts``) the same fitted state as ``fit``. Every part is plain
    data and is pickled on the way, as to a worker. Other components pass."""
    from capmetrics.components.protocols import CountsInParts, FitsInParts, ScoresInParts, supports
    from capmetrics.registry.compose import compose

    name = "check_merged_parts"
    c = ctx.build(spec)
    scores, fits, counts = (supports(c, p) for p in (ScoresInParts, FitsInParts, CountsInParts))
    if not (scores or fits or counts):
        return
    if c.kind == "distance":
        cands, pair_refs, _ = ctx.dataset.flat_pairs()  # what a distance's corpus statistics count
        refs = [list(r) for r in pair_refs]
    else:
        cands, refs = (
            [],
            [list(item.references) for item in ctx.dataset],
        )  # a statistic fits on items
    parts = _splits(len(refs))
    whole: Any = compose(spec)  # a distance or a statistic, taking part in the protocol
    whole.fit(refs)
    if fits or counts:
        _check_fitted(name, spec, c, whole, refs, cands, parts, fits, counts)
    if scores:
        _check_scored_parts(name, spec, whole, cands, refs, parts, fits)


def _check_fitted(
    name: str,
    spec: str,
    c: Any,
    whole: Any,
    refs: list[list[str]],
    cands: list[str],
    parts: list[tuple[int, int]],
    fits: bool,
    counts: bool,
) -> None:
    """Fitting from parts (each way the component supports) fixes what ``fit`` on the whole does."""
    from capmetrics.components.protocols import CountsInParts, FitsInParts
    from capmetrics.registry.compose import compose

    ways: list[tuple[str, Any]] = []
    if fits:
        states = [
            _crossed(c.fit_state(refs[a:b]), f"fit_state of references[{a}:{b}]", name, spec)
            for a, b in parts
        ]
        one = cast(FitsInParts, compose(spec))
        one.fit_states(pickle.loads(pickle.dumps(states)))
        ways.append(("fit_states of the parts", one))
        folded = _crossed(
            c.merge_fit_states(pickle.loads(pickle.dumps(states))), "merge_fit_states", name, spec
        )
        two = cast(FitsInParts, compose(spec))
        two.fit_states([folded])
        ways.append(("fit_states of merge_fit_states", two))
    if counts:
        states = [
            _crossed(c.count_state(refs[a:b]), f"count_state of references[{a}:{b}]", name, spec)
            for a, b in parts
        ]
        three = cast(CountsInParts, compose(spec))
        three.fit_counts(states)
        ways.append(("fit_counts of the count_state parts", three))
    for how, built in ways:
        if built.signature() != whole.signature():
            raise _fail(
                name,
                spec,
                f"{how} gives another fitted state than fit on the whole "
                f"corpus (signature {built.signature()} != {whole.signature()})",
            )
        if built.kind == "distance" and not _equal_scores(
            built.score(cands, refs), whole.score(cands, refs)
        ):
            raise _fail(
                name,
                spec,
                f"fitted by {how}, it scores otherwise than fitted by fit on the whole corpus",
            )


def _check_scored_parts(
    name: str,
    spec: str,
    whole: Any,
    cands: list[str],
    refs: list[list[str]],
    parts: list[tuple[int, int]],
    fits: bool,
) -> None:
    """``merge_scores`` of the parts' ``score_part`` equals ``score`` on the whole corpus."""
    from capmetrics.registry.compose import compose

    # a component with corpus statistics scores parts with the whole corpus's (streaming fits first)
    scorer: Any = whole if fits else compose(spec)  # it scores in parts (ScoresInParts)
    built: Any = compose(spec)
    expected = built.score(cands, refs)  # the whole corpus in one call, as capmetrics.score
    got = [
        _crossed(
            scorer.score_part(cands[a:b], refs[a:b]), f"score_part of items[{a}:{b}]", name, spec
        )
        for a, b in parts
    ]
    merged = scorer.merge_scores(got)
    if not np.array_equal(np.asarray(merged.values), np.asarray(expected.values), equal_nan=True):
        raise _fail(
            name,
            spec,
            "merge_scores of the parts gives other values than score on the whole corpus",
        )
    if not _same_float(merged.corpus, expected.corpus):
        raise _fail(
            name,
            spec,
            f"merge_scores of the parts gives the corpus value {merged.corpus}, "
            f"score on the whole corpus {expected.corpus}",
        )
    extras = [extra for _, extra in got]
    if all(e is None for e in extras):
        return
    if any(e is None for e in extras):
        raise _fail(name, spec, "score_part gives statistics for some parts and None for others")
    total = np.sum([np.asarray(e) for e in extras], axis=0)
    summed = scorer.merge_scores([(got[-1][0], total)]).corpus
    if not _same_float(summed, expected.corpus):
        raise _fail(
            name,
            spec,
            f"the corpus value from the summed statistics of the parts is "
            f"{summed}, not {expected.corpus}: score_part's statistics must add over parts "
            "(DDP ranks send the sums)",
        )


EDGE_TEXTS = {
    "cjk": "一只狗在草地上奔跑",
    "emoji": "a dog 🐕 runs on the grass 🌿",
    "combining": "a cafe\u0301 with a nai\u0308ve dog",
    "long": " ".join(["a dog runs on the grass"] * 200),
}


def edge_datasets(dataset: Dataset) -> dict[str, Dataset]:
    """Small datasets with the inputs that break components: one item, one reference,
    duplicate candidates, CJK/emoji/combining marks, a 1,000-token caption."""
    first, second = dataset[0], dataset[1]
    refs = first.references
    return {
        "one item": Dataset([first], source="<edge>"),
        "one reference": Dataset(
            [Item(it.id, it.references[:1], it.candidates) for it in (first, second)],
            source="<edge>",
        ),
        "duplicate candidates": Dataset(
            [Item(first.id, refs, (first.candidates[0],) * 3), second], source="<edge>"
        ),
        **{
            name: Dataset(
                [Item(f"edge-{name}", (*refs[:-1], text), (text, first.candidates[0])), second],
                source="<edge>",
            )
            for name, text in EDGE_TEXTS.items()
        },
    }


@_check(*METRIC_KINDS)
def check_edge_inputs(spec: str, ctx: CheckContext) -> None:
    """Edge inputs give values or a capmetrics error naming the problem, never another exception;
    an empty candidate is scored or refused as ``accepts_empty_candidates`` declares."""
    from capmetrics.engine.scoring import refuses_empty_candidates

    c = ctx.build(spec)
    accepts = refuses_empty_candidates(c) is None  # a wrapper accepts only if what it wraps does
    cases = edge_datasets(ctx.dataset)
    first = ctx.dataset[0]
    cases["empty candidate"] = Dataset(
        [Item(first.id, first.references, ("", first.candidates[0])), ctx.dataset[1]],
        source="<edge>",
    )
    for name, data in cases.items():
        try:
            res = _score(c, data)
        except InternalError as err:
            raise _fail(
                "check_edge_inputs",
                spec,
                f"{name}: {err}; raise a capmetrics.MetricError "
                "naming the item and the problem instead",
            ) from err
        except CapmetricsError as err:
            if name == "empty candidate" and accepts:
                raise _fail(
                    "check_edge_inputs",
                    spec,
                    f"declares accepts_empty_candidates but refused one: {err}",
                ) from err
            continue
        if name == "empty candidate" and not accepts:
            raise _fail(
                "check_edge_inputs",
                spec,
                "declares accepts_empty_candidates = False but scored one",
            )
        # a statistic may be undefined (NaN, with its reason) on one candidate; a distance never is
        values = res.metrics[0].candidate_values
        if c.kind == "distance" and not all(np.isfinite(v).all() for v in values):
            raise _fail("check_edge_inputs", spec, f"{name}: non-finite values {values}")


@_check("tokenizer")
def check_tokenizer_edge_inputs(spec: str, ctx: CheckContext) -> None:
    """A tokenizer returns a list of string tokens for every text, empty and odd ones included."""
    texts = ["", "   ", *EDGE_TEXTS.values(), ctx.dataset[0].candidates[0]]
    tokens = cast(Tokenizer, ctx.build(spec)).tokenize(texts)
    if len(tokens) != len(texts) or not all(
        isinstance(t, list) and all(isinstance(w, str) for w in t) for t in tokens
    ):
        raise _fail(
            "check_tokenizer_edge_inputs", spec, "tokenize() must return one list of str per text"
        )


def _toy_images() -> list[Any]:
    """Four small drawn images of different sizes and modes (Pillow only)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (180, 240, 3), dtype=np.uint8), "RGB")
    gray = Image.fromarray(rng.integers(0, 256, (300, 120), dtype=np.uint8), "L")
    rgba = Image.fromarray(rng.integers(0, 256, (64, 64, 4), dtype=np.uint8), "RGBA")
    return [rgb, gray, rgba, rgb.quantize(16)]


@_check("image-text-model")
def check_image_text_model(spec: str, ctx: CheckContext) -> None:
    """``embed_images``/``embed_texts`` give one finite row per input in one space, the same rows
    whatever else is in the batch, and (0, dim) for no input; ``overlong`` gives indices."""
    c = cast(ImageTextModel, ctx.build(spec))
    images = _toy_images()
    texts = ["A photo depicts a dog.", "", *EDGE_TEXTS.values()]
    img, txt = np.asarray(c.embed_images(images)), np.asarray(c.embed_texts(texts))
    if img.ndim != 2 or img.shape[0] != len(images) or txt.ndim != 2 or txt.shape[0] != len(texts):
        raise _fail(
            "check_image_text_model",
            spec,
            f"shapes {img.shape} for {len(images)} images, {txt.shape} for "
            f"{len(texts)} texts; expected one row each",
        )
    if img.shape[1] != txt.shape[1]:
        raise _fail(
            "check_image_text_model",
            spec,
            f"images ({img.shape[1]}) and texts ({txt.shape[1]}) must share a space",
        )
    if not (np.isfinite(img).all() and np.isfinite(txt).all()):
        raise _fail("check_image_text_model", spec, "non-finite features")
    alone = np.asarray(c.embed_images(images[1:2]))
    if not np.allclose(alone[0], img[1], atol=1e-5):
        raise _fail(
            "check_image_text_model",
            spec,
            "an image's features depend on the other images of the batch",
        )
    if not np.allclose(np.asarray(c.embed_texts(texts[:1]))[0], txt[0], atol=1e-5):
        raise _fail(
            "check_image_text_model",
            spec,
            "a text's features depend on the other texts of the batch",
        )
    if np.asarray(c.embed_texts([])).shape[0] != 0 or np.asarray(c.embed_images([])).shape[0] != 0:
        raise _fail("check_image_text_model", spec, "no input must give no rows")
    over = c.overlong(texts)
    if not all(isinstance(i, (int, np.integer)) and 0 <= i < len(texts) for i in over):
        raise _fail(
            "check_image_text_model",
            spec,
            f"overlong() must return indices into the texts, got {over}",
        )


@_check("image-text-metric")
def check_image_text_metric(spec: str, ctx: CheckContext) -> None:
    """``score_images`` gives one finite value per candidate, each the same whatever else is in
    the call; :func:`capmetrics.score` refuses an item without an image (a DataError naming
    it); a metric that does not declare ``needs_references`` scores items without references."""
    from capmetrics.errors import DataError

    name = "check_image_text_metric"
    c = cast(ImageTextMetric, ctx.build(spec))
    data = with_images(c, ctx.dataset)
    cands, refs, _ = data.flat_pairs()
    images = data.flat_images()
    values = np.asarray(c.score_images(cands, refs, images).values, dtype=float)
    if values.shape != (len(cands),) or not np.isfinite(values).all():
        raise _fail(
            name,
            spec,
            f"score_images gave {values.shape} values (finite: "
            f"{bool(np.isfinite(values).all())}) for {len(cands)} candidates; expected one "
            "finite value each",
        )
    last = len(cands) - 1
    alone = np.asarray(c.score_images(cands[last:], refs[last:], images[last:]).values)
    if not np.allclose(alone[0], values[last], rtol=1e-6, atol=1e-6):
        raise _fail(
            name,
            spec,
            f"a candidate scores {alone[0]} alone but {values[last]} with the others "
            "(state leaking between candidates?)",
        )
    first = ctx.dataset[0]
    bare = Dataset([dataclasses.replace(first, image=None), *data.items[1:]], source="<kit>")
    from capmetrics.engine.scoring import score

    try:
        score(bare, [c])
    except DataError as err:
        if repr(first.id) not in str(err):
            raise _fail(
                name, spec, f"the refusal of an item without an image does not name it: {err}"
            ) from err
    else:
        raise _fail(name, spec, "an item without an image was scored")
    if not c.needs_references:
        norefs = Dataset([dataclasses.replace(it, references=()) for it in data], source="<kit>")
        got = np.concatenate(_score(c, norefs).metrics[0].candidate_values)
        if not np.allclose(got, values, rtol=1e-6, atol=1e-6, equal_nan=True):
            raise _fail(
                name,
                spec,
                "declares needs_references = False but its values change when the "
                "references are left out",
            )


@_check("aggregator")
def check_aggregator_groups(spec: str, ctx: CheckContext) -> None:
    """``reduce_groups`` equals ``reduce`` applied to each group, and order does not matter."""
    c = cast(Aggregator, ctx.build(spec))
    values = np.random.default_rng(0).uniform(0.01, 1.0, 12)
    offsets = np.array([0, 3, 3 + 4, 12])
    try:
        grouped = c.reduce_groups(values, offsets)
    except CapmetricsError:
        return  # an aggregator of other inputs (pre-gen probabilities); its own tests cover it
    each = [c.reduce(values[offsets[g] : offsets[g + 1]]) for g in range(3)]
    if not np.allclose(grouped, np.asarray(each, dtype=float), rtol=1e-12):
        raise _fail(
            "check_aggregator_groups",
            spec,
            f"reduce_groups gives {grouped}, reduce per group {each}",
        )
    if not np.isclose(c.reduce(values[::-1]), c.reduce(values), rtol=1e-12):
        raise _fail("check_aggregator_groups", spec, "the value depends on the order of the values")


def _same(loaded: Any, value: float) -> bool:
    """A JSON number equals the in-memory value; null stands for NaN/±inf."""
    if loaded is None:
        return not np.isfinite(value)
    return float(loaded) == float(value)


@functools.lru_cache(maxsize=1)
def _has_dask() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------------------------
# running the checks
# ----------------------------------------------------------------------------------------------
def checks_for(component: Component | str) -> list[str]:
    """Names of the checks that apply to the component's kind."""
    kind = component.kind if isinstance(component, Component) else _kind_of(component)
    return [name for name, (kinds, _) in CHECKS.items() if not kinds or kind in kinds]


def _kind_of(spec: str) -> str:
    from capmetrics.registry.compose import compose

    return compose(spec).kind


def check_component(
    component: Component | str,
    *,
    checks: Iterable[str] | None = None,
    dataset: Dataset | None = None,
    context: CheckContext | None = None,
) -> list[str]:
    """Run the checks that apply to the component's kind (those of them named in ``checks``)
    on a component or spec; raise :class:`CheckFailed` at the first failure, return the names
    of the checks run."""
    spec = component if isinstance(component, str) else component.spec
    ctx = context or CheckContext(dataset or default_dataset())
    if not isinstance(component, str):
        ctx._built.setdefault(spec, component)
    for name in checks or ():
        if name not in CHECKS:
            from capmetrics.errors import did_you_mean

            raise ValueError(f"unknown check {name!r}.{did_you_mean(name, CHECKS)}")
    names = [n for n in checks_for(ctx.build(spec)) if checks is None or n in set(checks)]
    for name in names:
        CHECKS[name][1](spec, ctx)
    return names


def registered_specs(kinds: Sequence[str] = METRIC_KINDS) -> list[str]:
    """A spec for every registered component of ``kinds``: its ``example_specs``, else its name."""
    from capmetrics.registry import get_registry

    specs: list[str] = []
    for kind in kinds:
        for entry in get_registry().components(kind):
            specs.extend(entry.cls.example_specs or (entry.name,))
    return specs


def parametrize_with_checks(
    components: Iterable[str],
    *,
    checks: Iterable[str] | None = None,
    dataset: Callable[[], Dataset] | None = None,
) -> Any:
    """A ``pytest.mark.parametrize`` over (spec, check) pairs, with ids ``spec-check_name``:
    every check that applies to the spec's kind, or those of them named in ``checks``.

    The test receives ``component`` (the spec) and ``check`` (a callable taking the spec).
    Built components and their results are shared by the checks of one spec.
    """
    import pytest

    context: dict[str, CheckContext] = {}

    def get_context() -> CheckContext:
        if "ctx" not in context:
            context["ctx"] = CheckContext((dataset or default_dataset)())
        return context["ctx"]

    params = []
    for spec in components:
        names = [n for n in checks_for(spec) if checks is None or n in set(checks)]
        for name in names:

            def run(component: str, _name: str = name) -> None:
                check_component(component, checks=[_name], context=get_context())

            run.__name__ = name
            params.append(pytest.param(spec, run, id=f"{spec}-{name}"))
    return pytest.mark.parametrize(("component", "check"), params)
