"""Ragged reference probabilities and the vectorised evaluation of pre-gen compositions.

:class:`RaggedProbs` holds, for every item, every reference caption and every position (END
included), the probability of the reference token and whether it was the model's top choice, as
flat arrays with offsets. :func:`evaluate` computes any set of compositions in one pass: each
filter and each sentence score runs once over all captions, each tier-3 reduction once over all
items, each tier-4 reduction once per tier-3 result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
from capmetrics import Aggregator, DataError, MetricError, PregenMetric, SpecError
from capmetrics.plugins.pregen.tiers import (
    FILTERS,
    JOIN,
    SCORES,
    Composition,
    parse_composition,
)

ReferencePolicy = Literal["allow", "error", "truncate"]


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` without a loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = starts - np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.repeat(shift, lengths) + np.arange(total, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class RaggedProbs:
    """Reference-token probabilities of a dataset, as flat arrays with offsets.

    Attributes:
        p: probability of the reference token at every position (float64, END included).
        top: True where the reference token had the highest probability (ties count as top).
        caption_offsets: positions of caption ``c`` are
            ``caption_offsets[c]:caption_offsets[c + 1]``.
        item_offsets: captions of item ``i`` are ``item_offsets[i]:item_offsets[i + 1]``.
        item_ids: one id per item.
        model: a label for the model that produced the probabilities.
    """

    p: np.ndarray
    top: np.ndarray
    caption_offsets: np.ndarray
    item_offsets: np.ndarray
    item_ids: tuple[Any, ...] = ()
    model: str = ""
    _checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "p", np.asarray(self.p, dtype=np.float64).ravel())
        set_(self, "top", np.asarray(self.top).astype(bool, copy=False).ravel())
        set_(self, "caption_offsets", np.asarray(self.caption_offsets, dtype=np.int64).ravel())
        set_(self, "item_offsets", np.asarray(self.item_offsets, dtype=np.int64).ravel())
        n_items = len(self.item_offsets) - 1
        ids = tuple(self.item_ids) if len(self.item_ids) else tuple(range(max(n_items, 0)))
        set_(self, "item_ids", ids)
        if not self._checked:
            self.validate()

    # -- shape ------------------------------------------------------------------------------
    @property
    def n_items(self) -> int:
        return len(self.item_offsets) - 1

    @property
    def n_captions(self) -> int:
        return len(self.caption_offsets) - 1

    @cached_property
    def starts(self) -> np.ndarray:
        """First position of every caption."""
        return self.caption_offsets[:-1]

    @cached_property
    def lengths(self) -> np.ndarray:
        """Positions per caption (words + END)."""
        return np.diff(self.caption_offsets)

    @cached_property
    def references_per_item(self) -> np.ndarray:
        return np.diff(self.item_offsets)

    def caption_item(self) -> np.ndarray:
        """The item index of every caption."""
        return np.repeat(np.arange(self.n_items), self.references_per_item)

    def where(self, caption: int, position: int | None = None) -> str:
        """``item 'x', reference j[, position t]`` for messages."""
        item = int(np.searchsorted(self.item_offsets, caption, side="right") - 1)
        text = f"item {self.item_ids[item]!r}, reference {caption - int(self.item_offsets[item])}"
        return text if position is None else f"{text}, position {position}"

    # -- checks -----------------------------------------------------------------------------
    def validate(self) -> None:
        """Check shapes, offsets and values.

        Raises:
            DataError: listing every item/caption with NaN or out-of-range probabilities, no
                positions (END must be included) or no references.
        """
        problems: list[str] = []
        co, io = self.caption_offsets, self.item_offsets
        if self.top.shape != self.p.shape:
            problems.append(f"'top' has {self.top.size} entries but 'p' has {self.p.size}")
        if len(co) < 1 or co[0] != 0 or co[-1] != self.p.size or (np.diff(co) < 0).any():
            problems.append("caption_offsets must rise from 0 to the number of positions")
        if len(io) < 1 or io[0] != 0 or io[-1] != len(co) - 1 or (np.diff(io) < 0).any():
            problems.append("item_offsets must rise from 0 to the number of captions")
        if len(self.item_ids) != self.n_items:
            problems.append(f"{len(self.item_ids)} item ids for {self.n_items} items")
        if problems:
            raise DataError(problems, "malformed pre-gen probabilities")
        for i in np.flatnonzero(self.references_per_item == 0):
            problems.append(f"item {self.item_ids[i]!r}: no reference captions")
        for c in np.flatnonzero(self.lengths == 0):
            problems.append(
                f"{self.where(int(c))}: no positions (the END position must be included)"
            )
        bad = np.flatnonzero(~((self.p >= 0) & (self.p <= 1)))
        if bad.size:
            caption = np.searchsorted(co, bad, side="right") - 1
            for pos, c in zip(bad[:50], caption[:50]):
                what = "NaN" if np.isnan(self.p[pos]) else f"{float(self.p[pos])!r}, outside [0, 1]"
                problems.append(f"{self.where(int(c), int(pos - co[c]))}: probability {what}")
            if bad.size > 50:
                problems.append(f"... {bad.size - 50} more bad probabilities")
        if problems:
            raise DataError(problems, "invalid pre-gen probabilities")
        object.__setattr__(self, "_checked", True)

    # -- building and slicing ---------------------------------------------------------------
    @classmethod
    def from_nested(
        cls,
        items: Sequence[Sequence[Sequence[Sequence[Any]]]],
        item_ids: Sequence[Any] = (),
        model: str = "",
    ) -> RaggedProbs:
        """Build from item → reference → list of ``[p, rank_or_top]`` (the toy JSON form).

        An integer second element is a rank (top ⇔ rank 0); a boolean is the top flag itself.
        """
        p: list[float] = []
        top: list[bool] = []
        caption_offsets = [0]
        item_offsets = [0]
        for item in items:
            for caption in item:
                for pair in caption:
                    prob, flag = pair[0], pair[1]
                    p.append(float(prob) if prob is not None else np.nan)
                    top.append(bool(flag) if isinstance(flag, (bool, np.bool_)) else int(flag) == 0)
                caption_offsets.append(len(p))
            item_offsets.append(len(caption_offsets) - 1)
        return cls(
            np.array(p, dtype=float),
            np.array(top, dtype=bool),
            caption_offsets,
            item_offsets,
            tuple(item_ids),
            model,
        )

    def subset(self, items: Sequence[int] | np.ndarray) -> RaggedProbs:
        """The items at the given indices, in that order."""
        items = np.asarray(items, dtype=np.int64)
        return self._take(
            self.item_offsets[items],
            self.references_per_item[items],
            tuple(self.item_ids[i] for i in items),
        )

    def first_references(self, k: int) -> RaggedProbs:
        """Keep the first ``k`` references of every item (items with fewer keep all)."""
        refs = np.minimum(self.references_per_item, k)
        return self._take(self.item_offsets[:-1], refs, self.item_ids)

    def _take(self, first: np.ndarray, refs: np.ndarray, item_ids: tuple[Any, ...]) -> RaggedProbs:
        """Items made of ``refs[i]`` captions starting at caption ``first[i]``."""
        captions = concat_ranges(first, refs)
        lengths = self.lengths[captions]
        positions = concat_ranges(self.starts[captions], lengths)
        caption_offsets = np.concatenate(([0], np.cumsum(lengths)))
        item_offsets = np.concatenate(([0], np.cumsum(refs)))
        return RaggedProbs(
            self.p[positions],
            self.top[positions],
            caption_offsets,
            item_offsets,
            item_ids,
            self.model,
            _checked=True,
        )

    def with_reference_policy(self, policy: ReferencePolicy) -> RaggedProbs:
        """Apply the policy for items with different numbers of references.

        ``allow`` keeps them (tier 3 reduces each item's own references), ``error`` raises a
        :class:`DataError` naming the items, ``truncate`` keeps the first *k* references of
        every item, *k* being the smallest count.
        """
        if policy not in ("allow", "error", "truncate"):
            raise SpecError(f"unknown references policy {policy!r}; use allow, error or truncate")
        refs = self.references_per_item
        if refs.size == 0 or refs.min() == refs.max() or policy == "allow":
            return self
        if policy == "truncate":
            return self.first_references(int(refs.min()))
        counts, n = np.unique(refs, return_counts=True)
        common = counts[np.argmax(n)]
        odd = np.flatnonzero(refs != common)
        problems = [
            f"item {self.item_ids[i]!r}: {refs[i]} references, most items have {common}"
            for i in odd
        ]
        raise DataError(
            problems,
            "items have different numbers of references (use references='allow' or 'truncate')",
        )


# --------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------
def group_reduce(aggregator: Aggregator, values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Reduce row groups ``values[offsets[g]:offsets[g + 1]]`` of a 2-D array column-wise.

    Groups of equal size are stacked into a 3-D array and reduced along axis 1 with the
    aggregator's own ``reduce``, so any aggregator is vectorised; ragged data costs one call per
    distinct group size.
    """
    sizes = np.diff(offsets)
    out = np.empty((len(sizes), values.shape[1]))
    for size in np.unique(sizes):
        groups = np.flatnonzero(sizes == size)
        rows = offsets[groups][:, None] + np.arange(size)
        out[groups] = aggregator.reduce(values[rows], axis=1)
    return out


def _aggregator(name: str) -> Aggregator:
    from capmetrics.registry.compose import compose

    agg = compose(name, "aggregator")
    assert isinstance(agg, Aggregator)
    return agg


def evaluate(probs: RaggedProbs, compositions: Sequence[Composition | str]) -> np.ndarray:
    """Values of ``compositions`` on ``probs`` (one float each, ±inf where the paper's rules give
    it).

    Raises:
        MetricError: for an empty dataset.
        SpecError: for a name that is not a composition.
    """
    comps = [c if isinstance(c, Composition) else parse_composition(c) for c in compositions]
    if probs.n_items == 0:
        raise MetricError("pre-gen metrics of an empty dataset are undefined")
    filters = list(dict.fromkeys(c.tier1 for c in comps))
    scores = list(dict.fromkeys(c.tier2 for c in comps))
    width = len(filters)
    column = {(s, f): i * width + j for i, s in enumerate(scores) for j, f in enumerate(filters)}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        keep = np.column_stack([FILTERS[f]().keep(probs) for f in filters])
        per_caption = np.concatenate([SCORES[s]().score(probs, keep) for s in scores], axis=1)
        aggs = {
            n: _aggregator(n)
            for n in dict.fromkeys(x for c in comps for x in (c.tier4, c.tier3))
            if n != JOIN
        }
        per_item = {
            n: group_reduce(aggs[n], per_caption, probs.item_offsets)
            for n in dict.fromkeys(c.tier3 for c in comps)
            if n != JOIN
        }
        per_item[JOIN] = per_caption
        totals = {
            (t4, t3): aggs[t4].reduce(per_item[t3], axis=0)
            for t4, t3 in dict.fromkeys((c.tier4, c.tier3) for c in comps)
        }
    return np.array(
        [totals[c.tier4, c.tier3][column[c.tier2, c.tier1]] for c in comps], dtype=float
    )


class Pregen(PregenMetric):
    """A pre-gen metric: reduces a model's reference-token probabilities to one number.

    Call it on a :class:`RaggedProbs` (``compose("pregen(mean_max_normcount_prefix0)")(probs)``).

    Args:
        composition: ``tier4_tier3_tier2_tier1``; the default is the paper's best metric.
        references: what to do with items whose numbers of references differ: ``allow``,
            ``error`` or ``truncate`` (see :meth:`RaggedProbs.with_reference_policy`).
    """

    name = "pregen"

    def __init__(
        self, composition: str = "mean_max_normcount_prefix0", references: ReferencePolicy = "allow"
    ) -> None:
        self.composition = composition
        self.references = references

    @property
    def parsed(self) -> Composition:
        """The composition's four tiers."""
        return parse_composition(self.composition)

    def compute(self, probs: RaggedProbs) -> float:
        """The metric's value on ``probs``."""
        if not isinstance(probs, RaggedProbs):
            raise MetricError(
                f"{self.spec} takes RaggedProbs (from a probability source), "
                f"not {type(probs).__name__}"
            )
        return float(evaluate(probs.with_reference_policy(self.references), [self.parsed])[0])
