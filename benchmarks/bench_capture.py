"""capture on detailed captions: cold (every sentence parsed by CoreNLP), warm (parse cache) and
on given graphs, each in a fresh process; and the parse cost per sentence.

    .venv/bin/python benchmarks/bench_capture.py [--items 1000] [--soft]

Captions: seeded paragraph-long descriptions (3-6 sentences of 8-16 words, a COCO-like scene
vocabulary), one candidate and one reference per item; the given-graph run uses the FACTUAL-format
graphs of experiments/capture_reference_fixtures.py's generator, as many items. Cold runs use an
empty capmetrics cache folder (``CAPMETRICS_CACHE_DIR``; the CoreNLP jars are found through
``CAPMETRICS_CORENLP_DIR``), so they include the parsing JVM's start. CAPTURE's own pipeline
(a flan-T5 FACTUAL parser and all-mpnet-base-v2 on ``cuda:0``) cannot run on this machine (no
model weights can be fetched, no GPU), so it is not timed here. Soft matching is off unless
``--soft`` (MiniLM then loads, about a second).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBJECTS = [
    "a man",
    "a woman",
    "two children",
    "a brown dog",
    "a black cat",
    "a group of people",
    "a cyclist",
    "an elderly couple",
    "a young girl",
    "a waiter",
    "a red car",
    "a white truck",
    "a city bus",
]
VERBS = [
    "is standing next to",
    "is walking along",
    "sits on",
    "is holding",
    "looks at",
    "is parked beside",
    "rides past",
    "is leaning against",
    "waits near",
    "is crossing",
]
OBJECTS = [
    "a wooden bench",
    "a busy street",
    "a tall building",
    "a green tree",
    "a small table",
    "a blue umbrella",
    "a parked bicycle",
    "the sidewalk",
    "a shop window",
    "a traffic light",
    "a large fountain",
    "a stone wall",
]
EXTRAS = [
    "under a clear blue sky",
    "in the afternoon sun",
    "in the background",
    "on the left side of the image",
    "while it is raining",
    "near the entrance",
    "with a smile",
    "",
]


def caption(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(3, 6)):
        s = (
            f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(EXTRAS)}"
        ).strip()
        sentences.append(s[0].upper() + s[1:] + ".")
    return " ".join(sentences)


def items(n: int) -> list[dict]:
    rng = random.Random(2024)
    return [{"id": k, "candidates": [caption(rng)], "references": [caption(rng)]} for k in range(n)]


def graph_items(n: int) -> list[dict]:
    sys.path.insert(0, str(ROOT / "experiments"))
    from capture_reference_fixtures import make_items

    base = make_items(max(60, n))
    return [{**it, "id": k} for k, it in enumerate(base[:n])]


def worker(phase: str, data: str, soft: bool) -> None:
    import capmetrics
    from capmetrics.plugins.detailed.capture import corenlp_graphs, sentences

    spec = "capture" if soft else "capture(soft_matching=false)"
    rows = [json.loads(line) for line in Path(data).read_text().splitlines()]
    texts = [t for r in rows for t in (*r["candidates"], *r["references"])]
    out: dict = {"phase": phase, "items": len(rows)}
    start = time.perf_counter()
    if phase in ("cold", "warm"):
        corenlp_graphs(texts)
        out["parse_s"] = time.perf_counter() - start
        out["sentences"] = len({s for t in texts for s in sentences(t)})
    t0 = time.perf_counter()
    result = capmetrics.score(data, [spec])[spec]
    out["score_s"] = time.perf_counter() - t0
    out["total_s"] = time.perf_counter() - start
    out["corpus"] = float(result.corpus)
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--soft", action="store_true", help="soft matching on (MiniLM)")
    parser.add_argument("--worker", nargs=2, metavar=("PHASE", "DATA"))
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.soft)
        return
    from capmetrics.plugins.spice import find_corenlp

    corenlp = str(find_corenlp()[0].parent)
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        plain, graphs = Path(tmp) / "detailed.jsonl", Path(tmp) / "graphs.jsonl"
        plain.write_text("".join(json.dumps(r) + "\n" for r in items(args.items)))
        graphs.write_text("".join(json.dumps(r) + "\n" for r in graph_items(args.items)))
        env = dict(
            os.environ,
            CAPMETRICS_CACHE_DIR=str(Path(tmp) / "cache"),
            CAPMETRICS_CORENLP_DIR=corenlp,
        )
        results = []
        for phase, data in (("cold", plain), ("warm", plain), ("given", graphs)):
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                phase,
                str(data),
                *(["--soft"] if args.soft else []),
            ]
            start = time.perf_counter()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["process_s"] = time.perf_counter() - start
            results.append(row)
    cold, warm = results[0], results[1]
    per_sentence = (cold["parse_s"] - warm["parse_s"]) / max(cold["sentences"], 1)
    print(
        f"capture on {args.items} detailed captions (+ {args.items} references), soft matching "
        f"{'on' if args.soft else 'off'}; wall seconds per fresh process (load, parse, score):"
    )
    for r in results:
        parse = f", parse {r['parse_s']:.2f} s" if "parse_s" in r else ""
        print(
            f"  {r['phase']:5}: {r['process_s']:7.2f} s{parse}, score {r['score_s']:.2f} s, corpus "
            f"{r['corpus']:.4f}"
        )
    print(
        f"  parse cost: {per_sentence * 1000:.1f} ms per distinct sentence ({cold['sentences']} "
        "sentences, cold minus warm parse time, JVM start included)"
    )


if __name__ == "__main__":
    main()
