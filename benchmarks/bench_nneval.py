"""Scoring with a shipped NNEval model against computing its features (issue 14).

Each side is a fresh ``capmetrics score DATA -q`` process (so each pays its own start-up: Python,
plugins, METEOR's JVM, the embedding models), run ``--repeat`` times interleaved; the table gives
the median wall time and the ratio model / features. The model side adds loading the model and
one MLP pass, and must not train.

    .venv/bin/python benchmarks/bench_nneval.py [--data core/sample/flickr8k_expert_sample.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "capmetrics.cli"]


def features_of(model: str) -> list[str]:
    from capmetrics.plugins.nneval.model_files import SHIPPED_DIR

    return json.loads((SHIPPED_DIR / model / "nneval.json").read_text(encoding="utf-8"))["features"]


def run(data: Path, specs: list[str]) -> float:
    args = [*CLI, "score", str(data), "-q", "--format", "csv"]
    for spec in specs:
        args += ["-m", spec]
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"data: {args.data}\n")
    print("| model | `-m` model | its features | ratio |")
    print("| --- | --- | --- | --- |")
    for model, spec in (("flickr8k-paper", "nneval"), ("flickr8k-embeddings", "nneval(model=flickr8k-embeddings)")):
        feats = features_of(model)
        with_model, without = [], []
        for _ in range(args.repeat):
            with_model.append(run(args.data, [spec]))
            without.append(run(args.data, feats))
        m, f = statistics.median(with_model), statistics.median(without)
        print(f"| `{model}` | {m:.2f} s | {f:.2f} s | {m / f:.2f} |", flush=True)


if __name__ == "__main__":
    main()
