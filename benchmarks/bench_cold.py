"""Cold paths of issue 31, side by side in one run: items 1 and 3.

1. **First METEOR use**: ``capmetrics score core/sample/flickr8k_expert_sample.jsonl`` with an
   empty ``$CAPMETRICS_CACHE_DIR`` (resource tables built by a child process, aligner compiled by
   another), then the same command warm. Targets: peak RSS ≤ 500 MB, wall ≤ 20 s, values equal to
   the warm run's. Peak RSS is given two ways: the largest single process (what ``/usr/bin/time
   -v`` reports) and the largest sum over the whole process tree at one moment (what a container's
   memory limit sees).
2. **Fan-out**: ``score -m "trm(distance=cider-d)"`` (5 candidates + 5 references per item, from
   Flickr8k as in bench_scale.py, with p-values) with ``--jobs 1`` and ``--jobs 2``, whole process,
   on 200, 6,000 and 20,000 items. Targets: ≥ 1.5× on 6,000, ≥ 1.7× on 20,000, never slower than
   serial on 200; the output files byte-identical. Each configuration runs ``--repeat`` times,
   alternating, and the best wall time counts.

Every row carries the 1-minute load average. Fan-out wall times come from plain runs with
nothing watching them (a /proc sampler costs a share of a core, which a run keeping both cores
busy feels and a serial run does not), their CPU from ``getrusage`` of the whole process tree;
one more run of each configuration is sampled from /proc every 10 ms for the main process's and
the workers' CPU seconds, from which the run's wall on an idle box is projected (the main process
alone before its first worker and after its last; in between the longer of its own work and the
workers' CPU shared over the cores).

Run: ``.venv/bin/python benchmarks/bench_cold.py [--repeat 3] [--skip-meteor] [--skip-jobs]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_statistics import captions, make_items  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"
CLI = [sys.executable, "-m", "capmetrics.cli"]
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


@dataclass
class Tree:
    """What a command and its descendants used, sampled from /proc every few milliseconds."""

    wall: float = 0.0
    peak_sum: int = 0  # bytes: the largest sum of the tree's RSS at one moment
    peak_one: int = 0  # bytes: the largest single process
    cpu: dict[int, float] = field(default_factory=dict)  # pid -> CPU seconds (last sample)
    main_at_kids: list[float] = field(default_factory=list)  # main CPU while it had children
    stdout: str = ""
    stderr: str = ""

    def main_cpu(self, pid: int) -> float:
        return self.cpu.get(pid, 0.0)

    def others_cpu(self, pid: int) -> float:
        return sum(c for p, c in self.cpu.items() if p != pid)

    def idle_wall(self, pid: int, cores: int) -> float:
        """The wall time on an idle box of ``cores`` cores, from the CPU seconds: the main
        process alone before its first child and after its last, and in between the longer of
        its own work and the children's shared over the cores."""
        main, others = self.main_cpu(pid), self.others_cpu(pid)
        if not self.main_at_kids or not others:
            return main + others
        first, last = self.main_at_kids[0], self.main_at_kids[-1]
        return first + max(last - first, others / cores) + (main - last)


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(parent, []).append(int(entry))
    return kids


