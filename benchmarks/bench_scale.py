"""Scale targets of issue 12, on Flickr8k captions, printed against their targets.

* TRM-CIDEr-D, 10 candidates + 5 references with p-values (auto: 1,000 Monte-Carlo splits of
  3,003): ``--jobs`` 1, 2 and 4/8/16 where the cores exist; target ``--jobs 2`` ≥ 1.7× ``--jobs 1``
  (goal ≥ 0.75 × jobs). Values are checked equal across job counts.
* The same on a Dask LocalCluster of 2 worker processes against ``--jobs 2`` (target: within 20 %),
  with the cluster started by the run and already running.
* Streaming: ``capmetrics score`` on a synthetic JSONL (5 references, one candidate per item) with
  bleu-4, rouge-l and cider-d in chunks; peak RSS of the command (target ≤ 2 GB for 1,000,000
  items), and the same bytes as the in-memory run on a smaller file; then through ``--scheduler``.
* With a CUDA GPU: MMD over MiniLM (10+5, Monte-Carlo p-values), one process and ``--jobs``.

Run: ``.venv/bin/python benchmarks/bench_scale.py [--items 20000] [--stream-items 1000000]``.
The machine load (1-minute average) is printed with every row: numbers taken under load are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_statistics import captions, make_items  # noqa: E402
from capmetrics import compose  # noqa: E402
from capmetrics.cli.process import tune  # noqa: E402
from capmetrics.engine.parallel import Executor, compare_items  # noqa: E402

tune()  # this script owns its process and times what the capmetrics command does: tune it alike

CLI = [sys.executable, "-m", "capmetrics.cli"]


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def values(results) -> list[tuple[float, float | None]]:  # type: ignore[no-untyped-def]
    return [(r.value, r.p_value) for r in results]


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process and of its finished children so far."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def projected(main_cpu: float, workers_cpu: float, jobs: int) -> float:
    """Seconds on an idle box of ``jobs`` cores: the main process, then the workers in parallel."""
    return main_cpu + workers_cpu / jobs


def bench_jobs(items: list, spec: str) -> tuple[float, float]:
    cores = os.cpu_count() or 1
    counts = [1, 2] + [j for j in (4, 8, 16) if j <= cores]
    print(f"{spec}, {len(items)} items of 10 candidates + 5 references ({cores} cores)")
    base, rate2, reference = 0.0, 0.0, None
    serial_cpu = cpu2 = 0.0
    for jobs in counts:
        before = cpu_seconds()
        out, sec = timed(
            lambda: compare_items(compose(spec), items, Executor.from_options(jobs=jobs))
        )  # noqa: B023
        main_cpu, workers_cpu = (a - b for a, b in zip(cpu_seconds(), before))
        serial_cpu = serial_cpu or main_cpu
        got = values(out)
        reference = reference or got
        assert got == reference, f"--jobs {jobs} gave other values"
        rate = len(items) / sec
        base = base or rate
        rate2 = rate if jobs == 2 else rate2
        goal = (
            " (target ≥ 1.70×)"
            if jobs == 2
            else f" (goal ≥ {0.75 * jobs:.2f}×)"
            if jobs > 2
            else ""
        )
        print(f"  --jobs {jobs:2d}: {rate:8.1f} items/s  {rate / base:5.2f}×{goal}  [{load()}]")
        if (
            jobs > 1
        ):  # what the CPU time implies for an idle box: main process, then the workers in parallel
            idle = projected(main_cpu, workers_cpu, jobs)
            cpu2 = idle if jobs == 2 else cpu2
            print(
                f"             CPU: main {main_cpu:.1f} s + workers {workers_cpu:.1f} s (serial "
                f"{serial_cpu:.1f} s) -> {serial_cpu / idle:.2f}× on an idle box"
            )
    return rate2, cpu2


def _worker_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def bench_dask(items: list, spec: str, rate_jobs2: float, idle_jobs2: float) -> None:
    """Wall-clock rates against ``--jobs 2``, and the same from CPU time (``idle_jobs2``: the
    projected seconds of ``--jobs 2`` on an idle box; 0 when not measured)."""
    from distributed import Client, LocalCluster

    def cpu_line(main_cpu: float, workers_cpu: float, what: str) -> str:
        idle = projected(main_cpu, workers_cpu, 2)
        vs = f" -> {idle_jobs2 / idle:.2f}× --jobs 2 on an idle box" if idle_jobs2 else ""
        return f"             CPU: main {main_cpu:.1f} s + workers {workers_cpu:.1f} s ({what}){vs}"

    print(
        f"Dask LocalCluster, 2 worker processes, {len(items)} items (target: within 20 % of --jobs "
        "2)"
    )
    before = cpu_seconds()
    _, sec = timed(lambda: compare_items(compose(spec), items, Executor("dask", jobs=2)))
    main_cpu, workers_cpu = (a - b for a, b in zip(cpu_seconds(), before))
    print(
        f"  cluster started by the run : {len(items) / sec:8.1f} items/s  "
        f"{len(items) / sec / rate_jobs2:5.2f}× --jobs 2  [{load()}]"
    )
    print(
        cpu_line(
            main_cpu,
            workers_cpu,
            "with starting and stopping the cluster; main includes the scheduler",
        )
    )
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        executor = Executor.from_options(address=cluster.scheduler_address)
        main_before, workers_before = cpu_seconds()[0], sum(client.run(_worker_cpu).values())
        _, sec = timed(lambda: compare_items(compose(spec), items, executor))
        main_cpu, workers_cpu = (
            cpu_seconds()[0] - main_before,
            sum(client.run(_worker_cpu).values()) - workers_before,
        )
    print(
        f"  cluster already running   : {len(items) / sec:8.1f} items/s  "
        f"{len(items) / sec / rate_jobs2:5.2f}× --jobs 2  [{load()}]"
    )
    print(cpu_line(main_cpu, workers_cpu, "main includes the scheduler"))


def write_jsonl(path: Path, count: int, caps: list[list[str]]) -> None:
    """``count`` items: an image's 5 captions as references, another image's caption as
    candidate."""
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as f:
        for i in range(count):
            image = i % len(caps)
            other = caps[(image + 1 + rng.randrange(len(caps) - 1)) % len(caps)]
            f.write(
                json.dumps(
                    {
                        "id": f"{i}",
                        "references": caps[image][:5],
                        "candidates": [other[rng.randrange(len(other))]],
                    }
                )
                + "\n"
            )


def run_cli(args: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (GB) of one ``capmetrics`` command (a fresh child process)."""
    start = time.perf_counter()
    proc = subprocess.run(CLI + args, capture_output=True, text=True)
    sec = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"capmetrics {' '.join(args)} failed:\n{proc.stderr}")
    # ru_maxrss of the children is the largest so far: runs are ordered from the largest file down
    return sec, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20


