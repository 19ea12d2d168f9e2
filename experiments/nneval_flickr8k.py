"""Train NNEval on the Flickr8k train split and compare it with its own feature metrics.

Early stopping uses the Flickr8k-Expert judgments of half of the 1,000 judged images (split by
image, seeded); the table reports Kendall tau on the other half: tau-c over the Expert rating
points and tau-b over the CF rows, as the ``flickr8k-expert`` / ``flickr8k-cf`` presets do.

    python experiments/nneval_flickr8k.py --root ../shared/data/flickr8k --seed 0 \\
        --out nneval-flickr8k

Features are cached in ``--cache`` (default ``~/.cache/capmetrics/nneval``), so a second run
only trains.
"""

from __future__ import annotations

import argparse
import ast
import time
from pathlib import Path

import numpy as np
from capmetrics.analysis.meta import correlations, load_preset
from capmetrics.plugins.nneval import NNEval
from capmetrics.plugins.nneval.training_data import build_training_set, load_flickr8k_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="../shared/data/flickr8k")
    parser.add_argument(
        "--seed", type=int, default=0, help="seeds the training set, the image split and the MLP"
    )
    parser.add_argument("--out", default="nneval-flickr8k", help="folder for the trained model")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "capmetrics" / "nneval"))
    parser.add_argument(
        "--feature", action="append", help="feature spec (repeat); default: the paper's set"
    )
    parser.add_argument(
        "--param", action="append", default=[], help="learner option key=value (repeat)"
    )
    parser.add_argument(
        "--impostor-pool", type=int, default=0, help="0: all captions of other images"
    )
    parser.add_argument("--impostor-sampling", default="uniform")
    args = parser.parse_args()

    t0 = time.time()
    train_images = load_flickr8k_split(args.root, "train")
    training = build_training_set(
        train_images,
        seed=args.seed,
        impostor_pool=args.impostor_pool,
        impostor_sampling=args.impostor_sampling,
    )
    expert, expert_preset = load_preset("flickr8k-expert", args.root)
    cf, cf_preset = load_preset("flickr8k-cf", args.root)
    overlap = {str(i.id) for i in train_images} & set(expert.groups)
    assert not overlap, f"train images overlap the judged images: {sorted(overlap)[:3]}"
    print(
        f"training set: {len(training)} candidates from {len(train_images)} images "
        f"({int(training.labels.sum())} human, {int((training.labels == 0).sum())} impostors) "
        f"[{time.time() - t0:.0f}s]"
    )

    params = {k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in args.param)}
    learner = NNEval(features=args.feature, seed=args.seed, cache_dir=args.cache, **params)
    learner.features_ = learner.feature_specs()
    x_train = learner.raw_features(training.candidates, training.references)
    print(f"training features {x_train.shape} [{time.time() - t0:.0f}s]")
    feats = {}
    for name, judged in (("expert", expert), ("cf", cf)):
        cands, refs, _ = judged.dataset.flat_pairs()
        feats[name] = learner.raw_features(cands, refs)
        print(f"{name} features {feats[name].shape} [{time.time() - t0:.0f}s]")

    val_mask, test_mask = expert.split_by_group(0.5, seed=args.seed)
    val_images = {g for g, m in zip(expert.groups, val_mask) if m}
    cf_test_mask = np.array([g not in val_images for g in cf.groups])
    t1 = time.time()
    learner.fit_features(
        x_train, training.labels, (feats["expert"][val_mask], expert.subset(val_mask))
    )
    print(
        f"trained: best epoch {learner.log_.best_epoch + 1} of {len(learner.log_.loss)} run, "
        f"validation tau {max(learner.log_.validation):.4f} [{time.time() - t1:.0f}s training]"
    )
    learner.save(args.out)

    rows = []
    for name, judged, mask, preset in (
        ("expert", expert, test_mask, expert_preset),
        ("cf", cf, cf_test_mask, cf_preset),
    ):
        test = judged.subset(mask)
        columns = {spec: feats[name][mask, k] for k, spec in enumerate(learner.features_)}
        columns["nneval"] = learner.predict_features(feats[name][mask])
        for metric, values in columns.items():
            stats = correlations(values[test.point_item], test.point_rating)
            rows.append(
                (
                    name,
                    preset.primary,
                    metric,
                    stats[preset.primary],
                    len(test.dataset),
                    test.n_points,
                )
            )
    print(
        f"\nseed {args.seed}; test half: {int(test_mask.sum())} Expert items, "
        f"{int(cf_test_mask.sum())} CF items\n"
    )
    print("| metric | Expert test half, tau-c x100 | CF test half, tau-b x100 |")
    print("| --- | --- | --- |")
    for metric in [*learner.features_, "nneval"]:
        e = next(r[3] for r in rows if r[0] == "expert" and r[2] == metric)
        c = next(r[3] for r in rows if r[0] == "cf" and r[2] == metric)
        print(f"| {metric} | {100 * e:.3f} | {100 * c:.3f} |")
    best = {n: max(r[3] for r in rows if r[0] == n and r[2] != "nneval") for n in ("expert", "cf")}
    nn = {n: next(r[3] for r in rows if r[0] == n and r[2] == "nneval") for n in ("expert", "cf")}
    print(
        f"\nNNEval beats every feature: Expert {nn['expert'] > best['expert']}, CF "
        f"{nn['cf'] > best['cf']} [total {time.time() - t0:.0f}s]"
    )


if __name__ == "__main__":
    main()
