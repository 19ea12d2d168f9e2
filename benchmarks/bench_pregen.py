"""Pre-gen metrics speed.

1. All compositions (504 paper ones, 672 with ``nonmax``) for 5,000 items × 5 references of
   ~12 words + END, probabilities in memory: capmetrics' vectorised pass against a per-caption
   Python loop in the style of the released research code (same numbers, checked).
2. The torch adapter's teacher-forced pass over every reference against greedy decoding of one
   caption per item with the same model (the paper's 28 s vs 1,246 s comparison).

Run: ``python benchmarks/bench_pregen.py [--items 5000] [--torch-items 1000]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from capmetrics.data.model import Item
from capmetrics.plugins.pregen.compute import RaggedProbs, evaluate
from capmetrics.plugins.pregen.tiers import all_compositions, paper_compositions


def synthetic(items: int, refs: int = 5, seed: int = 0) -> RaggedProbs:
    """Random probabilities: 8–16 words + END per reference, top more likely for high p."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(9, 18, size=items * refs)
    p = rng.beta(2, 3, size=int(lengths.sum()))
    top = rng.random(p.size) < p * 1.2
    return RaggedProbs(
        p, top, np.concatenate(([0], np.cumsum(lengths))), np.arange(0, items * refs + 1, refs)
    )


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# -- a per-caption loop, as the released code evaluates its tiers -----------------------------
def _filter(pairs, how):
    if how == "none":
        return [p for p, _ in pairs]
    if how == "filter0":
        return [p for p, t in pairs if t]
    if how == "nonmax":
        return [p for p, t in pairs if not t]
    out = []
    for p, t in pairs:
        if not t:
            break
        out.append(p)
    return out


def _score(kept, length, how):
    if how == "count":
        return float(len(kept))
    if how == "normcount":
        return len(kept) / length
    if how == "prob":
        return math.prod(kept) if kept else 0.0
    if not kept or 0.0 in kept:
        return math.inf
    return 2 ** (-sum(math.log2(p) for p in kept) / len(kept))


def _reduce(values, how):
    if how == "sum":
        return sum(values)
    if how == "mean":
        return sum(values) / len(values)
    if how == "median":
        return statistics.median(values)
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    if 0.0 in values:
        return 0.0
    return 2 ** (sum(math.log2(v) for v in values) / len(values))


def loop_evaluate(nested, comps):
    cache = {}
    out = []
    for c in comps:
        key = (c.tier2, c.tier1)
        if key not in cache:
            cache[key] = [
                [_score(_filter(cap, c.tier1), len(cap), c.tier2) for cap in item]
                for item in nested
            ]
        scores = cache[key]
        per_item = (
            [s for item in scores for s in item]
            if c.tier3 == "join"
            else [_reduce(item, c.tier3) for item in scores]
        )
        out.append(_reduce(per_item, c.tier4))
    return np.array(out)


def to_nested(probs: RaggedProbs):
    pairs = list(zip(probs.p.tolist(), probs.top.tolist()))
    caps = [pairs[a:b] for a, b in zip(probs.caption_offsets[:-1], probs.caption_offsets[1:])]
    return [caps[a:b] for a, b in zip(probs.item_offsets[:-1], probs.item_offsets[1:])]


def bench_compositions(items: int) -> None:
    probs = synthetic(items)
    print(f"compositions: {items} items x 5 references, {probs.p.size} positions")
    paper, every = paper_compositions(), all_compositions()
    evaluate(probs, paper[:1])  # load the registry once
    t504 = best_of(lambda: evaluate(probs, paper))
    t672 = best_of(lambda: evaluate(probs, every))
    print(f"  capmetrics 504: {t504:.3f} s   672: {t672:.3f} s")
    nested = to_nested(probs)
    start = time.perf_counter()
    ref = loop_evaluate(nested, every)
    t_loop = time.perf_counter() - start
    ours = evaluate(probs, every)
    finite = np.isfinite(ref)
    assert (np.isinf(ours) == ~finite).all() and np.allclose(
        ours[finite], ref[finite], rtol=1e-9, atol=0
    )
    print(
        f"  per-caption Python loop 672: {t_loop:.2f} s  -> speed-up x{t_loop / t672:.0f} (values "
        "agree)"
    )


# -- torch adapter vs greedy decoding ----------------------------------------------------------
def bench_torch(items: int, vocab_size: int = 3000, dim: int = 256) -> None:
    import capmetrics
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)

    vocab = ["<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(vocab_size - 3)]
    rng = np.random.default_rng(0)
    data = [
        Item(
            str(i),
            tuple(" ".join(rng.choice(vocab[3:], rng.integers(8, 17))) for _ in range(5)),
            (),
        )
        for i in range(items)
    ]
    cond = {str(i): rng.normal(size=dim).astype(np.float32) for i in range(items)}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from pregen_flickr8k import make_decoder  # the experiment's GRU decoder

    model = make_decoder(vocab_size, dim, cond_dim=dim).eval()
    source = capmetrics.compose(
        "torch-model(batch_size=256)", model=model, vocabulary=vocab, conditioning=cond
    )
    start = time.perf_counter()
    probs = source.probabilities(data)
    t_tf = time.perf_counter() - start
    start = time.perf_counter()
    source.greedy_decode(data, max_length=20)
    t_greedy = time.perf_counter() - start
    print(f"torch adapter: {items} items, GRU {dim}, vocabulary {vocab_size}")
    print(
        f"  teacher-forced, {probs.n_captions} references ({probs.p.size} positions): {t_tf:.2f} s "
        f"({probs.n_captions / t_tf:.0f} captions/s)"
    )
    print(
        f"  greedy decoding, {items} captions (20 steps max, prefix re-run): {t_greedy:.2f} s "
        f"({1000 * t_greedy / items:.1f} ms/caption vs {1000 * t_tf / probs.n_captions:.1f} "
        "ms/reference)"
    )
    print(
        f"  -> pre-gen (5 references/item) costs x{t_tf / t_greedy:.2f} of greedy decoding (1 "
        "caption/item)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--torch-items", type=int, default=1000)
    args = parser.parse_args()
    bench_compositions(args.items)
    if args.torch_items:
        bench_torch(args.torch_items)


if __name__ == "__main__":
    main()
