"""The conformance kit catches the defects it names: each broken toy component fails exactly
the check that describes its defect, with a message that says what to fix."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from capmetrics import Distance, Scores, hookimpl
from capmetrics.testing import CHECKS, CheckFailed, check_component, checks_for, parametrize_with_checks


class Overlap(Distance):
    """Share of candidate words found in the references (a well-behaved toy metric)."""

    name = "kit-overlap"
    accepts_empty_candidates = True

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def score(self, candidates, references):
        values = []
        for cand, refs in zip(candidates, references):
            words = cand.split()
            ref_words = {w for r in refs for w in r.split()}
            values.append(self.scale * sum(w in ref_words for w in words) / max(len(words), 1))
        values = np.asarray(values)
        return Scores(values, float(values.mean()), {"lengths": np.array([len(c.split()) for c in candidates])})


class ObjectDetails(Overlap):
    name = "kit-object-details"

    def score(self, candidates, references):
        s = super().score(candidates, references)
        return Scores(s.values, s.corpus, {"lock": threading.Lock()})


class RenamesParameter(Overlap):
    name = "kit-renames"

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale * 2


class Stateful(Overlap):
    """Leaks state between calls: the n-th candidate it ever sees gets n added."""

    name = "kit-stateful"

    def score(self, candidates, references):
        self.seen = getattr(self, "seen", 0) + len(candidates)
        s = super().score(candidates, references)
        return Scores(s.values + self.seen, s.corpus, {})


class Unseeded(Overlap):
    """Adds unseeded noise (a Monte-Carlo estimate without a seed, say)."""

    name = "kit-unseeded"

    def score(self, candidates, references):
        s = super().score(candidates, references)
        noise = np.random.default_rng().uniform(0, 1e-9, len(candidates))
        return Scores(s.values + noise, s.corpus, {})


class CrashesOnEmpty(Overlap):
    name = "kit-crashes-on-empty"

    def score(self, candidates, references):
        return Scores(np.array([1.0 / len(c) for c in candidates]), 0.0, {})


class Unpicklable(Overlap):
    name = "kit-unpicklable"

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self._lock = threading.Lock()


class KitPlugin:
    @hookimpl
    def register_distances(self, register):
        for cls in (Overlap, ObjectDetails, RenamesParameter, Stateful, Unseeded, CrashesOnEmpty, Unpicklable):
            register(cls)


@pytest.fixture
def kit_plugin(add_plugin):
    add_plugin(KitPlugin(), "kit-toys")


IN_PROCESS = [c for c in CHECKS if c != "check_signature_fresh_process"]  # toys are no entry points


def test_a_well_behaved_component_passes(kit_plugin):
    ran = check_component("kit-overlap(scale=2.0)", checks=IN_PROCESS)
    assert ran == ["check_spec_round_trip", "check_pickle", "check_choice_parameters", "check_results_formats",
                   "check_item_permutation",
                   "check_determinism", "check_edge_inputs"]


@pytest.mark.parametrize(("spec", "check", "message"), [
    ("kit-object-details", "check_results_formats", "is not strict JSON"),
    ("kit-renames(scale=3.0)", "check_spec_round_trip", "store each parameter unchanged"),
    ("kit-stateful", "check_item_permutation", "scores differently when the items come in another order"),
    ("kit-unseeded", "check_determinism", "two runs give different results"),
    ("kit-crashes-on-empty", "check_edge_inputs", "empty candidate: internal error in kit-crashes-on-empty: ZeroDivisionError"),
    ("kit-unpicklable", "check_pickle", "pickling fails"),
])
def test_each_defect_fails_its_check(kit_plugin, spec, check, message):
    with pytest.raises(CheckFailed) as info:
        check_component(spec, checks=[check])
    assert info.value.check == check and message in str(info.value)


def test_the_fresh_process_check_needs_an_entry_point(kit_plugin):
    with pytest.raises(CheckFailed, match="entry point in group 'capmetrics'"):
        check_component("kit-overlap", checks=["check_signature_fresh_process"])


def test_checks_by_kind():
    assert "check_executors" in checks_for("trm(distance=bleu-4)")
    assert "check_executors" not in checks_for("bleu-4")
    assert checks_for("mean") == ["check_spec_round_trip", "check_signature_fresh_process", "check_pickle",
                                  "check_choice_parameters", "check_aggregator_groups"]


def test_unknown_check_name():
    with pytest.raises(ValueError, match="Did you mean 'check_pickle'"):
        check_component("bleu-4", checks=["check_pickles"])


@parametrize_with_checks(["rouge-l"], checks=["check_spec_round_trip", "check_results_formats"])
def test_parametrize_with_checks_ids(component, check, request):
    assert request.node.callspec.id in ("rouge-l-check_spec_round_trip", "rouge-l-check_results_formats")
    check(component)
