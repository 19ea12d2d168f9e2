"""Executors: serial, local processes and Dask give the same bytes; failures are reported."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest
from capmetrics.engine.parallel import Executor, ExecutorError, compare_items, map_chunks
from capmetrics.errors import CapmetricsError
from capmetrics.plugins.multicandidate.trm import TRM

from tests.plugins.test_trm import LineDistance


def random_items(count: int, seed: int = 0) -> list[tuple[list[str], list[str]]]:
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(count):
        n, m = int(rng.integers(2, 7)), int(rng.integers(2, 7))
        items.append(
            (
                [repr(float(x)) for x in rng.normal(0, 1, n)],
                [repr(float(x)) for x in rng.normal(0.3, 1, m)],
            )
        )
    items.append((["1.0"], ["2.0", "3.0"]))  # undefined: one candidate
    return items


def as_bytes(results) -> bytes:
    return json.dumps([[r.value, r.p_value, r.details] for r in results]).encode()


@pytest.fixture(scope="module")
def items():
    return random_items(40)


@pytest.fixture(scope="module")
def serial_bytes(items):
    return as_bytes(compare_items(TRM(LineDistance(), permutations=30, seed=1), items))


def test_processes_give_the_same_bytes(items, serial_bytes):
    for chunk in (3, 64):
        out = compare_items(
            TRM(LineDistance(), permutations=30, seed=1),
            items,
            Executor("processes", jobs=2, chunk_size=chunk),
        )
        assert as_bytes(out) == serial_bytes
    assert "undefined" in json.loads(serial_bytes)[-1][2]


def test_dask_gives_the_same_bytes(items, serial_bytes):
    from distributed import LocalCluster

    out = compare_items(
        TRM(LineDistance(), permutations=30, seed=1),
        items,
        Executor("dask", jobs=2, chunk_size=7, dask_processes=False),
    )
    assert as_bytes(out) == serial_bytes
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        out = compare_items(
            TRM(LineDistance(), permutations=30, seed=1),
            items,
            Executor.from_options(address=cluster.scheduler_address),
        )
    assert as_bytes(out) == serial_bytes


def test_cider_trm_on_the_sample_is_the_same_on_processes():
    from capmetrics import compose
    from capmetrics.data.loaders import load_dataset

    from tests.conftest import SAMPLE

    items = [(i.candidates, i.references) for i in load_dataset(SAMPLE)]
    serial = compare_items(compose("trm(cider-d)"), items)
    assert all(0 <= r.value <= 2 and 0 < r.p_value <= 1 for r in serial)
    parallel = compare_items(
        compose("trm(cider-d)"), items, Executor("processes", jobs=2, chunk_size=64)
    )
    assert as_bytes(parallel) == as_bytes(serial)


def test_fitting_in_parts_on_the_workers_gives_the_same_state_and_bytes(monkeypatch):
    from capmetrics import compose
    from capmetrics.data.loaders import load_dataset
    from capmetrics.engine.parallel import fit_statistic

    from tests.conftest import SAMPLE

    items = [(i.candidates, i.references) for i in load_dataset(SAMPLE)]
    refs = [list(r) for _, r in items]
    whole, parts = compose("trm(cider-d)"), compose("trm(cider-d)")
    whole.fit(refs)
    monkeypatch.setattr("capmetrics.engine.statistics.FIT_IN_PARTS_MIN", 1)
    monkeypatch.setattr("capmetrics.engine.statistics.FIT_IN_PARTS_MIN_JOBS", 2)
    calls = []
    monkeypatch.setattr(
        type(parts.distance), "fit", lambda self, r: calls.append(r)
    )  # must not be used
    fit_statistic(parts, refs, Executor("processes", jobs=3))
    assert (
        calls == []
        and parts.distance.df_ == whole.distance.df_
        and parts.distance.n_images_ == len(items)
    )
    assert parts.signature() == whole.signature()
    monkeypatch.undo()
    monkeypatch.setattr("capmetrics.engine.statistics.FIT_IN_PARTS_MIN", 1)
    monkeypatch.setattr("capmetrics.engine.statistics.FIT_IN_PARTS_MIN_JOBS", 2)
    serial = compare_items(compose("trm(cider-d)"), items)
    assert as_bytes(
        compare_items(compose("trm(cider-d)"), items, Executor("processes", jobs=2))
    ) == as_bytes(serial)


def test_evaluate_statistic_reports_undefined_items_and_the_hmp(items):
    from capmetrics.data.model import Dataset, Item
    from capmetrics.engine.parallel import evaluate_statistic
    from capmetrics.plugins.aggregators import HarmonicMeanP

    dataset = Dataset([Item(k, tuple(r), tuple(c)) for k, (c, r) in enumerate(items)], "mem")
    res = evaluate_statistic(
        TRM(LineDistance(), permutations=30, seed=1), dataset, executor=Executor(chunk_size=9)
    )
    assert res.details["undefined"] == [
        {"item": 40, "problem": "trm needs at least 2 candidates and 2 references, got 1 and 2"}
    ]
    assert res.corpus == pytest.approx(np.nanmean(res.item_values)) and np.isnan(
        res.item_values[-1]
    )
    assert res.details["hmp"] == pytest.approx(HarmonicMeanP()(res.p_values[:-1]))
    assert sum(res.details["p_methods"].values()) == 40 and res.signature["p_value"] == "auto"


def test_unreachable_scheduler_fails_clearly():
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        map_chunks(
            _double, None, [1, 2, 3], Executor("dask", address="tcp://127.0.0.1:9", timeout=1)
        )


def _double(shared, chunk):
    return [2 * x for x in chunk]


def _die_on_three(shared, chunk):
    if 3 in chunk:
        os._exit(3)
    return chunk


def test_map_chunks_keeps_order_on_every_executor():
    data = list(range(23))
    for executor in (Executor(chunk_size=5), Executor("processes", jobs=2, chunk_size=4)):
        assert map_chunks(_double, None, data, executor) == [2 * x for x in data]


def test_a_dead_process_worker_fails_the_run():
    import re

    with pytest.raises(ExecutorError, match=r"lost a worker process .* items \d+-\d+") as info:
        map_chunks(_die_on_three, None, list(range(8)), Executor("processes", jobs=2, chunk_size=2))
    # the range names the chunk that died (items 2-3); it starts earlier when chunk 0-1 had not
    # come back before the pool broke (its result is lost too)
    start, stop = map(int, re.search(r"items (\d+)-(\d+)", str(info.value)).groups())  # type: ignore[union-attr]
    assert start in (0, 2) and stop >= 3


def test_a_dead_dask_worker_fails_the_run():
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        pytest.raises(ExecutorError, match="no results were kept"),
    ):
        map_chunks(_die_on_three, None, list(range(4)), Executor("dask", jobs=1, chunk_size=2))


def test_executor_from_options():
    assert Executor.from_options().kind == "serial"
    assert Executor.from_options(jobs=2) == Executor("processes", 2, to_the_work=True)
    assert Executor.from_options(address="tcp://h:8786").kind == "dask"
    with pytest.raises(CapmetricsError, match="unknown executor 'threads'"):
        Executor.from_options("threads")
    with pytest.raises(CapmetricsError, match="at least 1"):
        Executor.from_options(jobs=0)
    assert [len(r) for r in Executor(jobs=1, chunk_size=4).chunks(10)] == [4, 4, 2]


def test_statistics_are_fitted_once_on_all_references():
    seen = []

    class Fitting(LineDistance):
        def fit(self, references):
            seen.append([list(r) for r in references])
            return self

    compare_items(TRM(Fitting()), [(["0", "1"], ["2", "3"]), (["4", "5"], ["6", "7"])])
    assert seen == [[["2", "3"], ["6", "7"]]]


def test_dask_tasks_join_consecutive_chunks_without_moving_their_boundaries(monkeypatch):
    from capmetrics.engine.dask_executor import _grouped

    chunks = [(r, list(r)) for r in Executor(chunk_size=4).chunks(23)]
    groups = list(_grouped(iter(chunks), 9))
    assert [g[0] for g in groups] == [range(8), range(8, 16), range(16, 23)]
    assert [c for _, group in groups for c in group] == [c for _, c in chunks]
    assert [g[0] for g in _grouped(iter(chunks), 2)] == [
        r for r, _ in chunks
    ]  # a chunk is never cut
    monkeypatch.setattr("capmetrics.engine.dask_executor.DASK_TASK_ITEMS", 5)
    data = list(range(23))
    assert map_chunks(
        _double, None, data, Executor("dask", jobs=2, chunk_size=2, dask_processes=False)
    ) == [2 * x for x in data]


def test_equal_reference_sets_are_fitted_in_one_part(monkeypatch):
    from capmetrics import compose
    from capmetrics.data.loaders import load_dataset
    from capmetrics.engine import statistics

    from tests.conftest import SAMPLE

    refs = [list(i.references) for i in load_dataset(SAMPLE)]
    refs = [
        refs[k % 7] for k in range(len(refs))
    ] + refs  # many repeated sets, then every set once more
    whole, parts = compose("trm(cider-d)"), compose("trm(cider-d)")
    whole.fit(refs)
    monkeypatch.setattr(statistics, "FIT_IN_PARTS_MIN", 1)
    monkeypatch.setattr(statistics, "FIT_IN_PARTS_MIN_JOBS", 2)
    seen: list[list[list[str]]] = []
    stream = statistics.iter_stream
    monkeypatch.setattr(
        statistics,
        "iter_stream",
        lambda f, s, chunks, *a, **k: stream(
            f, s, [(span, seen.append(part) or part) for span, part in chunks], *a, **k
        ),
    )
    statistics.fit_statistic(parts, refs, Executor("processes", jobs=3))
    assert parts.distance.df_ == whole.distance.df_ and parts.distance.n_images_ == len(refs)
    assert len(seen) == 3 and sum(map(len, seen)) == len(refs)
    in_parts = [{tuple(refs[i]) for i in part} for part in seen]  # parts go as item positions
    shared = set.union(*[a & b for i, a in enumerate(in_parts) for b in in_parts[i + 1 :]])
    assert len(shared) <= 2  # only a set cut at a part boundary


def test_two_jobs_fit_in_parts_only_when_the_parts_are_integer_arrays(monkeypatch):
    from capmetrics import compose
    from capmetrics.data.loaders import load_dataset
    from capmetrics.engine import statistics

    from tests.conftest import SAMPLE

    refs = [list(i.references) for i in load_dataset(SAMPLE)]
    monkeypatch.setattr(statistics, "FIT_IN_PARTS_MIN", 1)
    stream = statistics.iter_stream
    used: list[str] = []
    monkeypatch.setattr(
        statistics, "iter_stream", lambda f, *a, **k: used.append(f.__name__) or stream(f, *a, **k)
    )
    statistic = compose("trm(cider-d)")
    assert statistic.counts_in_parts
    statistics.fit_statistic(statistic, refs, Executor("processes", jobs=2))
    assert used == ["_fit_part"] and statistic.distance.n_images_ == len(refs)
    whole = compose("trm(cider-d)")
    whole.fit(refs)
    assert dict(statistic.distance.df_) == dict(whole.distance.df_)
    assert statistic.signature() == whole.signature()
    used.clear()
    monkeypatch.setattr(
        type(statistic), "counts_in_parts", property(lambda self: False)
    )  # string parts
    strings = compose("trm(cider-d)")
    statistics.fit_statistic(strings, refs, Executor("processes", jobs=2))
    assert used == [] and strings.distance.n_images_ == len(refs)  # two jobs: fitted here
    monkeypatch.setattr(
        statistics, "FIT_IN_PARTS_MIN", 10 * len(refs)
    )  # too few distinct sets for parts
    statistics.fit_statistic(statistic, refs, Executor("processes", jobs=8))
    assert used == [] and statistic.distance.n_images_ == len(refs)


def test_freed_memory_is_kept_on_glibc():
    import platform

    from capmetrics.runtime.allocator import keep_freed_memory

    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert keep_freed_memory() is expected and keep_freed_memory() is expected


def test_a_local_cluster_starts_while_this_process_works_and_closes_after():
    from dataclasses import replace

    from capmetrics.engine.parallel import started

    plain = Executor("processes", jobs=2)
    with started(plain) as ready:
        assert ready() is plain
    with started(Executor("dask", jobs=1, dask_processes=False)) as ready:
        running = ready()
        assert running.kind == "dask" and running.address and running.jobs == 1
        import dask

        assert (
            dask.config.get("distributed.admin.tick.interval") == "20ms"
        )  # set only while starting
        assert map_chunks(_double, None, [1, 2, 3], running) == [2, 4, 6]
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler"):
        map_chunks(_double, None, [1], replace(running, timeout=1))


def test_local_clusters_run_dasks_periodic_checks_rarely():
    from capmetrics.engine.dask_executor import _local_cluster

    cluster = _local_cluster(Executor("dask", jobs=1, dask_processes=False))
    try:
        (worker,) = cluster.workers.values()
        assert cluster.scheduler.periodic_callbacks["tick"].callback_time == 1000
        assert cluster.scheduler.periodic_callbacks["monitor"].callback_time == 5000
        assert worker.periodic_callbacks["memory_monitor"].callback_time == 1000
        assert "profile" not in worker.periodic_callbacks
    finally:
        cluster.close()


# ------------------------------------------------------------------ --jobs sized to the work
@pytest.fixture
def notes(monkeypatch, capsys):
    from capmetrics.engine import executors

    monkeypatch.delenv("CAPMETRICS_QUIET", raising=False)
    executors._NOTED.clear()
    capsys.readouterr()

    def read() -> list[str]:
        executors._NOTED.clear()
        return capsys.readouterr().err.splitlines()

    return read


def test_jobs_are_capped_at_the_cores_and_the_chunks_with_a_note(monkeypatch, notes):
    from capmetrics.engine import executors

    monkeypatch.setattr(executors, "available_cores", lambda: 2)
    # the start method follows whether torch is imported (an earlier test may have): pin it
    monkeypatch.setattr(executors, "_start_method", lambda: "fork")
    big = executors.sized(Executor.from_options(jobs=1000), 6000)
    assert (big.kind, big.jobs) == ("processes", 2)
    assert notes() == ["capmetrics: --jobs 1000: 2 worker processes (fork start) (2 CPU cores)"]
    monkeypatch.setattr(executors, "available_cores", lambda: 64)
    five = executors.sized(
        Executor.from_options(jobs=1000), 5 * 10_000, chunks=5
    )  # a stream of 5 chunks
    assert (five.kind, five.jobs) == ("processes", 5)
    assert notes() == [
        "capmetrics: --jobs 1000: 5 worker processes (fork start) (64 CPU cores; 5 chunks of work)"
    ]
    assert executors.sized(Executor.from_options(jobs=4), None).jobs == 4 and notes() == [
        "capmetrics: --jobs 4: 4 worker processes (fork start)"
    ]
    # taken as given: an Executor built by hand, serial and Dask
    for executor in (Executor("processes", jobs=1000), Executor(), Executor("dask", jobs=3)):
        assert executors.sized(executor, 10) is executor
    assert notes() == []


def test_a_dask_local_cluster_is_capped_at_the_cores_like_the_process_pool(monkeypatch, notes):
    """``--executor dask --jobs 12`` on 2 cores starts a LocalCluster of 2 workers, not 12."""
    from capmetrics.engine import executors

    monkeypatch.setattr(executors, "available_cores", lambda: 2)
    capped = executors.sized(Executor.from_options("dask", jobs=12), 10_000)
    assert (capped.kind, capped.jobs) == ("dask", 2)
    assert notes() == ["capmetrics: --jobs 12: a Dask LocalCluster of 2 workers (2 CPU cores)"]
    assert executors.sized(Executor.from_options("dask", jobs=2), None).jobs == 2 and notes() == []
    remote = Executor.from_options("dask", jobs=12, address="tcp://scheduler:8786")
    assert executors.sized(remote, 10) is remote  # a cluster of someone's: its workers are its own
    started: list[int] = []

    def cluster(executor: Executor) -> None:
        started.append(executor.jobs)
        raise ExecutorError("no cluster in this test")

    monkeypatch.setattr("capmetrics.engine.dask_executor._local_cluster", cluster)
    with pytest.raises(ExecutorError, match="no cluster"):
        compare_items(
            TRM(LineDistance()), [(["a b"], ["a c"])] * 3, Executor.from_options("dask", jobs=12)
        )
    assert started == [2]


def test_too_few_items_run_in_this_process_with_a_note(monkeypatch, notes):
    from capmetrics.engine import executors

    monkeypatch.setattr(executors, "available_cores", lambda: 2)
    few = executors.sized(Executor.from_options(jobs=2), 200)
    assert (few.kind, few.jobs) == ("serial", 1)
    assert notes() == [
        "capmetrics: --jobs 2: running in this process (200 items: fewer than "
        f"{executors.PROCESS_MIN_ITEMS} per process do not pay for starting it)"
    ]
    below_three = 3 * executors.PROCESS_MIN_ITEMS - 1
    assert executors.sized(Executor.from_options(jobs=2), below_three).jobs == 2
    below_three = 3 * executors.PROCESS_MIN_ITEMS - 1
    assert executors.sized(Executor.from_options(jobs=4), below_three).jobs == 2
    notes()
    monkeypatch.setenv("CAPMETRICS_QUIET", "1")
    executors.sized(Executor.from_options(jobs=2), 10)
    assert notes() == []


def test_sized_runs_give_the_same_bytes_and_this_process_works_meanwhile(
    monkeypatch, items, serial_bytes, notes
):
    from capmetrics.engine import executors

    monkeypatch.setattr(executors, "available_cores", lambda: 2)
    for min_items, kind in ((1, "worker processes"), (10_000, "running in this process")):
        monkeypatch.setattr(executors, "PROCESS_MIN_ITEMS", min_items)
        meanwhile: list[int] = []
        out = compare_items(
            TRM(LineDistance(), permutations=30, seed=1),
            items,
            replace(Executor.from_options(jobs=2), chunk_size=3),
            while_running=lambda: meanwhile.append(os.getpid()),
        )  # noqa: B023
        assert as_bytes(out) == serial_bytes and meanwhile == [os.getpid()]
        assert kind in notes()[0]


def test_forkserver_workers_are_started_with_capmetrics_imported(monkeypatch):
    from multiprocessing import forkserver

    from capmetrics.engine import executors

    monkeypatch.setattr(executors, "_start_method", lambda: "forkserver")
    before = list(forkserver._forkserver._preload_modules)
    with executors._process_context(_double) as context:
        assert context.get_start_method() == "forkserver"
        preload = forkserver._forkserver._preload_modules
        assert {
            "capmetrics.engine.workers",
            "capmetrics.components.permutation",
            _double.__module__,
        } <= set(preload)
    assert forkserver._forkserver._preload_modules == before  # the process-wide list put back
    data = list(range(9))
    assert map_chunks(_double, None, data, Executor("processes", jobs=2, chunk_size=2)) == [
        2 * x for x in data
    ]


def test_cli_jobs_above_the_work_are_capped_with_a_note(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    sample = (
        Path(__file__).resolve().parents[2] / "core" / "sample" / "flickr8k_expert_sample.jsonl"
    )
    env = {k: v for k, v in os.environ.items() if k != "CAPMETRICS_QUIET"}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "capmetrics.cli",
            "score",
            str(sample),
            "-m",
            "trm(distance=cider-d)",
            "--jobs",
            "1000",
            "--format",
            "json",
            "-q",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "capmetrics: --jobs 1000: running in this process (" in run.stderr
    serial = subprocess.run(
        [
            sys.executable,
            "-m",
            "capmetrics.cli",
            "score",
            str(sample),
            "-m",
            "trm(distance=cider-d)",
            "--format",
            "json",
            "-q",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert json.loads(run.stdout)["metrics"] == json.loads(serial.stdout)["metrics"]


def test_this_process_work_runs_beside_the_feeding_and_its_error_is_raised(
    monkeypatch, items, serial_bytes
):
    """``while_running`` runs in a thread of this process (the workers keep being fed while it
    works): results still arrive complete and in order, and its failure is not swallowed."""
    import threading

    from capmetrics.engine import executors

    monkeypatch.setattr(executors, "available_cores", lambda: 2)
    monkeypatch.setattr(executors, "PROCESS_MIN_ITEMS", 1)
    executor = replace(Executor.from_options(jobs=2), chunk_size=3)
    threads: list[str] = []
    out = compare_items(
        TRM(LineDistance(), permutations=30, seed=1),
        items,
        executor,
        while_running=lambda: threads.append(threading.current_thread().name),
    )
    assert (
        as_bytes(out) == serial_bytes
        and len(threads) == 1
        and threads[0] != threading.current_thread().name
    )

    def fails() -> None:
        raise ValueError("signature failed")

    with pytest.raises(ValueError, match="signature failed"):
        compare_items(
            TRM(LineDistance(), permutations=30, seed=1), items, executor, while_running=fails
        )


FORKED_ITEMS_SCRIPT = """
import gc, json, sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from capmetrics import compose
from capmetrics.data.loaders import load_dataset
from capmetrics.engine import executors
from capmetrics.engine.parallel import Executor, compare_items
sent = []
submit = ProcessPoolExecutor.submit
ProcessPoolExecutor.submit = lambda self, fn, *args: sent.extend(args) or submit(self, fn, *args)
executors.PROCESS_MIN_ITEMS = 1
items = [(i.candidates, i.references) for i in load_dataset(sys.argv[1])]
rows = lambda results: [[r.value, r.p_value, r.details] for r in results]
serial = rows(compare_items(compose("trm(cider-d)"), items))
jobs2 = replace(Executor.from_options(jobs=2), chunk_size=3)
got = rows(compare_items(compose("trm(cider-d)"), items, jobs2))
print(json.dumps({"start": executors._start_method(), "same": got == serial, "items": len(items),
                  "sent": [type(s).__name__ for s in sent], "frozen": gc.get_freeze_count()}))
