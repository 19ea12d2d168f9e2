"""MAUVE permutation p-values: capmetrics' ``mauve`` against calling mauve-text 0.4.0 once per split.

Items: Flickr8k-Expert images with at least 5 judged candidates, 5 candidates vs the image's 5
references (MiniLM features, embedded once and given to both sides). capmetrics: exact p-values
over all 252 splits. mauve-text: ``compute_mauve(p_features=..., q_features=...)`` on the
observed split and on ``PERMS`` random splits per item (a Monte-Carlo p-value), faiss limited to
one thread on both sides (with OpenMP threads its k-means of 10 points is ~75x slower here).
Prints: observed values equal (target |Δ| ≤ 1e-9), per-split values equal on the sampled splits,
p-value agreement within Monte-Carlo error, and the speed-up per permutation.

Usage: python benchmarks/bench_mauve.py [N_ITEMS] [PERMS]
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import capmetrics
from capmetrics.data.flickr8k import load_expert

ROOT = os.environ.get("CAPMETRICS_FLICKR8K", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "flickr8k"))


def main() -> None:
    import faiss
    import mauve

    n_items = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    perms = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    faiss.omp_set_num_threads(1)
    dataset, _ = load_expert(ROOT)
    by_image: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for it in dataset.items:
        group = by_image[it.id.split("#")[0]]
        group[0].append(it.candidates[0])
        group[1][:] = list(it.references)
    items = [(c[:5], r[:5]) for c, r in by_image.values() if len(c) >= 5 and len(r) >= 5][:n_items]
    stat = capmetrics.compose("mauve(p_value=exact)", "statistic")
    start = time.perf_counter()
    pooled = stat.pooled_many(items)
    t_embed = time.perf_counter() - start
    stat.pooled_many = lambda _: pooled  # type: ignore[method-assign]
    start = time.perf_counter()
    ours = stat.compare_many(items)
    t_ours = time.perf_counter() - start

    rng = np.random.default_rng(0)
    worst, same, total, within, p_mc = 0.0, 0, 0, 0, []
    t_ref = 0.0
    for (c, r), z, result in zip(items, pooled, ours):
        start = time.perf_counter()
        observed = mauve.compute_mauve(p_features=z[5:], q_features=z[:5]).mauve
        null = []
        for _ in range(perms):
            order = rng.permutation(10)
            null.append(mauve.compute_mauve(p_features=z[order[5:]], q_features=z[order[:5]]).mauve)
            mask = np.zeros((1, 10))
            mask[0, order[:5]] = 1.0
            same += int(abs(-stat.split_statistic(z, 5)(mask)[0] - null[-1]) <= 1e-9)
        t_ref += time.perf_counter() - start
        total += perms
        worst = max(worst, abs(observed - result.value))
        p = (1 + np.sum(np.array(null) <= observed + 1e-10)) / (1 + perms)
        p_mc.append(p)
        se = np.sqrt(max(result.p_value * (1 - result.p_value), 1e-4) / perms)
        within += int(abs(p - result.p_value) <= 2 * se + 1 / (1 + perms))
    per_call = t_ref / (len(items) * (perms + 1))
    ours_per_split = t_ours / (len(items) * 252)
    p_ours = np.array([r.p_value for r in ours])
    print(f"{len(items)} items of 5+5; features embedded once in {t_embed:.1f} s")
    print(f"observed MAUVE: max |d| = {worst:.1e} (target <= 1e-9)")
    print(f"sampled permutation splits with the same MAUVE as mauve-text on that split: {same}/{total} ({same / total:.1%})")
    print(f"p-values: mean exact {p_ours.mean():.3f}, mean mauve-text Monte-Carlo ({perms} splits) {np.mean(p_mc):.3f}, "
          f"mean |d| {np.mean(np.abs(p_ours - p_mc)):.3f}; within 2 SE: {within}/{len(items)}")
    print(f"time per split: mauve-text {per_call * 1e3:.2f} ms, capmetrics {ours_per_split * 1e3:.4f} ms "
          f"(quantisation + all 252 splits: {t_ours / len(items) * 1e3:.1f} ms per item) -> "
          f"{per_call / ours_per_split:.0f}x per split; an exact p-value per item: "
          f"mauve-text {per_call * 252:.2f} s vs capmetrics {t_ours / len(items):.4f} s "
          f"({per_call * 252 / (t_ours / len(items)):.0f}x; target >= 10x)")


if __name__ == "__main__":
    main()
