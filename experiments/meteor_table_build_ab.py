"""Issue 40: METEOR's one-time table build, old against new, from an empty cache each time.

Runs (1) the table build alone (``_child.main(["tables", root])``) and (2) the whole first use
(``capmetrics score <sample> -m meteor``: the tables and the aligner's compile side by side), each
with the current ``_paraphrase_build`` and with an older copy of it (``--old FILE``, loaded in
every process of the run in its place by a ``sitecustomize`` on PYTHONPATH), and prints wall
time, CPU time (the process and its children), the largest RSS of one process and of the whole
process tree (sampled every 20 ms), and whether the built arrays are identical byte for byte.

    git show <commit>:plugins/meteor/_paraphrase_build.py > /tmp/old_build.py
    .venv/bin/python experiments/meteor_table_build_ab.py --old /tmp/old_build.py [--rounds 2]

Timings depend on the machine's load: run it on a quiet machine for numbers to report.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"
FINDER = """import importlib.abc, importlib.util, sys
class _Old(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "capmetrics.plugins.meteor._paraphrase_build":
            return importlib.util.spec_from_file_location(name, {old!r})
sys.meta_path.insert(0, _Old())
"""


def _tree_rss(pid: int) -> tuple[int, int]:
    """The resident bytes of ``pid`` and its descendants, and of the largest of them."""
    total, largest, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            total, largest = total + rss, max(largest, rss)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return total, largest


def _run(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    before = os.times()
    start = time.perf_counter()
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0, 0]

    def watch() -> None:
        while child.poll() is None:
            total, largest = _tree_rss(child.pid)
            peak[:] = [max(peak[0], total), max(peak[1], largest)]
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    _, err = child.communicate()
    watcher.join()
    wall = time.perf_counter() - start
    after = os.times()
    if child.returncode:
        raise SystemExit(f"{cmd} failed:\n{err.decode()[-2000:]}")
    return {
        "wall_s": wall,
        "cpu_s": (after.children_user - before.children_user)
        + (after.children_system - before.children_system),
        "max_process_mb": peak[1] / 2**20,
        "tree_peak_mb": peak[0] / 2**20,
    }


def _same(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*.npy"))
    return (
        bool(files)
        and files == sorted(p.relative_to(b) for p in b.rglob("*.npy"))
        and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="an older _paraphrase_build.py")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    tables = [
        sys.executable,
        "-c",
        "import sys; from capmetrics.plugins.meteor._child import "
        "main; sys.exit(main(['tables', sys.argv[1]]))",
    ]
    score = [sys.executable, "-m", "capmetrics.cli", "score", str(SAMPLE), "-m", "meteor", "-q"]
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(FINDER.format(old=str(args.old.resolve())))
        built: dict[str, Path] = {}
        for n in range(args.rounds):
            for which in ("old", "new"):
                env = dict(os.environ)
                if which == "old":
                    env["PYTHONPATH"] = os.pathsep.join(
                        [str(site)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
                    )
                for step, cmd in (("tables alone", tables), ("whole first use", score)):
                    root = Path(tmp) / f"{which}-{step.split()[0]}-{n}"
                    env["CAPMETRICS_CACHE_DIR"] = str(root)
                    full = cmd + [str(root)] if step == "tables alone" else cmd
                    result = _run(full, env)
                    built.setdefault(which, root)
                    print(
                        f"round {n} {which:3} {step:15} "
                        + "  ".join(f"{k} {v:7.1f}" for k, v in result.items()),
                        flush=True,
                    )
        print("arrays identical (tables alone, old vs new):", _same(built["old"], built["new"]))


if __name__ == "__main__":
    main()
