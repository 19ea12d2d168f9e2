"""capmetrics.engine.prestart: slow first steps run beside the other metrics of a run, values
unchanged to the bit, no thread or process left behind, preparations stopped when the run fails."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Sequence

import capmetrics
import numpy as np
import pytest
from capmetrics import Distance, MetricError, Scores
from capmetrics.engine.prestart import Prepares, Prestart, preparing

CANDS = [
    "a dog runs on the grass",
    "two children play with a red ball",
    "a man rides a bike down a hill",
]
REFS = [
    ["a dog is running through the grass", "the dog runs"],
    ["kids playing with a ball", "two kids play"],
    ["a man on a bicycle", "a cyclist rides downhill"],
]
EVENTS: list[tuple[str, str, float]] = []


class Slow(Distance):
    """A distance whose first step takes ``delay`` seconds in ``prepare`` (recording its thread)."""

    name = "slow-test"
    higher_is_better = True

    def __init__(self, delay: float = 0.3, fail: bool = False) -> None:
        self.delay = delay
        self.fail = fail

    def prepare(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], stop: threading.Event
    ) -> None:
        EVENTS.append(("prepare-start", threading.current_thread().name, time.monotonic()))
        if self.fail:
            raise RuntimeError("prepare failed")
        stop.wait(self.delay)
        EVENTS.append(
            (
                "prepare-end" if not stop.is_set() else "prepare-stopped",
                threading.current_thread().name,
                time.monotonic(),
            )
        )
        self._ready = len(candidates)

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        EVENTS.append(("score-slow", threading.current_thread().name, time.monotonic()))
        values = np.array([len(c) / 100 for c in candidates])
        return Scores(values, float(values.mean()))


class Quick(Distance):
    """An in-process distance that records when it runs."""

    name = "quick-test"
    higher_is_better = True

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        EVENTS.append(("score-quick", threading.current_thread().name, time.monotonic()))
        if self.fail:
            raise MetricError("quick-test failed")
        values = np.array([len(r) for r in references], dtype=float)
        return Scores(values, float(values.mean()))


@pytest.fixture(autouse=True)
def _clear() -> None:
    EVENTS.clear()


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("capmetrics-prepare")}


def test_the_protocol_is_declared_not_named() -> None:
    assert isinstance(Slow(), Prepares) and not isinstance(Quick(), Prepares)
    from capmetrics.plugins.meteor import Meteor
    from capmetrics.plugins.spice import Spice

    assert isinstance(Meteor(), Prepares) and isinstance(Spice(), Prepares)
    bleu = capmetrics.compose("bleu-4", "distance")
    assert not isinstance(bleu, Prepares)
    nested = capmetrics.compose("over-candidates(distance=meteor)", "statistic")
    assert [type(c).__name__ for c in preparing(nested)] == ["Meteor"]


def test_prepared_metric_runs_last_while_the_others_run_first() -> None:
    slow, quick = Slow(0.4), Quick()
    results = capmetrics.score(candidates=CANDS, references=REFS, metrics=[slow, quick])
    names = [e[0] for e in EVENTS]
    assert names == ["prepare-start", "score-quick", "prepare-end", "score-slow"]
    prepare_thread = EVENTS[0][1]
    assert (
        prepare_thread.startswith("capmetrics-prepare")
        and EVENTS[1][1] == threading.main_thread().name
    )
    assert (
        EVENTS[3][1] == threading.main_thread().name
    )  # scored in the caller's thread, after its prepare
    assert list(results) == [slow.spec, quick.spec]  # results in the order asked
    assert results.metrics[0].corpus == pytest.approx(np.mean([len(c) / 100 for c in CANDS]), abs=0)
    assert not _threads()


def test_one_metric_alone_starts_no_thread() -> None:
    capmetrics.score(candidates=CANDS, references=REFS, metrics=[Slow(0.0)])
    assert [e[0] for e in EVENTS] == ["score-slow"]


def test_a_failing_run_stops_and_joins_the_preparations() -> None:
    before = threading.active_count()
    with pytest.raises(MetricError, match="quick-test failed"):
        capmetrics.score(candidates=CANDS, references=REFS, metrics=[Slow(30.0), Quick(fail=True)])
    assert [e[0] for e in EVENTS] == ["prepare-start", "score-quick", "prepare-stopped"]
    assert EVENTS[2][2] - EVENTS[0][2] < 10  # stopped, not waited for
    assert threading.active_count() == before and not _threads()


def test_a_failing_preparation_is_ignored() -> None:
    results = capmetrics.score(
        candidates=CANDS, references=REFS, metrics=[Slow(fail=True), Quick()]
    )
    assert [e[0] for e in EVENTS] == ["prepare-start", "score-quick", "score-slow"]
    assert len(results) == 2


def test_statistics_wait_for_every_preparation() -> None:
    prestart = Prestart(
        [Slow(0.2), capmetrics.compose("over-candidates(distance=bleu-4)", "statistic")],
        CANDS,
        REFS,
    )
    with prestart as early:
        assert early.order() == [0, 1]  # both wait: the statistic may fork workers
        early.wait(early.components[1])
        assert "prepare-end" in [e[0] for e in EVENTS]
    assert not _threads()


def _spice_ready() -> bool:
    from capmetrics.plugins.spice import Spice

    try:
        Spice().check_resources()
    except MetricError:
        return False
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


def test_meteor_values_are_the_same_to_the_bit_with_prestart() -> None:
    metrics = ["bleu-4", "meteor", "rouge-l", "cider-d"]
    together = capmetrics.score(candidates=CANDS, references=REFS, metrics=metrics)
    for name, result in zip(metrics, together.metrics):
        alone = capmetrics.score(candidates=CANDS, references=REFS, metrics=[name]).metrics[0]
        assert (
            np.array_equal(result.item_values, alone.item_values) and result.corpus == alone.corpus
        ), name
        assert result.signature == alone.signature
    assert not _threads()


@pytest.mark.slow
@pytest.mark.skipif(not _spice_ready(), reason="SPICE is not set up (capmetrics setup spice)")
def test_spice_parses_beside_the_others_and_gives_the_same_values(tmp_path, monkeypatch) -> None:
    from capmetrics.plugins.spice import find_corenlp

    spice = f'spice(corenlp="{find_corenlp(None)[0].parent}")'
    monkeypatch.setenv(
        "CAPMETRICS_CACHE_DIR", str(tmp_path)
    )  # an empty parse cache: the JVM parses
    cands = [f"{c} number {k}" for k, c in enumerate(CANDS)]
    together = capmetrics.score(candidates=cands, references=REFS, metrics=[spice, "bleu-4"])
    # the same parses read back from the cache the prepared run filled, without prestart
    alone = capmetrics.score(candidates=cands, references=REFS, metrics=[spice])
    ours, theirs = together.metrics[0], alone.metrics[0]
    assert np.array_equal(ours.item_values, theirs.item_values) and ours.corpus == theirs.corpus
    assert np.array_equal(ours.details["ties"], theirs.details["ties"])
    assert 0 < ours.corpus < 1
    assert not _threads()
    import subprocess

    children = subprocess.run(
        ["ps", "--ppid", str(os.getpid()), "-o", "comm="],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert "java" not in children
