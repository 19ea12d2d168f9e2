"""SPICE: capmetrics' ``spice`` (cold, warm, 10 % new) vs the original jar on Flickr8k-Expert.

Needs ``capmetrics setup spice`` (and a JavaScript engine for the reference jar on Java 15+).

Subset mode (default; minutes): takes every ``len/n``-th Flickr8k-Expert item and times, each in a
fresh Python process with an empty cache folder of its own (whole process, peak RSS of the process
and of its JVMs):

- reference: pycocoevalcap's ``spice-1.0.jar`` (``edu.anu.spice.SpiceScorer -subset``) through
  capmetrics' runner, cold (its own empty parse cache);
- cold: ``capmetrics`` on an empty parse cache (every caption parsed by the jar's parser);
- warm: the same items again (every caption cached: no JVM);
- partial: the same items with 10 % of the candidates replaced by ones not seen before (only those
  are parsed).

Full mode (``--full``): every Flickr8k-Expert item (16,992 judgments). The reference is the jar
run on all items with ``--jar-cache`` as its parse cache (fill it first, e.g. by a cold jar run:
~25 min idle; ``--no-reference`` skips it and compares with the warm run instead); capmetrics is
timed warm (its parse cache must hold every caption: one cold capmetrics run, which parses each
distinct caption once). ``--cold`` also times a cold run on an empty parse cache of its own and
then, in that cache, a run with every 10th candidate new (only those are parsed); ``--server``
runs both through a parser server started before them (``capmetrics spice-server``). Prints per-item
parity of every category's P/R/F, the items whose scene graphs met a merge tie, and Kendall tau-c.

Usage:

    nice python benchmarks/bench_spice.py [--n 100] [--cf] [--jobs J] \\
        [--root /path/to/flickr8k] [--cold-only]
    nice python benchmarks/bench_spice.py --full --jar-cache DIR
    python benchmarks/bench_spice.py --full --no-reference --cold [--server]
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
FIELDS3 = ("pr", "re", "f")


DATA = os.environ.get("BENCH_SPICE_DATA", "expert")  # or "cf": Flickr8k-CF


def items(root: str, n: int | None, shift: int = 0) -> tuple[list[str], list[list[str]]]:
    """Every ``len/n``-th Flickr8k-Expert (or -CF) item, starting at ``shift`` (all items when
    ``n`` is None)."""
    from capmetrics.data.flickr8k import load_crowdflower, load_expert

    dataset, _ = (load_crowdflower if DATA == "cf" else load_expert)(root)
    if n is None:
        chosen = list(dataset)
    else:
        step = len(dataset) // n
        chosen = [dataset[i] for i in range(shift, step * n, step)][:n]
    return [it.candidates[0] for it in chosen], [list(it.references) for it in chosen]


def jar_values(
    cands: list[str], refs: list[list[str]], jar_cache: str | None
) -> tuple[float, dict]:
    """The original jar's per-item P/R/F of every category, run through capmetrics' runner."""
    import numpy as np
    from capmetrics.plugins import spice
    from capmetrics.plugins.spice import _jar

    metric = spice.Spice()
    texts = list(dict.fromkeys([*cands, *(r for rs in refs for r in rs)]))
    tok = dict(zip(texts, metric.tokenizer.tokenize_joined(texts)))
    batch = [
        {"image_id": i, "test": tok[c], "refs": [tok[r] for r in rs]}
        for i, (c, rs) in enumerate(zip(cands, refs))
    ]
    if jar_cache:
        _jar.parse_cache_dir = lambda: Path(jar_cache)  # the jar's own (LMDB) parse cache
    rows = [
        _jar.to_row(s)
        for s in _jar.scores_by_id(_jar.run_jar(metric.command, batch, 7200.0), len(batch))
    ]
    details = _jar.details_arrays(np.stack(rows))
    return float(np.mean(details["All"]["f"])), details


def phase(name: str, root: str, n: int | None, jobs: int | None, jar_cache: str | None) -> dict:
    """Run one phase in this process; return its timings and values."""
    cands, refs = items(root, n)
    start = time.perf_counter()
    ties = 0
    if name == "reference":
        average, details = jar_values(cands, refs, jar_cache)
    else:
        from capmetrics.plugins.spice import Spice

        if name == "partial" and n is None:  # every 10th candidate made new (a word added)
            cands = [f"{c} outside" if i % 10 == 0 else c for i, c in enumerate(cands)]
        elif name == "partial":  # 10 % of the candidates replaced by unseen ones
            new_c, _ = items(root, n, shift=1)
            k = max(1, len(cands) // 10)
            cands = new_c[:k] + cands[k:]
        out = Spice(jobs=jobs).score(cands, refs)
        average, details = out.corpus, out.details
        ties = int((out.details["ties"] > 0).sum())
    seconds = time.perf_counter() - start
    sensitive: list[int] = []
    if name == "ties":  # the other way of breaking merge ties: which items does it change?
        import numpy as np

        other = Spice(last_in_ties=True).score(cands, refs).details
        changed = np.zeros(len(cands), dtype=bool)
        for c in details:
            if c != "ties":
                for f in FIELDS3:
                    changed |= ~(
                        (details[c][f] == other[c][f])
                        | (np.isnan(details[c][f]) & np.isnan(other[c][f]))
                    )
        sensitive = np.flatnonzero(changed).tolist()
    values = {c: {f: details[c][f].tolist() for f in FIELDS3} for c in details if c != "ties"}
    return {
        "seconds": seconds,
        "average": average,
        "values": values,
        "ties": ties,
        "sensitive": sensitive,
        "rss_self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_jvm_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "cpu_seconds": sum(
            u.ru_utime + u.ru_stime
            for u in (
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
        ),
    }


def run_phase(name: str, args: argparse.Namespace, cache: str | None) -> dict:
    """``phase`` in a fresh process (whole-process wall time), with ``XDG_CACHE_HOME=cache`` if
    given."""
    env = (
        dict(os.environ, XDG_CACHE_HOME=cache, CAPMETRICS_CACHE_DIR=str(Path(cache) / "capmetrics"))
        if cache
        else dict(os.environ)
    )
    cmd = [sys.executable, __file__, "--phase", name, "--root", args.root]
    cmd += ["--full"] if args.full else ["--n", str(args.n)]
    cmd += ["--jobs", str(args.jobs)] if args.jobs else []
    cmd += ["--jar-cache", args.jar_cache] if args.jar_cache else []
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"phase {name} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def compare(a: dict, b: dict) -> tuple[int, int, list[int]]:
    """(items whose every category's P/R/F agree, items, the others) between two phases' values."""
    import numpy as np

    n = len(a["All"]["f"])
    same = np.ones(n, dtype=bool)
    for category, fields in a.items():
        for field, values in fields.items():
            x = np.array(values, dtype=float)
            y = np.array(b[category][field], dtype=float)
            same &= (x == y) | (np.isnan(x) & np.isnan(y))
    return int(same.sum()), n, np.flatnonzero(~same).tolist()


def tau_c(root: str, values: list[float]) -> float:
    """Kendall tau-c (x 100) of per-item values against the 3 expert judgments of each item."""
    import numpy as np
    from capmetrics.analysis.meta import correlations
    from capmetrics.data.flickr8k import load_expert

    _, ratings = load_expert(root)
    return (
        100
        * correlations(np.repeat(np.asarray(values), ratings.shape[1]), ratings.ravel())[
            "kendall_c"
        ]
    )


def report(name: str, r: dict) -> None:
    print(
        f"{name:9s} {r['process_seconds']:8.1f} s whole process ({r['seconds']:.1f} s scoring, "
        f"{r['cpu_seconds']:.1f} s CPU with its JVMs)  "
        f"peak RSS: python {r['rss_self_mb']:.0f} MB, JVM {r['rss_jvm_mb']:.0f} MB  mean All-F "
        f"{r['average']:.6f}"
        + (f"  items with a merge tie: {r['ties']}" if name != "reference" else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        default=os.environ.get(
            "CAPMETRICS_FLICKR8K", str(ROOT.parent / "shared" / "data" / "flickr8k")
        ),
    )
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument(
        "--full", action="store_true", help="every Expert item; warm capmetrics vs the jar"
    )
    parser.add_argument(
        "--jobs", type=int, help="parsing JVMs side by side (default: capmetrics' choice)"
    )
    parser.add_argument(
        "--jar-cache", help="the jar's parse cache folder (LMDB) for the reference run"
    )
    parser.add_argument(
        "--partial",
        action="store_true",
        help="with --full: also time a run with every 10th "
        "candidate new (a word added; parsed into a copy of the parse cache)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="with --full: also time a cold run (an empty parse "
        "cache of its own), then a run with every 10th candidate new in that cache, against it",
    )
    parser.add_argument(
        "--server",
        action="store_true",
        help="with --cold: run a parser server "
        "(capmetrics spice-server) for the cold and 10 %%-new runs, started before them",
    )
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="with --full: skip the jar; capmetrics' warm "
        "run (the user's parse cache, checked against the jar before) is the reference",
    )
    parser.add_argument(
        "--cf", action="store_true", help="Flickr8k-CF instead of Flickr8k-Expert (subset mode)"
    )
    parser.add_argument(
        "--cold-only",
        action="store_true",
        help="subset mode: only the jar and capmetrics cold (both with empty caches), side by side",
    )
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = None if args.full else args.n
    if args.cf and args.full:
        parser.error("--full is Flickr8k-Expert only (Flickr8k-CF: subsets with --n)")
    if args.cf:
        os.environ["BENCH_SPICE_DATA"] = "cf"  # the phases' processes inherit it
        globals()["DATA"] = "cf"
    if args.phase:
        print(json.dumps(phase(args.phase, args.root, n, args.jobs, args.jar_cache)))
        return
    from capmetrics.plugins.spice._resources import corenlp_home

    os.environ.setdefault(
        "CAPMETRICS_CORENLP_DIR", str(corenlp_home())
    )  # the tmp caches have no jars
    print(
        f"Flickr8k-{'CF' if args.cf else 'Expert'}, {'all' if args.full else args.n} items, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    results = {}
    if args.full:
        if not args.no_reference:
            results["reference"] = run_phase("reference", args, None)
        results["warm"] = run_phase("warm", args, None)
        ties = run_phase("ties", args, None)
        if args.cold:
            with tempfile.TemporaryDirectory() as cache:
                server = [sys.executable, "-m", "capmetrics.cli", "spice-server"]
                env = dict(
                    os.environ,
                    XDG_CACHE_HOME=cache,
                    CAPMETRICS_CACHE_DIR=str(Path(cache) / "capmetrics"),
                )
                if args.server:
                    subprocess.run([*server, "start", "--idle", "600"], env=env, check=True)
                try:
                    results["cold"] = run_phase("cold", args, cache)
                    results["partial"] = run_phase("partial", args, cache)
                finally:
                    if args.server:
                        subprocess.run([*server, "stop"], env=env, check=False)
        elif args.partial:
            import shutil

            from capmetrics.plugins.spice import parse_cache

            with (
                tempfile.TemporaryDirectory() as cache
            ):  # a copy, so the user's cache stays as it was
                target = Path(cache) / "capmetrics" / "spice"
                target.mkdir(parents=True)
                shutil.copyfile(parse_cache().path, target / "parses.sqlite")
                results["partial"] = run_phase("partial", args, cache)
    else:
        with tempfile.TemporaryDirectory() as ref_cache, tempfile.TemporaryDirectory() as cache:
            results["reference"] = run_phase("reference", args, ref_cache)
            for name in ("cold",) if args.cold_only else ("cold", "warm", "partial"):
                results[name] = run_phase(name, args, cache)
            ties = {"sensitive": []} if args.cold_only else run_phase("ties", args, cache)
    for name, r in results.items():
        report(name, r)
    if "reference" not in results:  # --no-reference: the warm run from the jar-checked parse cache
        results["reference"] = results["warm"]
        print(
            "reference: the warm run (the user's parse cache, checked against the jar before), not "
            "the jar"
        )
    ours = results["cold"] if "cold" in results else results["warm"]
    same, total, differ = compare(results["reference"]["values"], ours["values"])
    sensitive = ties["sensitive"]
    print(
        f"items whose values change when merge ties are broken the other way: {len(sensitive)} "
        f"{sensitive[:20]}; of them differing from the jar: {len(set(sensitive) & set(differ))}"
    )
    print(
        f"parity with the jar: {same}/{total} items equal in every category's P/R/F"
        + (f"; differing items: {differ[:20]}" if differ else "")
        + f"; mean {ours['average']!r} vs {results['reference']['average']!r}"
    )
    if args.full:
        if "cold" in results:
            cold, part = results["cold"]["process_seconds"], results["partial"]["process_seconds"]
            print(
                f"10 % new candidates (every 10th, parsed into the cold run's cache): {part:.1f} s "
                f"whole process = {part / cold:.3f} of cold {cold:.1f} s (target <= 0.10 x cold + "
                f"3 s = {0.1 * cold + 3:.1f} s)"
            )
        elif "partial" in results:
            print(
                f"10 % new candidates: {results['partial']['process_seconds']:.1f} s whole process"
            )
        print(
            f"Kendall tau-c: capmetrics {tau_c(args.root, ours['values']['All']['f']):.3f}, "
            f"jar {tau_c(args.root, results['reference']['values']['All']['f']):.3f} (published "
            "44.9)"
        )
        return
    cold, jar = results["cold"]["process_seconds"], results["reference"]["process_seconds"]
    print(
        f"cold: capmetrics {cold:.1f} s, JVM peak {results['cold']['rss_jvm_mb']:.0f} MB; the jar "
        f"{jar:.1f} s, JVM peak {results['reference']['rss_jvm_mb']:.0f} MB: the jar's time / "
        f"capmetrics' = {jar / cold:.2f} (target >= 2; CPU seconds: "
        f"{results['reference']['cpu_seconds'] / results['cold']['cpu_seconds']:.2f}), peak RSS "
        f"target <= 1,500 MB; load now {os.getloadavg()[0]:.1f}"
    )
    if args.cold_only:
        return
    same, total, _ = compare(results["cold"]["values"], results["warm"]["values"])
    print(
        f"cold / jar time: {cold / results['reference']['process_seconds']:.2f}; warm equals cold "
        f"on {same}/{total} items; warm / cold time: "
        f"{results['warm']['process_seconds'] / cold:.3f}; 10 % new: "
        f"{results['partial']['process_seconds']:.1f} s = "
        f"{results['partial']['process_seconds'] / cold:.2f} of cold (target <= 0.10 x cold + 3 s "
        f"= {0.1 * cold + 3:.1f} s)"
    )


if __name__ == "__main__":
    main()
