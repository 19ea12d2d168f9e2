"""Make tests/data/cider_compat/: self-critical.pytorch's document-frequency pickles and rewards
on real Flickr8k captions, computed by the public code itself (run from a checkout, not copied).

What runs, from the two repositories (paths given on the command line; ruotianluo/cider at
e9b736d, the commit self-critical.pytorch's ``cider`` submodule pins: its branch ``master``; the
older ``dbb3960`` never sets ``document_frequency`` in corpus mode and prepro_ngrams fails there):
  * self-critical.pytorch ``scripts/prepro_labels.py``: ``build_vocab`` (words seen more than 5
    times, else UNK) and ``encode_captions`` (labels of at most 16 ids, zero padded);
  * self-critical.pytorch ``scripts/prepro_ngrams.py``: ``main`` on a Karpathy-style
    ``dataset_*.json`` and ``*talk.json`` written here from Flickr8k (split ``train``: the first
    ``--train`` images of ``Flickr_8k.trainImages.txt``), writing ``<name>-words.p`` and
    ``<name>-idxs.p``;
  * self-critical.pytorch ``captioning/utils/rewards.py``: ``init_scorer`` and
    ``get_self_critical_reward`` with ruotianluo/cider's ``CiderD``/``Cider`` (and pycocoevalcap's
    ``Bleu``) on a batch of 50 test images x 5 samples + 50 greedy captions. Per image, one sample
    is another image's training label and four are the image's own references changed (as is,
    first word dropped, first five words, second word replaced); greedy: a reference's first 8
    words; two samples have 16 ids and no end token, one is empty: real captions of the
    vocabulary with self-critical's padding.

Only imports the scripts need and these runs never touch are stubbed (h5py, torchvision,
skimage, PIL in prepro_labels; ``six`` must be importable: pass ``--six`` a folder holding
``six.py``). Written: the two pickles (gzipped), ``batch.json`` (vocabulary, ids, the strings
rewards.py builds, and its rewards), and ``--full-out`` optionally gets the pickles of all 6,000
training images (for benchmarks/bench_rewards.py; not stored in the repository).

Run:  python experiments/make_cider_compat_fixtures.py --cider /tmp/cider \
          --self-critical /tmp/self-critical.pytorch --six /tmp/six [--full-out /tmp/sc-data]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "flickr8k"
OUT = ROOT / "tests" / "data" / "cider_compat"


def flickr8k_images(data: Path) -> tuple[list[str], list[str], dict[str, list[list[str]]]]:
    """Train and test image names and each image's PTB-tokenised captions (as token lists)."""
    import capmetrics
    from capmetrics.data.flickr8k import load_captions

    _, by_image = load_captions(data)
    names = lambda f: [n.split(".")[0] for n in (data / f).read_text().split()]  # noqa: E731
    train, test = names("Flickr_8k.trainImages.txt"), names("Flickr_8k.testImages.txt")
    ptb = capmetrics.compose("ptb")
    tokens = {n: [t.split() for t in ptb.tokenize_joined(by_image[n])] for n in train + test}
    return train, test, tokens


def load_prepro_labels(sc: Path) -> types.ModuleType:
    """scripts/prepro_labels.py with its unused heavy imports stubbed."""
    for name in (
        "h5py",
        "torchvision",
        "torchvision.models",
        "skimage",
        "skimage.io",
        "PIL",
        "PIL.Image",
    ):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["PIL"].Image = sys.modules["PIL.Image"]  # type: ignore[attr-defined]
    sys.modules["torchvision"].models = sys.modules["torchvision.models"]  # type: ignore[attr-defined]
    sys.modules["skimage"].io = sys.modules["skimage.io"]  # type: ignore[attr-defined]
    sys.path.insert(0, str(sc / "scripts"))
    import prepro_labels  # type: ignore[import-not-found]

    return prepro_labels


