"""METEOR 1.5: capmetrics' ``meteor`` vs pycocoevalcap's ``Meteor`` on Flickr8k-Expert (5,664 items).

Both get the same PTB-tokenized strings. Times: cold (JVM start + paraphrase table + first call)
and warm (later calls on the running JVM, alternating between the two, best of ``--repeats``). Usage:

    python benchmarks/bench_meteor.py [--root /path/to/flickr8k] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
from capmetrics.data.flickr8k import load_expert
from capmetrics.plugins.meteor import Meteor
from capmetrics.plugins.tokenizers import PTBTokenizer, WhitespaceTokenizer


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def scorers(cands: list[str], refs: list[list[str]], jobs: list[int]) -> dict[str, Callable[[], np.ndarray]]:
    """name -> a call that scores the benchmark and returns the per-caption values (JVM started lazily)."""
    from pycocoevalcap.meteor.meteor import Meteor as CocoMeteor

    ours = {j: Meteor(tokenizer=WhitespaceTokenizer(), jobs=j) for j in jobs}
    gts, res = {i: r for i, r in enumerate(refs)}, {i: [c] for i, c in enumerate(cands)}
    coco: list[CocoMeteor] = []

    def theirs() -> np.ndarray:
        coco[:] = coco or [CocoMeteor()]  # its JVM starts in the constructor
        return np.asarray(coco[0].compute_score(gts, res)[1])

    runs: dict[str, Callable[[], np.ndarray]] = {
        f"capmetrics j={j}": (lambda m=m: m.score(cands, refs).values) for j, m in ours.items()}
    return {**runs, "pycocoevalcap": theirs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.environ.get("CAPMETRICS_FLICKR8K", "/work/shared/data/flickr8k"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="capmetrics JVM counts to time")
    args = parser.parse_args()
    dataset, _ = load_expert(args.root)
    ptb = PTBTokenizer()
    cands = ptb.tokenize_joined([it.candidates[0] for it in dataset])
    refs = [ptb.tokenize_joined(list(it.references)) for it in dataset]
    print(f"Flickr8k-Expert: {len(cands)} candidates, {sum(map(len, refs))} references, load {os.getloadavg()[0]:.1f}")
    runs = scorers(cands, refs, args.jobs)
    cold, warm, values = {}, {name: [] for name in runs}, {}
    for name, run in runs.items():  # cold: JVM start + paraphrase table + the first call
        cold[name], values[name] = timed(run)
    for _ in range(args.repeats):  # warm calls alternate, so both see the same machine load
        for name, run in runs.items():
            warm[name].append(timed(run)[0])
    print(f"{'':16}{'cold (s)':>10}{'warm (s)':>10}{'warm pairs/s':>14}")
    for name in runs:
        print(f"{name:16}{cold[name]:10.2f}{min(warm[name]):10.2f}{len(cands) / min(warm[name]):14.0f}")
    for name in runs:
        if name == "pycocoevalcap":
            continue
        best = min(warm[name])
        print(f"{name}: speed-up over pycocoevalcap cold x{cold['pycocoevalcap'] / cold[name]:.2f}, "
              f"warm x{min(warm['pycocoevalcap']) / best:.2f}; identical per-caption values: "
              f"{np.array_equal(values[name], values['pycocoevalcap'])}")


if __name__ == "__main__":
    main()
