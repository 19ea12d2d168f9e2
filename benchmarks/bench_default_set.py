"""The default metric set end to end: one ``capmetrics score`` process (start-up included) vs
pycocoevalcap's full pipeline (PTBTokenizer + Bleu + Meteor + Rouge + Cider) on Flickr8k-Expert.

Both run as fresh processes, side by side in this one run (alternating, best of ``--repeats``),
after one untimed run on 20 items (the one-time METEOR resource cache and numba compile);
wall time and the peak resident memory of each process tree (the JVMs included) are sampled
from /proc. The corpus values of BLEU-1..4, METEOR, ROUGE-L and CIDEr-D are checked to be equal.

    python benchmarks/bench_default_set.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from capmetrics.data.flickr8k import load_expert

COCO = r"""
import json, sys
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.cider.cider import Cider
items = [json.loads(line) for line in open(sys.argv[1])]
gts = {i: [{"caption": r} for r in it["references"]] for i, it in enumerate(items)}
res = {i: [{"caption": it["candidates"][0]}] for i, it in enumerate(items)}
tok = PTBTokenizer()
gts, res = tok.tokenize(gts), tok.tokenize(res)
out = {}
b, _ = Bleu(4).compute_score(gts, res, verbose=0)
out.update({f"bleu-{n + 1}": v for n, v in enumerate(b)})
meteor = Meteor()
out["meteor"] = meteor.compute_score(gts, res)[0]
out["rouge-l"] = Rouge().compute_score(gts, res)[0]
out["cider-d"] = Cider().compute_score(gts, res)[0]
json.dump(out, open(sys.argv[2], "w"))
"""


def tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and all its descendants, in kB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/status") as f:
                line = next((x for x in f if x.startswith("VmRSS:")), "VmRSS: 0 kB")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = int(line.split()[1])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


#: Both tools run as installed packages normally do, with Python's bytecode cache: pip byte-compiles
#: pycocoevalcap when it installs it, while an editable capmetrics under PYTHONDONTWRITEBYTECODE
#: (set on some CI machines) would compile its own sources again in every process (~0.3 s).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak tree RSS (MB) and CPU seconds (the process and what it waited for) of one
    process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss_kb(process.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode:
        raise SystemExit(f"{command[:3]} failed: {process.stderr.read().decode()[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, peak / 1024, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", default=os.environ.get("CAPMETRICS_FLICKR8K", "/work/shared/data/flickr8k")
    )
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    dataset, _ = load_expert(args.root)
    tmp = Path(tempfile.mkdtemp(prefix="bench_default_"))
    data = tmp / "expert.jsonl"
    with data.open("w") as f:
        for i, it in enumerate(dataset):
            f.write(
                json.dumps(
                    {
                        "id": str(i),
                        "references": list(it.references),
                        "candidates": [it.candidates[0]],
                    }
                )
                + "\n"
            )
    (tmp / "coco.py").write_text(COCO)
    capmetrics = [
        sys.executable,
        "-m",
        "capmetrics.cli",
        "score",
        str(data),
        "--format",
        "csv",
        "-q",
        "--out",
        str(tmp / "ours.csv"),
    ]
    if not Path(sys.executable).with_name("capmetrics").exists():
        raise SystemExit("run with the venv's python (capmetrics must be installed)")
    capmetrics[1:3] = []
    capmetrics[0] = str(Path(sys.executable).with_name("capmetrics"))
    coco = [sys.executable, str(tmp / "coco.py"), str(data), str(tmp / "coco.json")]
    # one-time work is not timed: building the METEOR resource cache and compiling its aligner
    sample = tmp / "sample.jsonl"
    sample.write_text("".join(data.read_text().splitlines(keepends=True)[:20]))
    run([*capmetrics[:2], str(sample), "--format", "csv", "-q"])
    print(f"Flickr8k-Expert: {len(dataset)} items; load {os.getloadavg()[0]:.1f}")
    times: dict[str, list[tuple[float, float, float]]] = {
        "capmetrics score": [],
        "pycocoevalcap": [],
    }
    for _ in range(args.repeats):
        times["capmetrics score"].append(run(capmetrics))
        times["pycocoevalcap"].append(run(coco))
    print(f"{'':18}{'wall (s)':>10}{'CPU (s)':>10}{'peak RSS (MB)':>15}")
    for name, rows in times.items():
        print(
            f"{name:18}{min(r[0] for r in rows):10.2f}{min(r[2] for r in rows):10.2f}"
            f"{max(r[1] for r in rows):15.0f}"
        )
    mine, coco_rows = times["capmetrics score"], times["pycocoevalcap"]
    ratio = min(r[0] for r in coco_rows) / min(r[0] for r in mine)
    cpu_ratio = min(r[2] for r in coco_rows) / min(r[2] for r in mine)
    peak = max(r[1] for r in mine)
    print(
        f"speed-up x{ratio:.2f} wall (target >= 10: {'met' if ratio >= 10 else 'MISSED'}), "
        f"x{cpu_ratio:.2f} CPU (the JVM's threads included); capmetrics peak RSS {peak:.0f} MB "
        f"(target <= 300: {'met' if peak <= 300 else 'MISSED'}); load {os.getloadavg()[0]:.1f}"
    )
    theirs = json.loads((tmp / "coco.json").read_text())
    with (tmp / "ours.csv").open() as f:
        ours = {
            row["metric"]: float(row["value"])
            for row in csv.DictReader(f)
            if row["level"] == "corpus"
        }
    for metric, value in theirs.items():
        print(
            f"  {metric:8} capmetrics {ours[metric]!r:22} pycocoevalcap {value!r:22} "
            f"{'equal' if abs(ours[metric] - value) <= 1e-12 else 'DIFFERENT'}"
        )


if __name__ == "__main__":
    main()