def bench_stream(count: int, check_count: int, caps: list[list[str]], chunk: int) -> None:
    metrics = ["-m", "bleu-4", "-m", "rouge-l", "-m", "cider-d"]
    with tempfile.TemporaryDirectory(dir=os.environ.get("CAPMETRICS_BENCH_TMP")) as tmp:
        big = Path(tmp) / "big.jsonl"
        write_jsonl(big, count, caps)
        size = big.stat().st_size / 2**20
        print(
            f"Streaming: {count:,} items ({size:,.0f} MiB JSONL), bleu-4 + rouge-l + cider-d, "
            f"chunks of {chunk:,}"
        )
        sec, rss = run_cli(
            [
                "score",
                str(big),
                "-q",
                "--chunk-size",
                str(chunk),
                "--out",
                f"{tmp}/big.json",
                *metrics,
            ]
        )
        print(
            f"  streamed, one process : {count / sec:8.0f} items/s, peak RSS {rss:5.2f} GB (target "
            f"≤ 2 GB)  [{load()}]"
        )
        corpus = {m["name"]: m["corpus"] for m in _metrics(Path(f"{tmp}/big.json"))}
        from distributed import LocalCluster

        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster:
            sec, _ = run_cli(
                [
                    "score",
                    str(big),
                    "-q",
                    "--chunk-size",
                    str(chunk),
                    "--scheduler",
                    cluster.scheduler_address,
                    "--out",
                    f"{tmp}/dask.json",
                    *metrics,
                ]
            )
        same = corpus == {m["name"]: m["corpus"] for m in _metrics(Path(f"{tmp}/dask.json"))}
        same = (
            same and Path(f"{tmp}/big.json").read_bytes() == Path(f"{tmp}/dask.json").read_bytes()
        )
        print(
            f"  streamed, Dask (2 workers) : {count / sec:8.0f} items/s; same bytes as one "
            f"process: {same}  [{load()}]"
        )
        small = Path(tmp) / "small.jsonl"
        write_jsonl(small, check_count, caps)
        run_cli(
            ["score", str(small), "-q", "--chunk-size", "997", "--out", f"{tmp}/s1.json", *metrics]
        )
        run_cli(["score", str(small), "-q", "--out", f"{tmp}/s2.json", *metrics])
        equal = Path(f"{tmp}/s1.json").read_bytes() == Path(f"{tmp}/s2.json").read_bytes()
        print(
            f"  {check_count:,} items streamed (chunks of 997) == in memory, byte for byte: {equal}"
        )
        print(
            f"  corpus values on {count:,} items: "
            + ", ".join(f"{k} {v:.4f}" for k, v in corpus.items())
        )


