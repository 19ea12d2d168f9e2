"""Appendix B.1 of Chan et al. (2022) on Flickr8k: sensitivity (mean log10 p-value) and items/s
of MMD over five embedders and of TRM-CIDEr-D, TRM-METEOR, TRM-BERTScore and MAUVE.

Items: the Flickr8k-Expert images with at least 5 judged candidates; candidates = 5 of them
(captions of *other* images, judged against this one), references = the image's 5 human
captions ("5 vs 5"). A lower mean log10 p means the method separates the sets more often.
fastText vectors are trained on the Flickr8k captions (gensim, as the tests do); GloVe is 6B-50d.
Times include embedding (each method in a fresh process state, models loaded before timing).

    python experiments/distribution_b1_flickr8k.py --root ../shared/data/flickr8k --items 200 \
        --out docs/metrics/distribution-b1.md
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import capmetrics
from capmetrics.data.flickr8k import group_by_image, load_captions, load_expert

#: The paper's table (MSR-VTT human captions, 5 vs 5): method -> (log-p, samples/s).
PAPER = {
    "trm(distance=cider-d)": (-1.596, 88.93),
    "mmd(embedder=bert)": (-1.786, 56.68),
    "mmd(embedder=clip)": (-1.887, 14.41),
    "mmd(embedder=glove)": (-1.952, 54.8),
    "mmd(embedder=fasttext)": (-1.954, 57.45),
    "mmd(embedder=bow)": (-2.022, 49.41),
}


def items_of(root: str, count: int) -> list[tuple[list[str], list[str]]]:
    return group_by_image(load_expert(root)[0].items, 5, min_candidates=5, min_references=5)[:count]


def train_fasttext(root: str, folder: Path) -> Path:
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    _, by_image = load_captions(root)
    sentences = [c.lower().split() for caps in by_image.values() for c in caps]
    model = FastText(sentences, vector_size=50, min_count=2, epochs=5, workers=1, seed=1)
    path = folder / "flickr8k-ft.bin"
    save_facebook_model(model, str(path))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="../shared/data/flickr8k")
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument(
        "--clip", help="a CLIP model directory (none is bundled; the row is skipped without it)"
    )
    parser.add_argument("--method", action="append", help="only these specs (repeat)")
    parser.add_argument("--out", help="write the markdown table here")
    args = parser.parse_args()

    items = items_of(args.root, args.items)
    folder = Path(tempfile.mkdtemp())
    methods = [
        "mmd(embedder=bow)",
        "mmd(embedder=glove)",
        None,
        "mmd(embedder=bert)",
        "trm(distance=cider-d)",
        "trm(distance=meteor)",
        "trm(distance=bertscore)",
        "mauve",
    ]
    if args.clip:
        methods.append(f'mmd(embedder=clip(model="{args.clip}"))')
    rows = []
    for spec in methods:
        if spec is None:
            spec = f'mmd(embedder=fasttext(path="{train_fasttext(args.root, folder)}"))'
        if args.method and not any(spec.startswith(m) for m in args.method):
            continue
        stat = capmetrics.compose(spec, "statistic")
        stat.fit([r for _, r in items])
        stat.compare_many(items[:2])  # loads models, jars and vectors before timing
        start = time.perf_counter()
        results = stat.compare_many(items)
        elapsed = time.perf_counter() - start
        p = np.array([r.p_value for r in results if r.p_value is not None], dtype=float)
        log_p = float(np.mean(np.log10(p))) if len(p) else float("nan")
        short = spec.split("(path=")[0].rstrip("(") + ")" if "fasttext" in spec else spec
        short = "mmd(embedder=clip)" if "clip" in spec else short
        rows.append((short, log_p, len(items) / elapsed, len(p)))
        print(
            f"{short:32s} log10 p {log_p:7.3f}  {len(items) / elapsed:8.1f} items/s  ({len(p)} "
            "p-values)",
            flush=True,
        )

    caption = (
        f"Flickr8k-Expert, {len(items)} images, 5 judged candidates vs 5 human references "
        "(exact p-values over 252 splits), this machine's CPU; the paper: MSR-VTT human captions, "
        "5 vs 5."
    )
    lines = [
        caption,
        "",
        "| method | mean log10 p (Flickr8k) | items/s | paper log-p | paper samples/s |",
        "| --- | --- | --- | --- | --- |",
    ]
    for short, log_p, rate, _ in rows:
        paper = PAPER.get(short)
        lines.append(
            f"| `{short}` | {log_p:.3f} | {rate:.1f} | {paper[0] if paper else ''} | "
            f"{paper[1] if paper else ''} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table)


if __name__ == "__main__":
    main()