@contextlib.contextmanager
def cwd(path: Path):  # type: ignore[no-untyped-def]
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_prepro_ngrams(
    sc: Path, imgs: list[dict], itow: dict[str, str], work: Path, name: str
) -> None:
    """prepro_ngrams.main on ``imgs`` (split train), writing work/data/<name>-{words,idxs}.p."""
    (work / "data").mkdir(exist_ok=True)
    (work / "dataset.json").write_text(json.dumps({"images": imgs}))
    (work / "talk.json").write_text(json.dumps({"ix_to_word": itow}))
    sys.path.insert(0, str(sc / "scripts"))
    import prepro_ngrams  # type: ignore[import-not-found]

    with cwd(work):
        prepro_ngrams.main(
            {
                "input_json": "dataset.json",
                "dict_json": "talk.json",
                "output_pkl": f"data/{name}",
                "split": "train",
            }
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cider", type=Path, required=True, help="a checkout of ruotianluo/cider")
    parser.add_argument(
        "--self-critical", type=Path, required=True, help="a checkout of self-critical.pytorch"
    )
    parser.add_argument("--six", type=Path, required=True, help="a folder with six.py")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--train", type=int, default=300, help="training images of the stored df")
    parser.add_argument(
        "--full-out", type=Path, help="also write the df of all training images here"
    )
    args = parser.parse_args()
    sc = args.self_critical.resolve()
    sys.path[:0] = [str(args.six.resolve()), str(args.cider.resolve()), str(sc)]

    train, test, tokens = flickr8k_images(args.data)
    prepro_labels = load_prepro_labels(sc)
    # the vocabulary of every training image (as prepro_labels builds it over its dataset)
    imgs = [{"split": "train", "sentences": [{"tokens": t} for t in tokens[n]]} for n in train]
    imgs += [{"split": "test", "sentences": [{"tokens": t} for t in tokens[n]]} for n in test[:50]]
    vocab = prepro_labels.build_vocab(imgs, {"word_count_threshold": 5})
    itow = {str(i + 1): w for i, w in enumerate(vocab)}
    wtoi = {w: i + 1 for i, w in enumerate(vocab)}
    labels, start, end, _ = prepro_labels.encode_captions(imgs, {"max_length": 16}, wtoi)
    per_image = [labels[s - 1 : e] for s, e in zip(start.tolist(), end.tolist())]

    work = Path(tempfile.mkdtemp(prefix="cider-compat-"))
    name = f"flickr8k-train{args.train}"
    small = [{"split": img["split"], "sentences": img["sentences"]} for img in imgs[: args.train]]
    run_prepro_ngrams(sc, small, dict(itow), work, name)
    if args.full_out is not None:
        args.full_out.mkdir(parents=True, exist_ok=True)
        run_prepro_ngrams(sc, imgs[: len(train)], dict(itow), args.full_out, "flickr8k-train")

    # a self-critical batch: 50 test images, 5 samples each, 50 greedy captions
    rng = np.random.default_rng(29)
    train_labels = np.concatenate(per_image[: len(train)])
    gts = per_image[len(train) :]
    gen = train_labels[rng.integers(0, len(train_labels), 250)].astype(np.int64)
    greedy = np.zeros((50, 16), np.int64)
    for i, g in enumerate(gts):  # samples near the image's own captions, as a trained model's
        own = g.astype(np.int64)
        greedy[i, :8] = own[0, :8]  # a prefix (cut with its end token, if shorter)
        gen[5 * i + 1] = own[1]  # a reference itself
        gen[5 * i + 2, :15] = own[2, 1:]  # its first word dropped
        gen[5 * i + 3] = 0
        gen[5 * i + 3, :5] = own[3, :5]  # its first five words
        gen[5 * i + 4] = own[4]
        gen[5 * i + 4, 1] = rng.integers(1, len(vocab) + 1)  # its second word replaced
    full = np.flatnonzero(train_labels[:, -1] > 0)  # 16 ids, no end token
    gen[0] = train_labels[full[0]]
    gen[5] = train_labels[full[1]]
    gen[7] = 0  # an empty sample: the end token alone

    import torch
    from captioning.utils import rewards  # type: ignore[import-not-found]

    results = {}
    with cwd(work):
        rewards.init_scorer(name + "-idxs")
        for key, (cw, bw) in {"cider": (1.0, 0.0), "cider+bleu": (1.0, 0.5)}.items():
            opt = types.SimpleNamespace(cider_reward_weight=cw, bleu_reward_weight=bw)
            r = rewards.get_self_critical_reward(
                torch.from_numpy(greedy),
                [g.astype(np.int64) for g in gts],
                torch.from_numpy(gen),
                opt,
            )
            results[key] = r[:, 0].tolist()
        res = [rewards.array_to_str(s) for s in np.concatenate([gen, greedy])]
        refs = [[rewards.array_to_str(r) for r in g] for g in gts]
        res_ = [{"image_id": i, "caption": [c]} for i, c in enumerate(res)]
        gts_ = {i: refs[i // 5] if i < 250 else refs[i - 250] for i in range(300)}
        ciderd = rewards.CiderD_scorer.compute_score(gts_, res_)
        cider = rewards.Cider_scorer.compute_score(gts_, res_)
        from pyciderevalcap.cider.cider import Cider  # type: ignore[import-not-found]

        cider_corpus = Cider(df="corpus").compute_score(gts_, res_)

    OUT.mkdir(parents=True, exist_ok=True)
    for kind in ("words", "idxs"):
        with (
            open(work / "data" / f"{name}-{kind}.p", "rb") as f,
            gzip.open(OUT / f"{name}-{kind}.p.gz", "wb", 9) as g,
        ):
            shutil.copyfileobj(f, g)
    batch = {
        "made_by": "experiments/make_cider_compat_fixtures.py",
        "df": name,
        "ix_to_word": itow,
        "end_id": 0,
        "seq_per_img": 5,
        "gts": [g.tolist() for g in gts],
        "gen_result": gen.tolist(),
        "greedy_res": greedy.tolist(),
        "res_strings": res,
        "gts_strings": refs,
        "rewards": results,
        "ciderd_scores": list(map(float, ciderd[1])),
        "ciderd_mean": float(ciderd[0]),
        "cider_scores": list(map(float, cider[1])),
        "cider_mean": float(cider[0]),
        "cider_corpus_scores": list(map(float, cider_corpus[1])),
        "cider_corpus_mean": float(cider_corpus[0]),
    }
    (OUT / "batch.json").write_text(json.dumps(batch, separators=(",", ":")) + "\n")
    shutil.rmtree(work)
    print(f"wrote {OUT}: df of {args.train} images, batch of 250 samples + 50 greedy")


if __name__ == "__main__":
    main()
