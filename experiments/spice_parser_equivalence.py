"""Does capmetrics' SPICE parser start give the jar's tuples? Every distinct Flickr8k caption,
compared.

``plugins/spice/java/CapmetricsSpiceParse`` runs SPICE's ``SpiceParser`` with CoreNLP's
``tokenize,ssplit,parse,lemma`` (the jar's annotators less ``ner``, whose tags the parser never
reads), without the constructor's synonym tables, and initialises slow classes on a second thread.
This script parses every distinct PTB-tokenised Flickr8k caption (the captions SPICE sees: 40,128)
that way and compares each caption's tuple list, order included, with the jar's own start
(``-D...jar_pipeline=true``, ``_parse.JAR_START``: its constructor, its
``tokenize,ssplit,parse,lemma,ner``).

The reference tuples come from capmetrics' SPICE parse cache where it holds the caption (it was
filled by the jar's own start; ``--reference jar`` parses them again instead), else from a run of
the jar's start. Prints the number of captions, how many differ (the first few in full) and the
parse time of each start. Exit code 1 if any caption differs.

Usage (needs ``capmetrics setup spice``; about 15 minutes per 40,000 captions on 2 cores):

    nice python experiments/spice_parser_equivalence.py [--root ../shared/data/flickr8k] [--every K]
        [--reference cache|jar] [--jobs J]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from capmetrics.data.flickr8k import load_captions
from capmetrics.plugins.spice import Spice, parse_cache
from capmetrics.plugins.spice._parse import parse_captions, parse_command
from capmetrics.plugins.spice._parse_cache import Parse
from capmetrics.plugins.spice._resources import find_corenlp, find_java


def captions(root: str, every: int) -> list[str]:
    """Every ``every``-th distinct Flickr8k caption after SPICE's PTB tokenisation, sorted."""
    by_id, _ = load_captions(root)
    texts = sorted(set(Spice().tokenizer.tokenize_joined(sorted(set(by_id.values())))))
    return texts[::every]


def parse(
    texts: list[str], jar_start: bool, jobs: int, memory: str
) -> tuple[dict[str, Parse], float]:
    """``texts`` parsed by the helper (the jar's own start when ``jar_start``) and the wall time."""
    java, corenlp = find_java(None), find_corenlp(None)

    def command_for(threads: int, in_file: Path, out_file: Path) -> list[str]:
        return parse_command(java, corenlp, memory, threads, in_file, out_file, jar_start)

    found: dict[str, Parse] = {}
    start = time.perf_counter()
    parse_captions(texts, command_for, jobs, timeout=24 * 3600.0, store=found.update)
    return found, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root", default=str(Path(__file__).resolve().parents[2] / "shared/data/flickr8k")
    )
    parser.add_argument(
        "--every", type=int, default=1, help="take every K-th caption (default: all)"
    )
    parser.add_argument("--reference", choices=("cache", "jar"), default="cache")
    parser.add_argument("--jobs", type=int, default=1, help="JVMs side by side (each ~3 GB)")
    parser.add_argument("--memory", default="6G")
    args = parser.parse_args()

    texts = captions(args.root, args.every)
    reference: dict[str, Parse] = {}
    if args.reference == "cache":
        reference = {t: e["tuples"] for t, e in parse_cache().get_many(texts).items()}
    missing = [t for t in texts if t not in reference]
    jar_seconds = float("nan")
    if missing:
        parsed, jar_seconds = parse(missing, True, args.jobs, args.memory)
        reference.update(parsed)
    ours, our_seconds = parse(texts, False, args.jobs, args.memory)

    differ = [t for t in texts if ours[t] != reference[t]]
    print(
        f"captions: {len(texts)} ({len(texts) - len(missing)} reference tuples from the parse "
        f"cache, {len(missing)} parsed by the jar's start in {jar_seconds:.1f} s)"
    )
    print(f"capmetrics' start: {our_seconds:.1f} s for {len(texts)} captions")
    print(f"captions whose tuples differ: {len(differ)}")
    for text in differ[:5]:
        print(f"  {text!r}\n    jar:        {reference[text]}\n    capmetrics: {ours[text]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
