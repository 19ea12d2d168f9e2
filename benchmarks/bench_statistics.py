"""Speed of the multi-candidate statistics on Flickr8k captions (one run, this machine).

* TRM-CIDEr-D, 5 candidates + 5 references: TRM alone, and TRM with its exact p-value (252
  splits); 10 + 10 with 1,000 Monte-Carlo permutations. Serial and ``--jobs 2``.
* The statistic part alone (pooled matrices given) against a per-split reference
  implementation of the paper's equations 3–4 (the naive way: re-slice every split).
* MMD / Fréchet with MiniLM (5 references + 10 candidates, the paper's Table 2 setting): the
  share that the statistic and its p-value add to the embedding time.

Run: ``.venv/bin/python benchmarks/bench_statistics.py [--items 2000] [--skip-bert]``.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from capmetrics.components.permutation import all_splits, permutation_test
from capmetrics.engine.parallel import Executor, compare_items, single_threaded_blas
from capmetrics.plugins.multicandidate.kernels import MMD, Frechet
from capmetrics.plugins.multicandidate.trm import TRM, triangle_indicators
from capmetrics.plugins.ngram.cider import CiderD

TOKENS = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k" / "Flickr8k.token.txt"
#: The paper's Table 2 (MS-COCO, 5 references + 10 candidates, i7-6850K + 2 Titan X), samples/s.
PAPER = {"TRM-CIDEr": 97.54, "MMD-BERT": 53.76, "Frechet-BERT": 17.45}


def captions() -> list[list[str]]:
    caps: dict[str, list[str]] = defaultdict(list)
    for line in TOKENS.read_text(encoding="utf-8").splitlines():
        key, text = line.split("\t", 1)
        caps[key.split("#")[0]].append(text)
    return list(caps.values())


def make_items(
    caps: list[list[str]], count: int, n: int, m: int
) -> list[tuple[list[str], list[str]]]:
    """Candidates from other images' captions, references from the item's image."""
    per = len(caps[0])
    items = []
    for i in range(count):
        refs = [c for k in range(-(-m // per)) for c in caps[(3 * i + k) % len(caps)]][:m]
        cands = [c for k in range(-(-n // per)) for c in caps[(3 * i + 1 + k) % len(caps)]][:n]
        items.append((cands, refs))
    return items


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:9.1f} items/s"


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def naive_q_with_exact_p(d: np.ndarray, n: int) -> tuple[float, float]:
    """Reference: the paper's equations re-evaluated on every split by slicing the indicators."""
    ind = triangle_indicators(d)
    size = len(d)

    def q(side: np.ndarray) -> float:
        other = np.setdiff1d(np.arange(size), side)
        sums = ind[:, other][:, :, side][:, :, :, side].sum(axis=(1, 2, 3)) + ind[:, side][
            :, :, other
        ][:, :, :, other].sum(axis=(1, 2, 3))
        return float(np.abs(sums / sums.sum() - 1 / 3).sum())

    values = [q(np.flatnonzero(mask)) for mask in all_splits(size, n)]
    return values[0], float(np.mean(np.array(values) >= values[0]))


def bench_trm(caps: list[list[str]], count: int) -> None:
    small, large = make_items(caps, count, 5, 5), make_items(caps, max(1, count // 5), 10, 10)
    print(f"TRM-CIDEr-D on Flickr8k captions ({count} items of 5+5, {len(large)} of 10+10)")
    for label, items, p_value in (
        ("TRM alone, 5+5", small, "none"),
        ("TRM + exact p (252 splits), 5+5", small, "exact"),
        ("TRM + 1,000 MC permutations, 10+10", large, "monte-carlo"),
    ):
        outputs = []
        for jobs in (1, 2):
            trm = TRM(CiderD(), p_value=p_value, permutations=1000)
            trm.fit([r for _, r in items])  # document frequencies: timed separately below
            out, sec = timed(lambda: compare_items(trm, items, Executor.from_options(jobs=jobs)))  # noqa: B023
            outputs.append([(r.value, r.p_value) for r in out])
            print(f"  {label:38s} jobs={jobs}: {rate(len(items), sec)}")
        assert outputs[0] == outputs[1], "jobs=1 and jobs=2 differ"
    _, fit_sec = timed(lambda: CiderD().fit([r for _, r in small]))
    print(f"  CIDEr-D document frequencies (fit, once per run): {fit_sec:.2f} s for {count} items")

    trm = TRM(CiderD()).fit([r for _, r in small])
    matrices = trm.pooled_many([(list(c), list(r)) for c, r in small[:200]])
    few = matrices[:20]
    with single_threaded_blas():
        _, ours = timed(
            lambda: [
                permutation_test(trm.split_statistic(d, 5), 5, 5, "exact", 1000, 0)
                for d in matrices
            ]
        )
        _, naive = timed(lambda: [naive_q_with_exact_p(d, 5) for d in few])
    ours_rate, naive_rate = len(matrices) / ours, len(few) / naive
    print(
        f"  statistic + exact p only (matrices given): {ours_rate:9.1f} items/s; per-split "
        f"reference {naive_rate:7.1f} items/s; ratio {ours_rate / naive_rate:6.1f}x"
    )
    for d in few[:5]:
        stat = permutation_test(trm.split_statistic(d, 5), 5, 5, "exact", 1000, 0)
        ref = naive_q_with_exact_p(d, 5)
        assert abs(stat.observed - ref[0]) < 1e-12 and abs(stat.p_value - ref[1]) < 1e-12
    print(f"  paper Table 2 TRM-CIDEr (5 refs + 10 cands, 2 GPUs): {PAPER['TRM-CIDEr']} samples/s")


def bench_kernels(caps: list[list[str]], count: int) -> None:
    from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder

    items = make_items(caps, count, 10, 5)
    embedder = SentenceTransformerEmbedder()
    embedder.embed_texts(["warm up"])
    flat = [t for c, r in items for t in c + r]
    vectors, embed_sec = timed(lambda: embedder.embed_texts(flat))
    z = np.asarray(vectors, dtype=np.float64).reshape(count, 15, -1)
    print(f"MMD / Fréchet with MiniLM ({count} items of 10 candidates + 5 references)")
    print(f"  embedding (batched, CPU): {rate(count, embed_sec)}")
    for name, stat in (("MMD-BERT", MMD()), ("Frechet-BERT", Frechet())):
        with single_threaded_blas():
            _, sec = timed(
                lambda: [
                    permutation_test(stat.split_statistic(x, 10), 10, 5, "auto", 1000, 0)  # noqa: B023
                    for x in z
                ]
            )
        print(
            f"  {name:13s} statistic + p (auto: 1,000 MC of 3,003 splits): {rate(count, sec)}; "
            f"adds {100 * sec / embed_sec:5.1f}% to the embedding; end to end "
            f"{count / (sec + embed_sec):7.1f} items/s (paper: {PAPER[name]} samples/s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--bert-items", type=int, default=300)
    parser.add_argument("--skip-bert", action="store_true")
    args = parser.parse_args()
    caps = captions()
    bench_trm(caps, args.items)
    if not args.skip_bert:
        bench_kernels(caps, args.bert_items)


if __name__ == "__main__":
    main()
