"""METEOR 1.5: native ``meteor`` vs the jar (``meteor-jar``, one JVM) on Flickr8k, pinned to one
core.

Both get the same PTB-tokenized strings. "cold" is the first call of a new instance (for the jar:
JVM + paraphrase table; for the native one: its cached resource tables and importing the
aligner compiled once per installation, see docs/metrics/meteor.md); "warm" is a later call, best of
``--repeats``, with the native per-word/per-segment memo cleared first so it normalises, looks up
and aligns everything again like the jar does. The run checks the per-caption values and the
corpus value against the jar. Usage:

    python benchmarks/bench_meteor.py [--data cf|expert] [--repeats 2] [--all-cores]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
from capmetrics.data.flickr8k import load_crowdflower, load_expert
from capmetrics.plugins.meteor import Meteor, MeteorJar
from capmetrics.plugins.meteor._compiled import describe
from capmetrics.plugins.meteor._resources import cache_root
from capmetrics.plugins.meteor.native import lexicon
from capmetrics.plugins.tokenizers import PTBTokenizer, WhitespaceTokenizer


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def forget_segments() -> None:
    """Drop the native memo (words, segments) but keep the loaded resource tables."""
    lexicon().forget()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", default=os.environ.get("CAPMETRICS_FLICKR8K", "/work/shared/data/flickr8k")
    )
    parser.add_argument("--data", choices=["cf", "expert"], default="cf")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--all-cores", action="store_true", help="do not pin the process (and the JVM) to one core"
    )
    args = parser.parse_args()
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the JVM started later inherits it
    dataset, _ = (load_crowdflower if args.data == "cf" else load_expert)(args.root)
    ptb = PTBTokenizer()
    cands = ptb.tokenize_joined([it.candidates[0] for it in dataset])
    refs = [ptb.tokenize_joined(list(it.references)) for it in dataset]
    kernel = describe(cache_root())
    print(
        f"Flickr8k-{args.data}: {len(cands)} candidates, {sum(map(len, refs))} references, "
        f"cores {len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f}; native aligner: "
        f"{kernel}"
    )
    native, jar = (
        Meteor(tokenizer=WhitespaceTokenizer()),
        MeteorJar(tokenizer=WhitespaceTokenizer()),
    )
    runs = {
        "meteor (native)": lambda: native.score(cands, refs),
        "meteor-jar": lambda: jar.score(cands, refs),
    }
    cold, warm, out = {}, {name: [] for name in runs}, {}
    for name, run in runs.items():
        cold[name] = timed(run)[0]
    for _ in range(args.repeats):  # alternate, so both see the same machine load
        for name, run in runs.items():
            if name.startswith("meteor (native)"):
                forget_segments()
            wall, cpu, out[name] = timed(run)
            warm[name].append((wall, cpu))
    jar.close()
    print(f"{'':18}{'cold (s)':>10}{'warm (s)':>10}{'warm cpu (s)':>14}{'warm pairs/s':>14}")
    for name in runs:
        wall, cpu = min(warm[name])
        print(f"{name:18}{cold[name]:10.2f}{wall:10.2f}{cpu:14.2f}{len(cands) / wall:14.0f}")
    a, b = out["meteor (native)"], out["meteor-jar"]
    ratio = min(warm["meteor-jar"])[0] / min(warm["meteor (native)"])[0]
    print(
        f"native / jar warm pairs/s: x{ratio:.2f} (target >= 10: "
        f"{'met' if ratio >= 10 else 'MISSED'}); cold: "
        f"x{cold['meteor-jar'] / cold['meteor (native)']:.2f}"
    )
    print(
        f"per caption: max |diff| {np.max(np.abs(a.values - b.values)):.3g}, bit-identical "
        f"{np.mean(a.values == b.values) * 100:.2f}%; corpus {a.corpus!r} vs {b.corpus!r} "
        f"({'equal' if a.corpus == b.corpus else 'DIFFERENT'})"
    )


if __name__ == "__main__":
    main()
