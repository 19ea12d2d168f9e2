"""A library call leaves the host process as it found it; the capmetrics command tunes its own.

Each check runs in a fresh interpreter: the collector, signal handlers and allocator are
process-wide, and this test process is not a clean host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import ROOT, SAMPLE

HOST = textwrap.dedent("""
    import gc, json, signal, sys, warnings
    import capmetrics
    from capmetrics import allocator, parallel
    from capmetrics.engine.parallel import Executor

    dataset = capmetrics.load_dataset(sys.argv[1])
    metrics = ["bleu-4", "cider-d", "trm(cider-d)"]
    capmetrics.score(dataset, metrics)  # warm: caches filled before the host freezes
    held = [[i] for i in range(5000)]  # the host's own long-lived objects
    gc.freeze()
    state = lambda: {"frozen": gc.get_freeze_count(), "enabled": gc.isenabled(),
                     "threshold": list(gc.get_threshold()), "showwarning": id(warnings.showwarning),
                     "signals": [str(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGHUP)]}
    before = state()
    serial = capmetrics.score(capmetrics.load_dataset(sys.argv[1]), metrics)
    after_serial = state()
    processes = capmetrics.score(dataset, metrics,
                                 executor=Executor("processes", jobs=2, chunk_size=5))
    after_processes = state()
    after_processes["frozen"] -= after_serial["frozen"]  # a third call frees nothing frozen: 0
    gc.disable()
    capmetrics.load_dataset(sys.argv[1])
    disabled_stays = not gc.isenabled()
    print(json.dumps({"before": before, "after_serial": after_serial,
                      "after_processes": after_processes, "disabled_stays": disabled_stays,
                      "allocator_tuned": allocator._outcome is not None,
                      "same": [serial[m].corpus for m in serial]
                      == [processes[m].corpus for m in processes]}))
""")


def _run(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_score_leaves_the_hosts_collector_signals_allocator_and_warnings_as_it_found_them():
    out = _run(HOST, str(SAMPLE))
    frozen = out["before"].pop("frozen")
    assert frozen > 5000  # the host's frozen objects stay frozen (thawed, the count would be 0);
    # the count drops only by the few frozen objects freed meanwhile (module-level cache entries
    # replaced: a few dozen at most; a thaw, even a partial one, would lose thousands)
    assert frozen - 64 <= out["after_serial"].pop("frozen") <= frozen
    assert out["after_serial"] == out["before"]  # collector switch, thresholds, signals, warnings
    assert out["after_processes"].pop("frozen") == 0  # forked workers freeze their own copy
    assert out["after_processes"] == out["after_serial"]
    assert out["disabled_stays"] and not out["allocator_tuned"] and out["same"]


COMMAND = textwrap.dedent("""
    import gc, json, signal, sys
    from capmetrics import allocator, collector, compose
    from capmetrics.cli import app, main
    from capmetrics.engine.parallel import compare_items

    @app.command("probe")
    def probe() -> None:
        out = {"owned": collector.owns_process() and allocator.owns_process(),
               "sigterm": signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None),
               "tuned_before_statistics": allocator._outcome is not None}
        compare_items(compose("trm(cider-d)"), [(["a dog", "a cat"], ["a dog runs", "a cat"])] * 2)
        out["tuned_by_statistics"] = allocator._outcome is not None
        print(json.dumps(out))

    sys.argv = ["capmetrics", "probe"]
    main()
""")


def test_the_command_tunes_its_own_process():
    """The collector and signals from the start, the allocator where statistics run (as before:
    a run of distances alone keeps glibc's defaults)."""
    out = _run(COMMAND)
    assert out == {
        "owned": True,
        "sigterm": True,
        "tuned_before_statistics": False,
        "tuned_by_statistics": True,
    }


def _freeze_count(shared: object, items: list[int]) -> list[int]:
    import gc

    return [gc.get_freeze_count() for _ in items]


def test_worker_processes_freeze_what_they_inherit_and_the_caller_stays_unfrozen():
    import gc

    from capmetrics.engine.parallel import Executor, iter_stream

    chunks = [(range(i, i + 1), [i]) for i in range(4)]
    counts = [
        c
        for part in iter_stream(_freeze_count, None, chunks, Executor("processes", jobs=2))
        for c in part
    ]
    assert len(counts) == 4 and all(c > 0 for c in counts)
    assert gc.get_freeze_count() == 0


def test_tasks_run_in_the_callers_own_process_do_not_tune_it(monkeypatch):
    import os
    import pickle

    from capmetrics.engine import workers

    calls: list[int] = []
    monkeypatch.setattr(workers, "keep_freed_memory", lambda: calls.append(1) or True)
    chunks = pickle.dumps([[1, 2]])
    assert workers.run_pickled_chunks(_freeze_count, None, chunks, True, os.getpid()) == [[0, 0]]
    assert calls == []  # a Dask thread worker of the caller: the caller's allocator is left alone
    workers.run_pickled_chunks(_freeze_count, None, chunks, True, os.getpid() + 1)
    assert calls == [1]  # a worker process of its own
