"""SPICE: capmetrics' ``spice`` (cold, warm, 10 % new) vs pycocoevalcap's own flow on Flickr8k-Expert items.

Needs ``capmetrics setup spice``. Takes every ``len/n``-th Flickr8k-Expert item and times, each in
a fresh Python process with an empty cache folder of its own (whole process, peak RSS of the
process and of its JVM):

- reference: pycocoevalcap's ``Spice.compute_score`` with the original jar (tests/plugins/spice_reference.py);
- cold: ``capmetrics`` on an empty cache (one jar run over every item);
- warm: the same items again (every item cached: no JVM);
- partial: the same items with 10 % of them replaced by items not seen before (only those go to the jar).

It prints per-item parity of All-F (and every category's P/R/F) between reference and cold, and the ratios.
Usage (minutes: CoreNLP loads in ~1 min and parses ~2-5 captions/s per core):

    nice python benchmarks/bench_spice.py [--n 100] [--root /path/to/flickr8k] [--no-reference]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def items(root: str, n: int, shift: int = 0) -> tuple[list[str], list[list[str]]]:
    """Every ``len/n``-th Flickr8k-Expert item, starting at ``shift``."""
    from capmetrics.data.flickr8k import load_expert

    dataset, _ = load_expert(root)
    step = len(dataset) // n
    chosen = [dataset[i] for i in range(shift, step * n, step)][:n]
    return [it.candidates[0] for it in chosen], [list(it.references) for it in chosen]


def phase(name: str, root: str, n: int) -> dict:
    """Run one phase in this process; return its timings and values."""
    cands, refs = items(root, n)
    start = time.perf_counter()
    if name == "reference":
        sys.path.insert(0, str(ROOT / "tests" / "plugins"))
        from capmetrics.plugins.spice._resources import find_corenlp, find_js_engine
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
        from spice_reference import coco_spice

        texts = sorted({t for c, rs in zip(cands, refs) for t in (c, *rs)})
        table = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
        tok = {t: table[i][0] for i, t in enumerate(texts)}
        average, scores = coco_spice([tok[c] for c in cands], [[tok[r] for r in rs] for rs in refs],
                                     find_corenlp()[0].parent, find_js_engine()[0])
        values = {c: {f: [s[c][f] for s in scores] for f in ("pr", "re", "f")} for c in scores[0]}
    else:
        from capmetrics.plugins.spice import Spice

        if name == "partial":  # 10 % of the items replaced by unseen ones
            new_c, new_r = items(root, n, shift=1)
            k = max(1, n // 10)
            cands, refs = new_c[:k] + cands[k:], new_r[:k] + refs[k:]
        out = Spice().score(cands, refs)
        average = out.corpus
        values = {c: {f: out.details[c][f].tolist() for f in ("pr", "re", "f")} for c in out.details}
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "average": average, "values": values,
            "rss_self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_jvm_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def run_phase(name: str, root: str, n: int, cache: str) -> dict:
    """``phase`` in a fresh process (whole-process wall time) with ``XDG_CACHE_HOME=cache``."""
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--phase", name, "--n", str(n), "--root", root],
                          env=env, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def compare(a: dict, b: dict) -> tuple[int, int]:
    """(items whose every category's P/R/F agree, items) between two phases' values."""
    import numpy as np

    n = len(a["All"]["f"])
    same = np.ones(n, dtype=bool)
    for category, fields in a.items():
        for field, values in fields.items():
            x = np.array(values, dtype=float)
            y = np.array(b[category][field], dtype=float)
            same &= (x == y) | (np.isnan(x) & np.isnan(y))
    return int(same.sum()), n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.environ.get("CAPMETRICS_FLICKR8K", str(ROOT.parent / "shared" / "data" / "flickr8k")))
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--no-reference", action="store_true", help="skip pycocoevalcap's run")
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, args.root, args.n)))
        return
    from capmetrics.plugins.spice._resources import corenlp_home

    os.environ.setdefault("CAPMETRICS_CORENLP_DIR", str(corenlp_home()))  # the tmp caches have no jars
    print(f"Flickr8k-Expert, {args.n} items, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    results = {}
    with tempfile.TemporaryDirectory() as ref_cache, tempfile.TemporaryDirectory() as cache:
        if not args.no_reference:
            results["reference"] = run_phase("reference", args.root, args.n, ref_cache)
        for name in ("cold", "warm", "partial"):
            results[name] = run_phase(name, args.root, args.n, cache)
    for name, r in results.items():
        print(f"{name:9s} {r['process_seconds']:8.1f} s whole process ({r['seconds']:.1f} s scoring)  "
              f"peak RSS: python {r['rss_self_mb']:.0f} MB, JVM {r['rss_jvm_mb']:.0f} MB  mean All-F {r['average']:.6f}")
    if "reference" in results:
        same, n = compare(results["reference"]["values"], results["cold"]["values"])
        print(f"parity: {same}/{n} items equal in every category's P/R/F; "
              f"mean {results['cold']['average']!r} vs {results['reference']['average']!r}")
        print(f"cold / reference time: {results['cold']['process_seconds'] / results['reference']['process_seconds']:.2f}")
    same, n = compare(results["cold"]["values"], results["warm"]["values"])
    print(f"warm equals cold on {same}/{n} items; warm / cold time: "
          f"{results['warm']['process_seconds'] / results['cold']['process_seconds']:.3f}; "
          f"10 % new / cold time: {results['partial']['process_seconds'] / results['cold']['process_seconds']:.2f}")


if __name__ == "__main__":
    main()