def _sample(root: int, tree: Tree) -> None:
    kids, todo, total = _children(), [root], 0
    if kids.get(root):
        try:
            with open(f"/proc/{root}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            tree.main_at_kids.append((int(fields[11]) + int(fields[12])) / TICK)
        except OSError:
            pass
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        rss = int(fields[21]) * PAGE
        tree.cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
        tree.peak_one = max(tree.peak_one, rss)
        total += rss
    tree.peak_sum = max(tree.peak_sum, total)


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[Tree, int]:
    """Run ``capmetrics args``; the tree's use and the main process id."""
    tree = Tree()
    start = time.perf_counter()
    proc = subprocess.Popen(
        CLI + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            _sample(proc.pid, tree)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    tree.stdout, tree.stderr = proc.communicate()
    tree.wall = time.perf_counter() - start
    done.set()
    watcher.join()
    if proc.returncode:
        raise SystemExit(
            f"capmetrics {' '.join(args)} failed ({proc.returncode}):\n{tree.stderr[-3000:]}"
        )
    return tree, proc.pid


def timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (the whole process tree: waited-for children are counted) of
    ``capmetrics args``, with nothing sampling it: the /proc sampler of :func:`run` costs a
    share of a core that a run keeping both cores busy would feel."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(CLI + args, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(
            f"capmetrics {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def mb(n: int) -> str:
    return f"{n / 2**20:6.0f} MB"


# ---------------------------------------------------------------------------------- item 1
def bench_meteor() -> None:
    print(
        "1. first METEOR use: capmetrics score <Flickr8k-Expert sample> (default set), empty cache"
    )
    args = ["score", str(SAMPLE), "--format", "json"]
    with tempfile.TemporaryDirectory(prefix="capmetrics-cold-") as cache:
        env = {**os.environ, "CAPMETRICS_CACHE_DIR": cache}
        env.pop("CAPMETRICS_QUIET", None)
        cold, pid = run(args, env)
        cpu = sum(cold.cpu.values())
        print(
            f"   cold: {cold.wall:6.1f} s wall (target ≤ 20 s), {cpu:5.1f} s CPU in all processes, "
            f"peak RSS {mb(cold.peak_one)} one process / {mb(cold.peak_sum)} whole tree (target ≤ "
            f"500 MB)  [{load()}]"
        )
        for line in cold.stderr.splitlines():
            if line.startswith("capmetrics:"):
                print(f"      {line}")
        warm, _ = run(args, env)
        print(
            f"   warm: {warm.wall:6.1f} s wall, peak RSS {mb(warm.peak_one)} one process  "
            f"[{load()}]"
        )
        same = json.loads(cold.stdout)["metrics"] == json.loads(warm.stdout)["metrics"]
        print(f"   values cold == warm: {same}")
        if not same:
            raise SystemExit("cold and warm values differ")


# ---------------------------------------------------------------------------------- item 3
def write_items(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, (cands, refs) in enumerate(make_items(captions(), count, 5, 5)):
            f.write(json.dumps({"id": str(i), "candidates": cands, "references": refs}) + "\n")


def bench_jobs(counts: list[int], repeat: int) -> None:
    cores = len(os.sched_getaffinity(0))
    print(
        f"3. fan-out: score -m 'trm(distance=cider-d)' (5+5, p-values), whole process, {cores} "
        f"cores; best of {repeat}"
    )
    targets = {200: "never slower than serial", 6000: "≥ 1.50×", 20000: "≥ 1.70×"}
    with tempfile.TemporaryDirectory(prefix="capmetrics-jobs-") as tmp:
        for count in counts:
            data = Path(tmp) / f"items{count}.jsonl"
            write_items(data, count)
            best: dict[int, float] = {}
            projected: dict[int, float] = {}
            split: dict[int, tuple[float, float]] = {}
            outputs: dict[int, bytes] = {}
            notes: set[str] = set()
            cpu: dict[int, float] = {}
            for _ in range(repeat):  # wall times: plain runs, alternating, nothing sampling them
                for jobs in (1, 2):
                    out = Path(tmp) / f"out{count}-{jobs}.json"
                    wall, used = timed(
                        [
                            "score",
                            str(data),
                            "-m",
                            "trm(distance=cider-d)",
                            "--jobs",
                            str(jobs),
                            "--format",
                            "json",
                            "-q",
                            "--out",
                            str(out),
                        ]
                    )
                    if wall < best.get(jobs, float("inf")):
                        best[jobs], cpu[jobs] = wall, used
                    outputs[jobs] = out.read_bytes()
            for jobs in (1, 2):  # one sampled run each: the main process's and the workers' CPU
                out = Path(tmp) / f"out{count}-{jobs}.json"
                tree, pid = run(
                    [
                        "score",
                        str(data),
                        "-m",
                        "trm(distance=cider-d)",
                        "--jobs",
                        str(jobs),
                        "--format",
                        "json",
                        "--out",
                        str(out),
                    ]
                )
                notes.update(
                    line for line in tree.stderr.splitlines() if line.startswith("capmetrics:")
                )
                projected[jobs] = tree.idle_wall(pid, min(jobs, cores))
                split[jobs] = (tree.main_cpu(pid), tree.others_cpu(pid))
            same = outputs[1] == outputs[2]
            print(
                f"   {count:6d} items: --jobs 1 {best[1]:6.2f} s, --jobs 2 {best[2]:6.2f} s -> "
                f"{best[1] / best[2]:4.2f}× ({targets.get(count, '')}); from CPU on an idle box "
                f"{projected[1]:5.2f} s vs {projected[2]:5.2f} s -> "
                f"{projected[1] / projected[2]:4.2f}×; outputs identical: {same}  [{load()}]"
            )
            print(
                f"      CPU of the best runs: --jobs 1 {cpu[1]:.2f} s, --jobs 2 {cpu[2]:.2f} s; "
                f"sampled: --jobs 1 {split[1][0]:.2f} s; --jobs 2 main process {split[2][0]:.2f} s "
                f"+ workers {split[2][1]:.2f} s"
            )
            for note in sorted(notes):
                print(f"      {note}")
            if not same:
                raise SystemExit(f"--jobs 1 and --jobs 2 wrote different files for {count} items")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--items", type=int, nargs="*", default=[200, 6000, 20000])
    parser.add_argument("--skip-meteor", action="store_true")
    parser.add_argument("--skip-jobs", action="store_true")
    args = parser.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load at start: {f.read().strip()}")
    if not args.skip_meteor:
        bench_meteor()
    if not args.skip_jobs:
        bench_jobs(args.items, args.repeat)


if __name__ == "__main__":
    main()