"""


def test_forked_workers_read_their_items_from_inherited_memory():
    """With ``source`` and fork start, only the spans go to the workers (no item is pickled),
    the values are the serial ones, and the collector is unfrozen when the pool is done. In a
    fresh interpreter: one that has loaded torch (other tests) starts workers from a forkserver."""
    import subprocess
    import sys

    from tests.conftest import SAMPLE

    if not sys.platform.startswith("linux"):
        pytest.skip("fork start: Linux")
    done = subprocess.run(
        [sys.executable, "-c", FORKED_ITEMS_SCRIPT, str(SAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["start"] == "fork" and out["same"] and out["frozen"] == 0
    assert len(out["sent"]) == -(-out["items"] // 3) and set(out["sent"]) == {"range"}


def test_the_script_ends_without_teardown_but_runs_exit_handlers_and_keeps_codes(tmp_path):
    """``capmetrics.cli.run`` (the script) flushes the streams, runs atexit handlers and exits
    with main's code: 0 with the whole output, 2 for a usage error."""
    import subprocess
    import sys

    from tests.conftest import SAMPLE

    script = (
        "import atexit, sys\nfrom capmetrics.cli import run\n"
        "atexit.register(lambda: print('exit handler ran', file=sys.stderr))\n"
        "sys.argv = ['capmetrics', *sys.argv[1:]]\nrun()\n"
    )
    ok = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "score",
            str(SAMPLE),
            "-m",
            "bleu-4",
            "--format",
            "json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and "exit handler ran" in ok.stderr
    assert (
        len(json.loads(ok.stdout)["metrics"][0]["items"]) == 20
    )  # the whole JSON document arrived
    bad = subprocess.run(
        [sys.executable, "-c", script, "score", str(SAMPLE), "--jobs", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "exit handler ran" in bad.stderr and "--jobs" in bad.stderr


# ------------------------------------------------------------------ start method, caller's state
def test_the_start_method_follows_its_documented_rules(monkeypatch):
    """fork on Linux unless torch is imported, an OpenMP runtime is loaded or another non-daemon
    thread runs (then forkserver); daemon threads do not count."""
    import sys
    import threading
    import types

    from capmetrics.engine import executors

    if not sys.platform.startswith("linux"):
        assert executors._start_method() == "spawn"
        return
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(executors, "_fork_unsafe_library_loaded", lambda: False)
    running = [threading.current_thread()]
    monkeypatch.setattr(threading, "enumerate", lambda: list(running))
    assert executors._start_method() == "fork"
    running.append(threading.Thread(target=print, daemon=True))  # a refresher, a heartbeat
    assert executors._start_method() == "fork"
    running.append(threading.Thread(target=print, daemon=False))  # work in progress
    assert executors._start_method() == "forkserver"
    running.pop()
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    assert executors._start_method() == "forkserver"
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(executors, "_fork_unsafe_library_loaded", lambda: True)
    assert executors._start_method() == "forkserver"


OPENMP_SCRIPT = """
import ctypes, ctypes.util, json, sys
from capmetrics.engine import executors
before = (executors._start_method(), executors._fork_unsafe_library_loaded())
ctypes.CDLL(sys.argv[1])
print(json.dumps([before, [executors._start_method(), executors._fork_unsafe_library_loaded()]]))
"""


def test_a_loaded_openmp_runtime_means_forkserver():
    """In a fresh interpreter: fork, until GNU OpenMP is loaded into the process."""
    import ctypes.util
    import subprocess
    import sys

    gomp = ctypes.util.find_library("gomp")
    if not sys.platform.startswith("linux") or gomp is None:
        pytest.skip("needs Linux and libgomp")
    done = subprocess.run(
        [sys.executable, "-c", OPENMP_SCRIPT, gomp], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["fork", False], ["forkserver", True]]


def _blas_threads(shared, chunk):
    from capmetrics.engine.workers import single_threaded_blas
    from threadpoolctl import threadpool_info

    with single_threaded_blas():
        pass
    return [max([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] or [0])]


def test_a_map_leaves_the_caller_as_it_found_it_and_workers_keep_their_tuning():
    """After a map on local processes the caller holds no worker state, its collector is not
    frozen, its BLAS threads are as before and no thread is left; a worker, being capmetrics'
    own, keeps BLAS at one thread after a statistic's chunk."""
    import gc
    import threading

    from capmetrics.engine import workers

    threadpool_info = pytest.importorskip("threadpoolctl").threadpool_info
    blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    threads = threading.active_count()
    serial = map_chunks(_blas_threads, None, [0, 1], Executor(chunk_size=1))
    pooled = map_chunks(_blas_threads, None, [0, 1], Executor("processes", jobs=2, chunk_size=1))
    assert serial == [max(blas or [0])] * 2  # the caller's own setting, restored after each chunk
    assert pooled == [1 if blas else 0] * 2
    assert workers._task is None and not workers._blas_limited
    assert gc.get_freeze_count() == 0 and threading.active_count() == threads
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == blas
