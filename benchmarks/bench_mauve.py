"""MAUVE permutation p-values: capmetrics' ``mauve`` against calling mauve-text 0.4.0 once per
split.

Items: Flickr8k-Expert images with at least 5 judged candidates, 5 candidates vs the image's 5
references (MiniLM features, embedded once and given to both sides). mauve-text:
``compute_mauve(p_features=..., q_features=...)`` on the observed split and on ``PERMS`` random
permutations per item, faiss on one thread on both sides (with OpenMP threads its k-means of 10
points is ~75x slower here), two ways, as ``mauve``'s ``row_order`` has them:

A. ``pooled``: each side's rows in the item's order. capmetrics: ``mauve(p_value=exact)`` over
   all 252 splits; the permuted MAUVE values must be equal, split by split.
B. ``shuffled``: a uniformly random permutation of the 10 rows (faiss seeds its k-means from
   rows at fixed positions, so this is another test). capmetrics:
   ``mauve(row_order=shuffled, p_value=monte-carlo, permutations=5000)``; per permutation, the
   value capmetrics' quantiser gives that row order must equal mauve-text's.

For each, mauve-text's Monte-Carlo p-values (share of sampled permutations with MAUVE ≤
observed) are compared with capmetrics' (taken as exact; B's own Monte-Carlo error is ~11x
smaller than mauve-text's): z of the mean difference (sum of differences over its binomial
standard error), a dispersion χ² (Σ (X − P·p)² / (P·p·(1 − p)) over items with P·p and
P·(1 − p) ≥ 5, where the χ² approximation holds),
and a KS test of the randomised PIT values u = F(X − 1) + V·f(X), F and f the Binomial(P, p)
cdf and pmf, V uniform: exactly uniform when every count X is a Binomial(P, p) draw. Also prints
the speed of an exact p-value.

``--large`` instead times one larger pool: 50 + 50 random 64-d features (means 0 vs 0.3),
5 buckets, a Monte-Carlo p-value over 1,000 splits, against 5 timed mauve-text calls × 1,001.

Usage: python benchmarks/bench_mauve.py [N_ITEMS] [PERMS] | --large
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import capmetrics
from capmetrics.data.flickr8k import group_by_image, load_expert
from capmetrics.plugins.mauve._divergence import histograms, mauve_scores
from capmetrics.plugins.mauve._quantise import SplitQuantiser

ROOT = os.environ.get(
    "CAPMETRICS_FLICKR8K",
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "flickr8k"),
)


def load_items(n_items: int) -> list[tuple[list[str], list[str]]]:
    return group_by_image(load_expert(ROOT)[0].items, 5, min_candidates=5, min_references=5)[
        :n_items
    ]


def agreement(exact: np.ndarray, hits: np.ndarray, perms: int) -> str:
    """Monte-Carlo counts ``hits`` (of ``perms`` splits) against exact p-values ``exact``."""
    from scipy import stats

    var = exact * (1 - exact) / perms
    z = float(np.sum(hits / perms - exact) / np.sqrt(var.sum()))
    inner = np.minimum(exact, 1 - exact) * perms >= 5  # where the χ² approximation holds
    chi2 = float(np.sum((hits[inner] - perms * exact[inner]) ** 2 / (perms * var[inner] * perms)))
    dof = int(inner.sum())
    edge = int(
        np.sum(hits[(exact == 0) | (exact == 1)] != perms * exact[(exact == 0) | (exact == 1)])
    )
    v = np.random.default_rng(1).random(len(exact))
    pit = stats.binom.cdf(hits - 1, perms, exact) + v * stats.binom.pmf(hits, perms, exact)
    ks = stats.kstest(pit, "uniform")
    return (
        f"mean p exact {exact.mean():.3f} vs Monte-Carlo {np.mean(hits / perms):.3f}: z = {z:+.2f} "
        f"(|z| < 2 expected); dispersion chi2 = {chi2:.0f} on {dof} dof (two-sided p = "
        f"{2 * min(stats.chi2.sf(chi2, dof), stats.chi2.cdf(chi2, dof)):.2f}), {edge} items with p "
        f"in {{0, 1}} disagree; KS of the PIT D = {ks.statistic:.3f} (p = {ks.pvalue:.2f})"
    )


def large() -> None:
    import faiss
    import mauve
    from capmetrics.plugins.mauve import MAUVE

    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(0)
    z = np.vstack([rng.normal(0, 1, (50, 64)), rng.normal(0.3, 1, (50, 64))])
    start = time.perf_counter()
    result = MAUVE(p_value="monte-carlo")._test(z, ["c"] * 50, ["r"] * 50)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(5):
        reference = mauve.compute_mauve(p_features=z[50:], q_features=z[:50]).mauve
    per_call = (time.perf_counter() - start) / 5
    print(
        f"50+50, 5 buckets, 1,000 Monte-Carlo splits: capmetrics {t_ours:.1f} s (p = "
        f"{result.p_value:.3f}; observed |d| = {abs(result.observed - reference):.1e}); mauve-text "
        f"{per_call * 1e3:.0f} ms per call -> {per_call * 1001:.0f} s for the same p-value "
        f"({per_call * 1001 / t_ours:.0f}x)"
    )


def main() -> None:
    import faiss
    import mauve

    if "--large" in sys.argv:
        large()
        return
    n_items = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    perms = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    faiss.omp_set_num_threads(1)
    items = load_items(n_items)
    stat = capmetrics.compose("mauve(p_value=exact)", "statistic")
    start = time.perf_counter()
    pooled = stat.pooled_many(items)
    t_embed = time.perf_counter() - start
    stat.pooled_many = lambda _: pooled  # type: ignore[method-assign]
    start = time.perf_counter()
    ours = stat.compare_many(items)
    t_ours = time.perf_counter() - start
    exact = {"A": np.array([r.p_value for r in ours])}
    shuffled = capmetrics.compose(
        "mauve(row_order=shuffled,p_value=monte-carlo,permutations=5000)", "statistic"
    )
    shuffled.pooled_many = lambda _: pooled  # type: ignore[method-assign]
    start = time.perf_counter()
    exact["B"] = np.array([r.p_value for r in shuffled.compare_many(items)])
    t_shuffled = time.perf_counter() - start

    rng = np.random.default_rng(0)
    worst, t_ref, calls = 0.0, 0.0, 0
    hits = {"A": np.zeros(len(items)), "B": np.zeros(len(items))}
    same = {"A": 0, "B": 0}
    for i, (z, result) in enumerate(zip(pooled, ours)):
        start = time.perf_counter()
        observed = mauve.compute_mauve(p_features=z[5:], q_features=z[:5]).mauve
        t_ref += time.perf_counter() - start
        calls += 1
        worst = max(worst, abs(observed - result.value))
        quantiser = SplitQuantiser(z, 2)
        for way in ("A", "B"):
            for _ in range(perms):
                order = rng.permutation(10)
                mask = np.zeros((1, 10))
                mask[0, order[:5]] = 1.0
                rows = np.flatnonzero(mask[0]), np.flatnonzero(mask[0] == 0)
                q, p = (order[:5], order[5:]) if way == "B" else rows
                start = time.perf_counter()
                value = mauve.compute_mauve(p_features=z[p], q_features=z[q]).mauve
                t_ref += time.perf_counter() - start
                calls += 1
                hits[way][i] += value <= observed + 1e-10
                rows_in_order = np.concatenate([q, p])[None]
                onehot = quantiser.ordered_labels(rows_in_order)[:, :, None] == np.arange(2)
                mine = mauve_scores(
                    histograms(np.einsum("sn,snk->sk", 1 - mask, onehot)),
                    histograms(np.einsum("sn,snk->sk", mask, onehot)),
                )[0]
                same[way] += int(abs(mine - value) <= 1e-9)
    per_call = t_ref / calls
    ours_per_split = t_ours / (len(items) * 252)
    total = len(items) * perms
    print(f"{len(items)} items of 5+5; features embedded once in {t_embed:.1f} s")
    print(f"observed MAUVE: max |d| = {worst:.1e} (target <= 1e-9)")
    for way, label in (("A", "A, row_order=pooled"), ("B", "B, row_order=shuffled")):
        print(
            f"{label}: sampled permutations with the same MAUVE as capmetrics' (|d| <= 1e-9): "
            f"{same[way]}/{total} ({same[way] / total:.1%})"
        )
        print(
            f"  p-values ({perms} permutations per item): {agreement(exact[way], hits[way], perms)}"
        )
    print(
        f"A and B differ: mean |p_A - p_B| = {np.mean(np.abs(exact['A'] - exact['B'])):.3f}; "
        f"row_order=shuffled with 5,000 permutations: {t_shuffled / len(items) * 1e3:.1f} ms per "
        f"item (mauve-text: {per_call * 5000:.0f} s)"
    )
    print(
        f"time per split: mauve-text {per_call * 1e3:.2f} ms, capmetrics "
        f"{ours_per_split * 1e3:.4f} ms (quantisation + all 252 splits: "
        f"{t_ours / len(items) * 1e3:.1f} ms per item) -> {per_call / ours_per_split:.0f}x per "
        f"split; an exact p-value per item: mauve-text {per_call * 252:.2f} s vs capmetrics "
        f"{t_ours / len(items):.4f} s ({per_call * 252 / (t_ours / len(items)):.0f}x; target >= "
        "10x)"
    )


if __name__ == "__main__":
    main()
