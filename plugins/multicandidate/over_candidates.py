"""Naive multi-candidate statistics: a classic metric reduced over an item's candidates."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from capmetrics import Aggregator, Distance, Statistic, StatResult
from capmetrics.plugins.aggregators import Mean
from capmetrics.plugins.multicandidate.fitting import FitsDistance


class OverCandidates(FitsDistance, Statistic):
    """A classic metric scored for each candidate against the references, then reduced over
    the candidates (``mean``, ``max``, ...). No p-value: it is the naive baseline that the
    multi-candidate statistics are compared with."""

    name = "over-candidates"
    example_specs = ("over-candidates(distance=bleu-4, reduce=max)",)
    accepts_empty_candidates = True  # when its distance does (checked by capmetrics.score)

    def __init__(self, distance: Distance, reduce: Aggregator = Mean()) -> None:
        self.distance = distance
        self.reduce = reduce

    @property
    def higher_is_better(self) -> bool:  # type: ignore[override]
        return self.distance.higher_is_better

    def compare(self, candidates: Sequence[str], references: Sequence[str]) -> StatResult:
        values = self.distance.score(list(candidates), [list(references)] * len(candidates)).values
        return StatResult(float(self.reduce.reduce(np.asarray(values, dtype=float))))
