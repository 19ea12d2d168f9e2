"""Model work runs once in the parent; workers get arrays; a killed worker fails the run."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
from capmetrics.engine.parallel import Executor, ExecutorError, compare_items, map_chunks
from capmetrics.plugins.multicandidate.kernels import MMD, Frechet
from capmetrics.plugins.multicandidate.trm import TRM

from tests.core import parent_only
from tests.core.parent_only import PARENT_ENV, ParentOnlyDistance, ParentOnlyEmbedder

WORDS = "a dog runs on the grass while two children play with red ball near water".split()


def items(count: int = 30) -> list[tuple[list[str], list[str]]]:
    out = []
    for i in range(count):
        n, m = 3 + i % 4, 2 + i % 3
        cands = [" ".join(WORDS[(i + 2 * j + k) % len(WORDS)] for k in range(4)) for j in range(n)]
        refs = [" ".join(WORDS[(3 * i + j + k) % len(WORDS)] for k in range(5)) for j in range(m)]
        out.append((cands, refs))
    out.append((["only one"], ["r1", "r2"]))  # undefined
    return out


def statistics():
    return {
        "mmd": MMD(ParentOnlyEmbedder(), p_value="monte-carlo", permutations=40, seed=3),
        "frechet": Frechet(ParentOnlyEmbedder(), p_value="auto", permutations=100),
        "trm": TRM(ParentOnlyDistance(), p_value="monte-carlo", permutations=40),
    }


def as_bytes(results) -> bytes:
    return json.dumps([[r.value, r.p_value, r.details] for r in results]).encode()


@pytest.fixture(scope="module")
def parent_pid():
    old = os.environ.get(PARENT_ENV)
    os.environ[PARENT_ENV] = str(os.getpid())
    yield os.getpid()
    if old is None:
        del os.environ[PARENT_ENV]
    else:
        os.environ[PARENT_ENV] = old


def test_the_refusing_model_refuses_outside_the_parent(parent_pid):
    # forked workers fail when called; forkserver workers (torch loaded here) already on import
    with pytest.raises((RuntimeError, ExecutorError), match="not the parent|lost a worker process"):
        compare_items(
            _Leaky(ParentOnlyEmbedder(), p_value="none"), items(4), Executor("processes", jobs=2)
        )


class _Leaky(MMD):
    """An MMD that (wrongly) embeds in the workers: shows that the guard catches it."""

    pooled_in_parent = False


def test_values_are_byte_identical_on_every_executor_and_the_model_stays_in_the_parent(parent_pid):
    from distributed import LocalCluster

    data = items()
    serial = {}
    for name, stat in statistics().items():
        parent_only.CALLS.clear()
        serial[name] = as_bytes(compare_items(stat, data))
        if name != "trm":  # one embedding call for the whole block, in this process
            assert parent_only.CALLS == [(parent_pid, sum(len(c) + len(r) for c, r in data[:-1]))]
    assert json.loads(serial["mmd"])[-1][2]["undefined"].startswith(
        "mmd needs at least 2 candidates"
    )
    for name, stat in statistics().items():
        out = compare_items(stat, data, Executor("processes", jobs=2, chunk_size=4))
        assert as_bytes(out) == serial[name], name
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        for name, stat in statistics().items():
            out = compare_items(
                stat, data, Executor.from_options(address=cluster.scheduler_address)
            )
            assert as_bytes(out) == serial[name], name


def _kill_on_five(shared, chunk):
    if 5 in chunk:
        os.kill(os.getpid(), signal.SIGKILL)
    return chunk


def killed_range(message: str) -> range:
    first, last = re.search(r"items (\d+)-(\d+) were running or queued", message).groups()
    return range(int(first), int(last) + 1)


def test_a_worker_killed_mid_run_fails_the_run_naming_executor_and_items():
    with pytest.raises(
        ExecutorError, match=r"processes executor \(2 jobs\) lost a worker process"
    ) as err:
        map_chunks(
            _kill_on_five, None, list(range(12)), Executor("processes", jobs=2, chunk_size=2)
        )
    assert 5 in killed_range(str(err.value)) and "no results were kept" in str(err.value)


def test_a_dask_worker_killed_mid_run_fails_the_run_naming_executor_and_items():
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        pytest.raises(
            ExecutorError,
            match=r"Dask executor \(LocalCluster of 1 workers\) lost a worker while "
            r"items \d+-\d+ were running",
        ) as err,
    ):
        map_chunks(_kill_on_five, None, list(range(8)), Executor("dask", jobs=1, chunk_size=2))
    assert 5 in killed_range(str(err.value))
