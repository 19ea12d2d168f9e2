"""The statistics protocol: how a component is computed in parts and the parts are joined.

Executors (:mod:`capmetrics.engine.parallel`), streaming (:mod:`capmetrics.engine.streaming`)
and the integrations (torchmetrics under DDP, training rewards) split a corpus into **parts**
(chunks of a file, chunks on worker processes, the shards of DDP ranks), compute each part's
**sufficient statistics** where the part is, and join them where the result is needed. A
component takes part by implementing one or more of the protocols below: plain methods, found
by structure (:func:`typing.runtime_checkable`), so a third-party class needs no base class
from here; the core looks a component up only through :func:`supports` and the protocols,
never by a method name of its own.

The contract every protocol shares:

- **A part** is a contiguous slice of the corpus (``candidates[a:b]`` with their
  ``references[a:b]``). Its statistics are computed from that slice alone. A part may be
  empty (a chunk whose items were all skipped).
- **Merging is exact**: joining the parts' statistics gives what the whole corpus gives, to
  the bit (sums of integers, concatenation), whatever the number and the sizes of the parts.
  The kit checks this (:func:`capmetrics.testing.check_merged_parts`).
- **What crosses a process or rank boundary** is plain data (:func:`check_portable`): None,
  booleans, numbers, strings, numpy arrays of numbers or strings, and lists, tuples, dicts
  and dataclasses of those (:class:`~capmetrics.components.base.Scores`). No open files, models,
  locks, lambdas or components: a part is pickled to and from worker processes and Dask
  workers, and gathered across DDP ranks.
- **Order**: parts are merged in corpus order (the first part first).

A component that wraps another (a statistic over a distance) may have the methods of a
protocol and still not support it (its distance does not); it says so per instance through
:class:`Delegates`. A component whose instance, as configured, breaks the contract (BERTScore
with ``floor=bert-score``: each value depends on the other pairs of its call) says so, with the
reason, through :class:`Declines`; :func:`why_unsupported` gives callers that reason.

Where the parts are computed is the caller's choice (worker processes, Dask workers, ranks),
except for a component that declares ``parts_in_parent = True`` (:func:`parts_in_parent`): its
parts need what only the calling process should hold (a model, a GPU), so executors compute
them there and never send the component to a worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from capmetrics.components.base import Scores
from capmetrics.errors import MetricError

__all__ = [
    "PROTOCOLS",
    "CountsInParts",
    "Declines",
    "Delegates",
    "FitsInParts",
    "Part",
    "ScoresInParts",
    "ShardStatistics",
    "check_portable",
    "counts_in_parts",
    "fits_in_parts",
    "merge_parts",
    "parts_in_parent",
    "scores_in_parts",
    "supports",
    "supports_parts",
    "why_unsupported",
]

#: One part's scores and the statistics that join parts (see :class:`ScoresInParts`).
Part = tuple[Scores, Any]


@runtime_checkable
class ScoresInParts(Protocol):
    """A distance whose scores over a corpus can be computed part by part.

    Used by streaming (a JSONL file scored chunk by chunk), by executors and by the
    torchmetrics integration (DDP ranks). The bundled n-gram metrics (BLEU, ROUGE-L, CIDEr-D)
    and the chrF contrib package implement it.
    """

    def score_part(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Part:
        """:meth:`~capmetrics.components.base.Distance.score` of one part of a corpus, with the
        part's statistics that the corpus value comes from: ``None`` when the corpus value is the
        mean of the item values, else a numpy array of numbers that **adds** over parts (summed
        n-gram counts, lengths). Both cross process boundaries (:func:`check_portable`)."""
        ...

    def merge_scores(self, parts: Sequence[Part]) -> Scores:
        """The :meth:`score` of the whole corpus from its consecutive parts' :meth:`score_part`,
        in corpus order: the same values and the same corpus value, to the bit.

        Because the statistics add, ``merge_scores([(scores, total)])`` with ``total`` the sum
        of every part's statistics gives the corpus value of all of them (what DDP ranks do:
        they exchange the sums, never the texts)."""
        ...


@runtime_checkable
class FitsInParts(Protocol):
    """Corpus statistics (CIDEr-D's document frequencies) fitted from parts of the references.

    ``fit_states([fit_state(A), fit_state(B)])`` fixes the same statistics as ``fit(A + B)``;
    the executors fit a statistic's distance on worker processes so, and streaming fits from
    every chunk of a file it cannot hold.
    """

    def fit(self, references: Sequence[Sequence[str]]) -> Any:
        """Fix the corpus statistics from every item's references (the whole corpus)."""
        ...

    def fit_state(self, references: Sequence[Sequence[str]]) -> Any:
        """One part's statistics (plain data, :func:`check_portable`); fixes nothing."""
        ...

    def merge_fit_states(self, states: Iterable[Any]) -> Any:
        """The sum of parts' :meth:`fit_state`: itself a state (associative; it may reuse its
        first argument's containers). Lets a caller fold parts as they come."""
        ...

    def fit_states(self, states: Iterable[Any]) -> Any:
        """Fix the corpus statistics to the sum of the parts' :meth:`fit_state` (as :meth:`fit`
        on all of their references)."""
        ...


@runtime_checkable
class CountsInParts(Protocol):
    """A compact form of :class:`FitsInParts` whose parts are integer arrays (cheap to send and
    to sum): executors prefer it when a component has it. CIDEr-D implements both."""

    def count_state(self, references: Sequence[Sequence[str]]) -> Any:
        """One part's statistics in compact form (plain data, :func:`check_portable`)."""
        ...

    def fit_counts(self, states: Iterable[Any]) -> Any:
        """Fix the corpus statistics to the sum of the parts' :meth:`count_state`."""
        ...


@runtime_checkable
class ShardStatistics(Protocol):
    """Per-shard sums from which the corpus value is computed (METEOR's fragment statistics):
    for integrations that combine ranks by summing arrays (DDP)."""

    def score_shard(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]]
    ) -> tuple[Scores, np.ndarray]:
        """:meth:`score` of one shard and its corpus statistics, a numpy array that adds over
        shards."""
        ...

    def corpus_from_sums(self, sums: np.ndarray) -> float:
        """The corpus value of the summed :meth:`score_shard` statistics of every shard."""
        ...


