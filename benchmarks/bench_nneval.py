"""Scoring with a shipped NNEval model against computing its features (issue 14).

Each side is a fresh ``capmetrics score DATA -q`` process (so each pays its own start-up: Python,
plugins, METEOR's JVM, the embedding models), run ``--repeat`` times interleaved; the table gives
the median wall time and the ratio model / features. The model side adds loading the model and
one MLP pass, and must not train.

    .venv/bin/python benchmarks/bench_nneval.py \\
        [--data core/sample/flickr8k_expert_sample.jsonl] [--models NAME ...]

A model's features are its metrics; ``flickr8k-embeddings-spice`` also embeds each distinct text
with MiniLM for its interaction inputs, which the model side pays and the features side does
not.
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
#: Shipped model -> its metric spec (SPICE models need `capmetrics setup spice`).
SHIPPED = {
    "flickr8k-paper": "nneval",
    "flickr8k-embeddings": "nneval(model=flickr8k-embeddings)",
    "flickr8k-paper-spice": "nneval(model=flickr8k-paper-spice)",
    "flickr8k-embeddings-spice": "nneval(model=flickr8k-embeddings-spice)",
}


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
    parser.add_argument(
        "--data", type=Path, default=ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(SHIPPED), choices=list(SHIPPED))
    args = parser.parse_args()
    print(f"data: {args.data}\n")
    print("| model | `-m` model | its features | ratio |")
    print("| --- | --- | --- | --- |")
    for model in args.models:
        spec, feats = SHIPPED[model], features_of(model)
        with_model, without = [], []
        for _ in range(args.repeat):
            with_model.append(run(args.data, [spec]))
            without.append(run(args.data, feats))
        m, f = statistics.median(with_model), statistics.median(without)
        print(f"| `{model}` | {m:.2f} s | {f:.2f} s | {m / f:.2f} |", flush=True)


if __name__ == "__main__":
    main()
