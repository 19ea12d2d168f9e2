"""capmetrics.collector: the dataset frozen for a run, parsing with the collector paused."""

from __future__ import annotations

import gc

import pytest

from capmetrics.collector import frozen, paused


def test_frozen_nests_and_unfreezes_everything_at_the_outermost_end():
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


def test_paused_restores_the_collector_as_it_was():
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


def test_a_scoring_run_leaves_nothing_frozen_and_cycles_made_meanwhile_are_collected():
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
