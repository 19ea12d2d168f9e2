"""Where a cold SPICE run's time goes (issue 31): 300 Flickr8k-Expert rows, empty caches.

Run from the project root:
``.venv/bin/python experiments/spice_cold_breakdown.py [--n 300] [--meteor-warm]``.
Each step is timed on its own, in this order, in an empty cache folder (``CAPMETRICS_CACHE_DIR``
in a temporary folder; with ``--meteor-warm`` METEOR's built tables are linked in, so only
SPICE's parse cache is empty):

1. imports (capmetrics, the SPICE plugin) and loading the rows;
2. PTB tokenisation of every distinct caption;
3. one JVM that parses one caption: the JVM's start and the parser model's load;
4. one JVM that parses all distinct captions (start + load + parse; the difference to 3 is the
   parse, JIT warm-up included), its peak RSS;
5. the WordNet synsets of the parsed tuples' words (Meteor's synonym tables: built on first use);
6. building the scene graphs and matching them (scoring).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--meteor-warm", action="store_true")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"{args.n} Flickr8k-Expert rows, {os.cpu_count()} cores, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        from capmetrics.io.cache import cache_root
        from capmetrics.plugins.spice._resources import find_corenlp

        corenlp = find_corenlp()
        if args.meteor_warm and (cache_root() / "meteor").is_dir():
            (Path(cache) / "meteor").symlink_to(cache_root() / "meteor")
        os.environ["CAPMETRICS_CACHE_DIR"] = cache
        from capmetrics.data.flickr8k import load_expert
        from capmetrics.plugins import spice
        from capmetrics.plugins.spice import _parse

        dataset, _ = load_expert(ROOT.parent / "shared" / "data" / "flickr8k")
        step = len(dataset) // args.n
        chosen = [dataset[i] for i in range(0, step * args.n, step)][: args.n]
        cands = [it.candidates[0] for it in chosen]
        refs = [list(it.references) for it in chosen]
        t1 = time.perf_counter()
        print(f"1 imports and rows: {t1 - start:.1f} s")
        metric = spice.Spice()
        texts = list(dict.fromkeys([*cands, *(r for rs in refs for r in rs)]))
        tokens = list(dict.fromkeys(metric.tokenizer.tokenize_joined(texts)))
        t2 = time.perf_counter()
        print(f"2 tokenising {len(texts)} texts ({len(tokens)} distinct captions): {t2 - t1:.2f} s")
        java = spice.find_java(None)

        def command(threads: int, i: Path, o: Path) -> list[str]:
            return _parse.parse_command(java, corenlp, metric.memory, threads, i, o)

        _parse.parse_captions(tokens[:1], command, 1, 3600, lambda p: None)
        t3 = time.perf_counter()
        print(f"3 one JVM, one caption (start + model load): {t3 - t2:.1f} s")
        parses = _parse.parse_captions(tokens, command, 1, 3600, lambda p: None)
        t4 = time.perf_counter()
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"4 one JVM, all {len(tokens)} captions: {t4 - t3:.1f} s, i.e. parse "
            f"{t4 - t3 - (t3 - t2):.1f} s ({1000 * (t4 - t3 - (t3 - t2)) / len(tokens):.0f} ms per "
            f"caption); JVM peak RSS {rss:.0f} MB"
        )
        entries = {t: {"tuples": p, "synsets": spice._synsets_of(p)} for t, p in parses.items()}
        t5 = time.perf_counter()
        print(
            f"5 synsets (Meteor's synonym tables{' built' if not args.meteor_warm else ''}): "
            f"{t5 - t4:.1f} s"
        )
        tok = dict(zip(texts, metric.tokenizer.tokenize_joined(texts)))
        results = spice._evaluate(
            entries,
            [tok[c] for c in cands],
            [tuple(tok[r] for r in rs) for rs in refs],
            range(len(cands)),
            False,
        )
        t6 = time.perf_counter()
        print(f"6 scene graphs and matching ({len(results)} items): {t6 - t5:.2f} s")
        print(
            f"python peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
            f"total {t6 - start:.1f} s; load {os.getloadavg()}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
