"""The conformance kit catches the defects it names: each broken toy component fails exactly
the check that describes its defect, with a message that says what to fix."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from capmetrics import Distance, Scores, hookimpl
from capmetrics.testing import (
    CHECKS,
    CheckFailed,
    check_component,
    checks_for,
    parametrize_with_checks,
)


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
        return Scores(
            values,
            float(values.mean()),
            {"lengths": np.array([len(c.split()) for c in candidates])},
        )


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


class PooledOverlap(Overlap):
    """Takes part in the statistics protocol: the corpus value is matched words over all words,
    from per-part sums (capmetrics.components.protocols.ScoresInParts)."""

    name = "kit-pooled"

    def counts(self, candidates, references):
        found = np.array(
            [
                sum(w in {x for r in refs for x in r.split()} for w in c.split())
                for c, refs in zip(candidates, references)
            ],
            dtype=np.int64,
        )
        return found, np.array([len(c.split()) for c in candidates], dtype=np.int64)

    def score(self, candidates, references):
        return self.score_part(candidates, references)[0]

    def score_part(self, candidates, references):
        found, words = self.counts(candidates, references)
        sums = np.array([found.sum(), words.sum()])
        return Scores(found / np.maximum(words, 1), self.corpus(sums), {}), sums

    def merge_scores(self, parts):
        values = np.concatenate([s.values for s, _ in parts]) if parts else np.zeros(0)
        return Scores(values, self.corpus(np.sum([x for _, x in parts], axis=0)), {})

    @staticmethod
    def corpus(sums):
        return float(sums[0] / sums[1]) if sums[1] else 0.0


class MeanOfParts(PooledOverlap):
    """Joins parts by the mean of their corpus values (not the corpus value of the whole)."""

    name = "kit-mean-of-parts"

    def merge_scores(self, parts):
        values = np.concatenate([s.values for s, _ in parts])
        return Scores(values, float(np.mean([s.corpus for s, _ in parts])), {})


class RatioParts(PooledOverlap):
    """Sends each part's ratio instead of its sums: the statistics do not add."""

    name = "kit-ratio-parts"

    def score_part(self, candidates, references):
        scores, sums = super().score_part(candidates, references)
        return scores, np.array([self.corpus(sums), 1.0])

    def merge_scores(self, parts):
        values = np.concatenate([s.values for s, _ in parts])
        return Scores(values, float(np.mean([x[0] for _, x in parts])), {})


class LockedParts(PooledOverlap):
    name = "kit-locked-parts"

    def score_part(self, candidates, references):
        scores, sums = super().score_part(candidates, references)
        return scores, [sums, threading.Lock()]


class WordDf(Overlap):
    """Fits document frequencies of words in parts (capmetrics.components.protocols.FitsInParts);
    its fitted table is in the signature."""

    name = "kit-word-df"

    def fit(self, references):
        return self.fit_states([self.fit_state(references)])

    def fit_state(self, references):
        df: dict[str, int] = {}
        for refs in references:
            for w in {x for r in refs for x in r.split()}:
                df[w] = df.get(w, 0) + 1
        return df

    @staticmethod
    def merge_fit_states(states):
        total: dict[str, int] = {}
        for df in states:
            for w, n in df.items():
                total[w] = total.get(w, 0) + n
        return total

    def fit_states(self, states):
        self.df_ = self.merge_fit_states(states)
        return self

    def signature_extra(self):
        return {"df": repr(sorted(self.df_.items()))} if hasattr(self, "df_") else {}


class LastPartDf(WordDf):
    """Keeps the last part's frequencies instead of their sum."""

    name = "kit-last-part-df"

    def fit_states(self, states):
        self.df_ = list(states)[-1]
        return self


class KitPlugin:
    @hookimpl
    def register_distances(self, register):
        for cls in (
            Overlap,
            ObjectDetails,
            RenamesParameter,
            Stateful,
            Unseeded,
            CrashesOnEmpty,
            Unpicklable,
            PooledOverlap,
            MeanOfParts,
            RatioParts,
            LockedParts,
            WordDf,
            LastPartDf,
        ):
            register(cls)


@pytest.fixture
def kit_plugin(add_plugin):
    add_plugin(KitPlugin(), "kit-toys")


IN_PROCESS = [c for c in CHECKS if c != "check_signature_fresh_process"]  # toys are no entry points


def test_a_well_behaved_component_passes(kit_plugin):
    ran = check_component("kit-overlap(scale=2.0)", checks=IN_PROCESS)
    assert ran == [
        "check_spec_round_trip",
        "check_pickle",
        "check_choice_parameters",
        "check_path_params_declared",
        "check_results_formats",
        "check_item_permutation",
        "check_determinism",
        "check_merged_parts",
        "check_edge_inputs",
    ]


@pytest.mark.parametrize(
    "spec",
    [
        "kit-pooled",
        "kit-word-df",
        "bleu-4",
        "rouge-l",
        "cider-d",
        "cider-original",
        "trm(cider-d)",
        "over-candidates(distance=cider-d)",
    ],
)
def test_components_of_the_statistics_protocol_merge_parts_to_the_whole(kit_plugin, spec):
    """The bundled n-gram metrics (and the well-behaved toys) give from parts what they give
    whole."""
    from capmetrics.components.protocols import PROTOCOLS, supports
    from capmetrics.registry.compose import compose

    assert any(supports(compose(spec), p) for p in PROTOCOLS.values())
    assert check_component(spec, checks=["check_merged_parts"]) == ["check_merged_parts"]


@pytest.mark.parametrize(
    ("spec", "check", "message"),
    [
        ("kit-object-details", "check_results_formats", "is not strict JSON"),
        ("kit-renames(scale=3.0)", "check_spec_round_trip", "store each parameter unchanged"),
        (
            "kit-stateful",
            "check_item_permutation",
            "scores differently when the items come in another order",
        ),
        ("kit-unseeded", "check_determinism", "two runs give different results"),
        (
            "kit-crashes-on-empty",
            "check_edge_inputs",
            "empty candidate: internal error in kit-crashes-on-empty: ZeroDivisionError",
        ),
        ("kit-unpicklable", "check_pickle", "pickling fails"),
        (
            "kit-mean-of-parts",
            "check_merged_parts",
            "merge_scores of the parts gives the corpus value",
        ),
        (
            "kit-ratio-parts",
            "check_merged_parts",
            "merge_scores of the parts gives the corpus value",
        ),
        (
            "kit-locked-parts",
            "check_merged_parts",
            "score_part of items[0:1][1][1] is a _thread.lock, not plain data",
        ),
        (
            "kit-last-part-df",
            "check_merged_parts",
            "fit_states of the parts gives another fitted state than fit",
        ),
    ],
)
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
    assert checks_for("mean") == [
        "check_spec_round_trip",
        "check_signature_fresh_process",
        "check_pickle",
        "check_choice_parameters",
        "check_path_params_declared",
        "check_aggregator_groups",
    ]


def test_unknown_check_name():
    with pytest.raises(ValueError, match="Did you mean 'check_pickle'"):
        check_component("bleu-4", checks=["check_pickles"])


@parametrize_with_checks(["rouge-l"], checks=["check_spec_round_trip", "check_results_formats"])
def test_parametrize_with_checks_ids(component, check, request):
    assert request.node.callspec.id in (
        "rouge-l-check_spec_round_trip",
        "rouge-l-check_results_formats",
    )
    check(component)