def _metrics(path: Path) -> list[dict]:
    """The metrics of a results file without their items (read piece by piece would be nicer;
    json.load of the whole file is fine for the benchmark's sizes)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return [{k: v for k, v in m.items() if k != "items"} for m in data["metrics"]]


def bench_gpu(items: list) -> None:
    try:
        import torch
    except ImportError:
        print("GPU rows: unmeasured (torch is not installed)")
        return
    if not torch.cuda.is_available():
        print("GPU rows: unmeasured (torch sees no CUDA device)")
        return
    spec = "mmd(embedder=bert(device=cuda), p_value=monte-carlo)"
    print(f"{spec} on {torch.cuda.get_device_name(0)}, {len(items)} items (target ≥ 1,500 items/s)")
    for jobs in (1, 2, min(8, os.cpu_count() or 1)):
        _, sec = timed(
            lambda: compare_items(compose(spec), items, Executor.from_options(jobs=jobs))
        )  # noqa: B023
        print(f"  --jobs {jobs}: {len(items) / sec:8.1f} items/s  [{load()}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--stream-items", type=int, default=1_000_000)
    parser.add_argument("--check-items", type=int, default=20_000)
    parser.add_argument("--chunk-size", type=int, default=10_000)
    parser.add_argument("--skip", nargs="*", default=[], choices=["jobs", "dask", "stream", "gpu"])
    args = parser.parse_args()
    caps = captions()
    items = make_items(caps, args.items, 10, 5)
    spec = "trm(distance=cider-d)"
    rate2, idle2 = bench_jobs(items, spec) if "jobs" not in args.skip else (0.0, 0.0)
    if "dask" not in args.skip:
        if not rate2:
            _, sec = timed(
                lambda: compare_items(compose(spec), items, Executor.from_options(jobs=2))
            )
            rate2 = len(items) / sec
        bench_dask(items, spec, rate2, idle2)
    if "stream" not in args.skip:
        bench_stream(args.stream_items, args.check_items, caps, args.chunk_size)
    if "gpu" not in args.skip:
        bench_gpu(items)


if __name__ == "__main__":
    main()
