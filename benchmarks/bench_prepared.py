"""Data prepared once per run: the n-gram metrics of coco-caption's set (BLEU-1..4, ROUGE-L,
CIDEr-D) on the 47,830 Flickr8k-CF items in one ``capmetrics.score`` call, with tokens shared
(the default) and with every metric tokenizing for itself, in one run; the values must be equal.

Run: ``python benchmarks/bench_prepared.py [--data DIR] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from unittest import mock

import capmetrics
from capmetrics.data.flickr8k import load_crowdflower
from capmetrics.engine import prepared

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"
METRICS = ["bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-l", "cider-d"]


def run(dataset: capmetrics.Dataset) -> tuple[float, dict[str, int], list[float]]:
    before = dict(prepared.STATS)
    start = time.perf_counter()
    results = capmetrics.score(dataset, METRICS)
    seconds = time.perf_counter() - start
    calls = {k: prepared.STATS[k] - before[k] for k in before}
    return seconds, calls, [m.corpus for m in results.metrics]


class _no_scope:  # noqa: N801 - stands in for the context manager
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    dataset, _ = load_crowdflower(args.data)
    import capmetrics.engine.scoring as scoring

    best = {}
    for share in (True, False):
        times = []
        for _ in range(args.repeat):
            if share:
                seconds, calls, values = run(dataset)
            else:
                with mock.patch.object(scoring, "run_scope", _no_scope):
                    seconds, calls, values = run(dataset)
            times.append(seconds)
        best[share] = (min(times), calls, values)
    (shared_s, shared_calls, shared_values), (own_s, own_calls, own_values) = (
        best[True],
        best[False],
    )
    assert shared_values == own_values, "sharing tokens changed a value"
    print(f"Flickr8k-CF, {len(dataset)} items, {', '.join(METRICS)} (best of {args.repeat})")
    print(
        f"  tokens shared : {shared_s:6.2f} s  tokenizations: {shared_calls['computed']}, reused: "
        f"{shared_calls['shared']}"
    )
    print(f"  each its own  : {own_s:6.2f} s  tokenizations: {own_calls['computed']}")
    print(f"  speed-up      : x{own_s / shared_s:.2f}; values identical")


if __name__ == "__main__":
    main()
