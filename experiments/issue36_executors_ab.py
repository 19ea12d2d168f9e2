"""A/B of the executors split (issue 36): the ``capmetrics`` command before and after, alternating.

``score -m "trm(distance=cider-d)"`` (5+5 Flickr8k captions per item, p-values, as in
benchmarks/bench_cold.py) with ``--jobs 1`` and ``--jobs 2``, whole process, each tree run from
its own copy of core/, plugins/ and registry/ (an import finder in front of the installed
editable one), so both run in the same minutes on the same (shared) machine. Reports the best
and median wall, the CPU seconds of the whole process tree (``getrusage`` of the children) and
whether every output file is the same bytes across trees and job counts.

Run: ``.venv/bin/python experiments/issue36_executors_ab.py BEFORE_DIR AFTER_DIR
[--items 3000] [--repeat 5]`` where each DIR holds core/, plugins/, registry/
(``git archive HEAD core plugins registry | tar -x -C BEFORE_DIR``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_cold import write_items  # noqa: E402

RUNNER = """
import sys
tree = sys.argv.pop(1)
MAPPING = {"capmetrics": tree + "/core", "capmetrics.plugins": tree + "/plugins",
           "capmetrics.registry": tree + "/registry"}
class Finder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        return _spec(fullname) if fullname in MAPPING else None
def _spec(fullname):
    from importlib.util import spec_from_file_location
    folder = MAPPING[fullname]
    return spec_from_file_location(fullname, folder + "/__init__.py",
                                   submodule_search_locations=[folder])
sys.meta_path.insert(0, Finder)
from capmetrics.cli import run
sys.argv = ["capmetrics", *sys.argv[1:]]
run()
"""


def timed(tree: str, args: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, tree, *args], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{tree}: {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    names = ("before", "after")
    with tempfile.TemporaryDirectory(prefix="capmetrics-ab36-") as tmp:
        data = Path(tmp) / "items.jsonl"
        write_items(data, args.items)
        walls: dict[tuple[str, int], list[float]] = {}
        cpus: dict[tuple[str, int], list[float]] = {}
        outputs: set[bytes] = set()
        for _ in range(args.repeat):
            for jobs in (1, 2):
                for name, tree in zip(names, args.trees):
                    out = Path(tmp) / f"{name}-{jobs}.json"
                    wall, cpu = timed(
                        tree,
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
                        ],
                    )
                    walls.setdefault((name, jobs), []).append(wall)
                    cpus.setdefault((name, jobs), []).append(cpu)
                    outputs.add(out.read_bytes())
        print(
            f"{args.items} items, {args.repeat} runs each, alternating; "
            f"load {os.getloadavg()[0]:.2f} at the end"
        )
        for jobs in (1, 2):
            for name in names:
                w, c = walls[(name, jobs)], cpus[(name, jobs)]
                print(
                    f"  --jobs {jobs} {name:6s}: wall best {min(w):5.2f} s, median "
                    f"{statistics.median(w):5.2f} s; CPU best {min(c):5.2f} s, median "
                    f"{statistics.median(c):5.2f} s"
                )
        print(f"  every output the same bytes: {len(outputs) == 1}")


if __name__ == "__main__":
    main()
