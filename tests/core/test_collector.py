"""capmetrics.runtime.collector: in the command's process, the dataset frozen for a run and parsing
with the collector paused; in any other process, nothing."""

from __future__ import annotations

import gc

import pytest
from capmetrics.runtime import collector
from capmetrics.runtime.collector import frozen, paused


@pytest.fixture
def command_process():
    """This process as if it were the capmetrics command's (collector.own_process)."""
    collector.own_process()
    try:
        yield
    finally:
        collector.own_process(False)


def test_frozen_nests_and_unfreezes_everything_at_the_outermost_end(command_process):
    assert gc.get_freeze_count() == 0
    before = [object() for _ in range(3)]  # noqa: F841 - tracked now, frozen below
    with frozen():
        outer = gc.get_freeze_count()
        assert outer > 0
        later = [[] for _ in range(1000)]  # noqa: F841
        with frozen():
            assert gc.get_freeze_count() >= outer + 1000  # what came since is frozen too
        assert gc.get_freeze_count() > 0  # the inner end does not unfreeze the outer's objects
    assert gc.get_freeze_count() == 0
    with pytest.raises(KeyError), frozen():
        raise KeyError("x")
    assert gc.get_freeze_count() == 0


def test_frozen_never_thaws_what_was_frozen_before_it_even_in_the_command(command_process):
    kept = [[] for _ in range(100)]  # noqa: F841
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        with frozen():
            [[] for _ in range(100)]
            assert gc.get_freeze_count() == count  # it did not freeze: it could not restore
        assert gc.get_freeze_count() == count
    finally:
        gc.unfreeze()


def test_paused_restores_the_collector_as_it_was(command_process):
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        gc.enable()


def test_outside_the_command_frozen_and_paused_leave_the_collector_alone():
    assert not collector.owns_process()
    with frozen():
        assert gc.get_freeze_count() == 0
        with paused():
            assert gc.isenabled()
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_a_scoring_run_leaves_nothing_frozen_and_cycles_made_meanwhile_are_collected(
    command_process,
):
    import weakref

    import capmetrics

    from tests.conftest import SAMPLE

    class Node:
        pass

    node = Node()
    node.self = node  # a cycle made before the run: frozen during it, collectable after
    ref = weakref.ref(node)
    del node
    results = capmetrics.score(capmetrics.load_dataset(SAMPLE), ["bleu-4", "trm(cider-d)"])
    assert len(results) == 2 and gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None