@runtime_checkable
class Delegates(Protocol):
    """A component that has a protocol's methods but supports it only as far as what it wraps
    does (a statistic over a distance: its parts are its distance's)."""

    def supports_protocol(self, protocol: type) -> bool:
        """Whether this instance supports ``protocol`` (one of :data:`PROTOCOLS`)."""
        ...


@runtime_checkable
class Declines(Protocol):
    """A component whose class has a protocol's methods but whose instance, as configured, does
    not keep the protocol's contract (BERTScore with ``floor=bert-score``: each value depends on
    the other pairs of its call, so parts score otherwise than the whole), with the reason."""

    def declines(self, protocol: type) -> str | None:
        """Why this instance does not take part in ``protocol`` (one of :data:`PROTOCOLS`), in
        one line naming what to change; None when it does."""
        ...


#: The protocols of this module, by the name the docs and error messages use.
PROTOCOLS: dict[str, type] = {
    "scores in parts": ScoresInParts,
    "fits in parts": FitsInParts,
    "counts in parts": CountsInParts,
    "shard statistics": ShardStatistics,
}


def supports(component: object, protocol: type) -> bool:
    """Whether ``component`` takes part in ``protocol``: it has every method the protocol names
    and, if it :class:`Delegates`, it says it supports it."""
    if protocol not in PROTOCOLS.values():
        raise TypeError(
            f"{protocol!r} is not a statistics protocol; use one of "
            + ", ".join(p.__name__ for p in PROTOCOLS.values())
        )
    if not isinstance(component, protocol):
        return False
    if isinstance(component, Declines) and component.declines(protocol) is not None:
        return False
    return not isinstance(component, Delegates) or bool(component.supports_protocol(protocol))


def why_unsupported(component: object, protocol: type) -> str | None:
    """None when ``component`` takes part in ``protocol`` (:func:`supports`), else why not, in
    one line for a caller to put after the component's name: the reason it :class:`Declines`
    with, or which methods it lacks."""
    if supports(component, protocol):
        return None
    if isinstance(component, protocol) and isinstance(component, Declines):
        reason = component.declines(protocol)
        if reason is not None:
            return reason
    if isinstance(component, protocol):
        return f"it takes part in {protocol.__name__} as far as what it wraps does: not at all"
    methods = "/".join(k for k, v in vars(protocol).items() if callable(v) and k[0] != "_")
    return f"it does not implement {protocol.__name__} (no {methods})"


def parts_in_parent(component: object) -> bool:
    """Whether ``component``'s parts must be computed in the calling process: it declares
    ``parts_in_parent = True`` (a class attribute or a property) because its parts need a model
    or a GPU that worker processes must not load. Executors then compute its parts (and fit
    it) in this process; DDP ranks are processes of their own and compute theirs there."""
    return getattr(component, "parts_in_parent", False) is True


def supports_parts(component: object) -> bool:
    """Whether ``component`` scores a corpus in parts (:class:`ScoresInParts`)."""
    return supports(component, ScoresInParts)


scores_in_parts = supports_parts


def fits_in_parts(component: object) -> bool:
    """Whether ``component`` fits its corpus statistics from parts (:class:`FitsInParts`)."""
    return supports(component, FitsInParts)


def counts_in_parts(component: object) -> bool:
    """Whether ``component`` has the compact form of fitting in parts (:class:`CountsInParts`)."""
    return supports(component, CountsInParts)


def merge_parts(component: ScoresInParts, parts: Sequence[Part]) -> Scores:
    """``component.merge_scores(parts)``, refusing a component that does not score in parts."""
    if not supports_parts(component):
        raise MetricError(
            f"{_name(component)} does not score in parts (no score_part/merge_scores)"
        )
    return component.merge_scores(list(parts))


_S = TypeVar("_S")
_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.generic)


def check_portable(value: _S, what: str = "a part") -> _S:
    """``value`` itself if it may cross a process or rank boundary (plain data: None, numbers,
    strings, numpy arrays that are not of ``object`` dtype, and lists, tuples, dicts and
    dataclass instances of those), else a :class:`~capmetrics.errors.MetricError` naming
    where in ``value`` the first offending object is."""
    problem = _unportable(value, what, depth=0)
    if problem:
        raise MetricError(problem)
    return value


def _unportable(value: Any, where: str, depth: int) -> str | None:
    if depth > 64:
        return f"{where} is nested more than 64 levels deep"
    if isinstance(value, _PLAIN):
        return None
    if isinstance(value, np.ndarray):
        return None if value.dtype != object else f"{where} is a numpy array of Python objects"
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            problem = _unportable(v, f"{where}[{i}]", depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            problem = _unportable(k, f"a key of {where}", depth + 1) or _unportable(
                v, f"{where}[{k!r}]", depth + 1
            )
            if problem:
                return problem
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            problem = _unportable(getattr(value, f.name), f"{where}.{f.name}", depth + 1)
            if problem:
                return problem
        return None
    return (
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, not plain data "
        "(numbers, strings, numpy arrays, and lists, tuples, dicts and dataclasses of those)"
    )


def _name(component: object) -> str:
    spec = getattr(component, "spec", None)
    return str(spec) if isinstance(spec, str) else type(component).__name__
