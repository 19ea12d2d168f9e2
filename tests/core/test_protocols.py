"""capmetrics.components.protocols: which components take part in which protocol, delegation, and
what may cross a process or rank boundary."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pytest
from capmetrics import Distance, Scores, compose
from capmetrics.components.protocols import (
    CountsInParts,
    Delegates,
    FitsInParts,
    ScoresInParts,
    ShardStatistics,
    check_portable,
    counts_in_parts,
    fits_in_parts,
    merge_parts,
    supports,
    supports_parts,
)
from capmetrics.errors import MetricError

#: spec -> (scores in parts, fits in parts, counts in parts, shard statistics)
BUNDLED = {
    "bleu-4": (True, False, False, False),
    "rouge-l": (True, False, False, False),
    "cider-d": (True, True, True, False),
    "cider-original": (True, True, True, False),
    "meteor": (False, False, False, True),
    "trm(cider-d)": (False, True, True, False),
    "over-candidates(distance=cider-d)": (False, True, True, False),
    "trm(distance=bleu-4)": (False, False, False, False),  # BLEU has no corpus statistics to fit
    "mmd(embedder=bow)": (False, False, False, False),
}


@pytest.mark.parametrize("spec", BUNDLED)
def test_bundled_components_take_part_as_declared(spec):
    c = compose(spec)
    got = tuple(
        supports(c, p) for p in (ScoresInParts, FitsInParts, CountsInParts, ShardStatistics)
    )
    assert got == BUNDLED[spec]
    assert (supports_parts(c), fits_in_parts(c), counts_in_parts(c)) == got[:3]


def test_a_statistic_delegates_to_its_distance():
    trm = compose("trm(cider-d)")
    assert isinstance(trm, Delegates) and isinstance(trm, FitsInParts)  # the methods are there ...
    over_bleu = compose("trm(distance=bleu-4)")
    assert isinstance(over_bleu, FitsInParts) and not over_bleu.supports_protocol(FitsInParts)
    assert not fits_in_parts(over_bleu)  # ... but its distance cannot fit in parts


class Halves(Distance):
    """A third-party distance that declares nothing but has the two methods."""

    name = "halves"

    def score(self, candidates, references):
        values = np.array([len(c) / 2 for c in candidates])
        return Scores(values, float(values.mean()) if len(values) else float("nan"))

    def score_part(self, candidates, references):
        return self.score(candidates, references), None

    def merge_scores(self, parts):
        values = np.concatenate([s.values for s, _ in parts])
        return Scores(values, float(values.mean()))


def test_a_class_takes_part_by_its_methods_alone_and_merge_parts_refuses_others():
    halves = Halves()
    assert supports_parts(halves) and not fits_in_parts(halves)
    merged = merge_parts(
        halves,
        [halves.score_part(["ab"], [["x"]]), halves.score_part(["abcd", ""], [["x"], ["y"]])],
    )
    assert merged.values.tolist() == [1.0, 2.0, 0.0] and merged.corpus == 1.0
    with pytest.raises(MetricError, match="meteor does not score in parts"):
        merge_parts(compose("meteor"), [])
    with pytest.raises(TypeError, match="not a statistics protocol"):
        supports(halves, Distance)


@dataclass
class Part:
    keys: np.ndarray
    count: int


def test_plain_data_crosses_and_the_first_offender_is_named():
    fine = {
        "a": [1, 2.5, "x", None, (np.int64(3), np.zeros(2))],
        "part": Part(np.arange(3), 4),
        "scores": Scores(np.ones(2), 1.0, {"by_order": np.ones((2, 4))}),
    }
    assert check_portable(fine) is fine
    with pytest.raises(MetricError, match=r"a part\['a'\]\[1\] is a _thread.lock, not plain data"):
        check_portable({"a": [1, threading.Lock()]})
    with pytest.raises(MetricError, match=r"fit_state\.keys is a numpy array of Python objects"):
        check_portable(Part(np.array([object()]), 1), "fit_state")
    with pytest.raises(MetricError, match=r"a part\[0\] is a .*function"):
        check_portable([lambda: 1])
    with pytest.raises(MetricError, match="a part is a capmetrics.plugins.ngram.bleu.Bleu4"):
        check_portable(compose("bleu-4"))  # a component is not a part


def test_the_bundled_parts_are_plain_data():
    refs = [["a dog runs", "a dog"], ["a cat sleeps on a mat"]]
    cider = compose("cider-d")
    check_portable(cider.fit_state(refs))
    check_portable(cider.count_state(refs))
    check_portable(cider.score_part(["a dog", "a cat"], refs))
    check_portable(compose("bleu-4").score_part(["a dog", "a cat"], refs))
