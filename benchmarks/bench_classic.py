"""BLEU-1..4, ROUGE-L and CIDEr-D: capmetrics against pycocoevalcap's ``compute_score`` on the
47,830 Flickr8k-CF items, in one run, with the same numbers checked.

1. Tokenisation excluded from both sides: the texts are tokenised once with pycocoevalcap's
   PTBTokenizer (Java); pycocoevalcap's scorers get those strings, capmetrics gets the same
   strings with the ``whitespace`` tokenizer.
2. Tokenisation included in both: raw captions; pycocoevalcap = its Java PTBTokenizer (one JVM
   run for all texts, as ``COCOEvalCap`` does) + its scorer, capmetrics = its default ``ptb``
   tokenizer (pure Python) + the metric.
3. Pairwise matrices as TRM uses them (5+5 and 10+10 sets, CIDEr-D with fitted df): time per
   ``pairwise`` call.

Run: ``python benchmarks/bench_classic.py [--data DIR] [--repeat 3] [--coco-repeat 1]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.data.flickr8k import load_crowdflower
from capmetrics.plugins.ngram.bleu import Bleu4
from capmetrics.plugins.ngram.cider import CiderD
from capmetrics.plugins.ngram.rouge import RougeL
from capmetrics.plugins.tokenizers import WhitespaceTokenizer

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """(best wall time in seconds, last result) over ``repeat`` runs."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def coco_tokenize(texts: list[str]) -> list[str]:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    out = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
    return [out[i][0] for i in range(len(texts))]


def coco_scorers() -> dict[str, Callable[[dict, dict], Any]]:
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    return {
        "BLEU-1..4": lambda gts, res: Bleu(4).compute_score(gts, res, verbose=0),
        "ROUGE-L": lambda gts, res: Rouge().compute_score(gts, res),
        "CIDEr-D": lambda gts, res: Cider().compute_score(gts, res),
    }


def ours(tokenizer: Any = None) -> dict[str, Any]:
    kw = {} if tokenizer is None else {"tokenizer": tokenizer}
    return {"BLEU-1..4": Bleu4(**kw), "ROUGE-L": RougeL(**kw), "CIDEr-D": CiderD(**kw)}


def same(name: str, coco: Any, mine: Any) -> float:
    """Largest difference between pycocoevalcap's and our per-caption values."""
    if name.startswith("BLEU"):
        return float(np.abs(np.asarray(coco[1]).T - mine.details["by_order"]).max())
    return float(np.abs(np.asarray(coco[1]) - mine.values).max())


def compare(
    title: str,
    cands: list[str],
    refs: list[list[str]],
    metrics: dict[str, Any],
    coco_prepare: Callable[[], tuple[dict, dict]],
    args: argparse.Namespace,
) -> None:
    print(f"\n{title}")
    print(
        f"{'metric':10s} {'pycocoevalcap':>14s} {'capmetrics':>11s} {'ratio':>8s} "
        f"{'max |diff|':>11s}"
    )
    for name, scorer in coco_scorers().items():
        t_coco, coco = best_of(args.coco_repeat, lambda s=scorer: s(*coco_prepare()))
        t_ours, mine = best_of(args.repeat, lambda m=metrics[name]: m.score(cands, refs))
        print(
            f"{name:10s} {t_coco:13.2f}s {t_ours:10.3f}s {t_coco / t_ours:7.1f}x "
            f"{same(name, coco, mine):11.1e}"
        )


def bench_pairwise(sets: list[list[str]], args: argparse.Namespace) -> None:
    print("\npairwise(a, b) per call (TRM-style sets of Flickr8k references)")
    metrics = ours(WhitespaceTokenizer())
    metrics["CIDEr-D"] = metrics["CIDEr-D"].fit(sets)
    pool = sorted({r for rs in sets for r in rs})
    for size in (5, 10):
        calls = [
            (pool[i : i + size], pool[i + size : i + 2 * size])
            for i in range(0, 400 * size, 2 * size)
        ]
        for name, metric in metrics.items():
            t, _ = best_of(args.repeat, lambda m=metric, c=calls: [m.pairwise(a, b) for a, b in c])
            print(f"{name:10s} {size}+{size}: {t / len(calls) * 1e3:7.2f} ms/call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=3, help="best of N for capmetrics")
    parser.add_argument("--coco-repeat", type=int, default=1, help="best of N for pycocoevalcap")
    args = parser.parse_args()

    dataset, _ = load_crowdflower(args.data)
    cands = [it.candidates[0] for it in dataset]
    refs = [list(it.references) for it in dataset]
    texts = sorted({*cands, *(r for rs in refs for r in rs)})
    print(f"Flickr8k-CF: {len(cands)} items, {len(texts)} distinct texts")
    table = dict(zip(texts, coco_tokenize(texts)))
    tok_cands = [table[c] for c in cands]
    tok_refs = [[table[r] for r in rs] for rs in refs]
    tok_gts_res = (
        {i: r for i, r in enumerate(tok_refs)},
        {i: [c] for i, c in enumerate(tok_cands)},
    )

    compare(
        "1. tokenisation excluded (both get pycocoevalcap-tokenised text)",
        tok_cands,
        tok_refs,
        ours(WhitespaceTokenizer()),
        lambda: tok_gts_res,
        args,
    )

    def coco_with_tokenizer() -> tuple[dict, dict]:
        tokens = dict(zip(texts, coco_tokenize(texts)))
        return (
            {i: [tokens[r] for r in rs] for i, rs in enumerate(refs)},
            {i: [tokens[c]] for i, c in enumerate(cands)},
        )

    compare(
        "2. tokenisation included (raw text; Java PTB vs capmetrics ptb)",
        cands,
        refs,
        ours(),
        coco_with_tokenizer,
        args,
    )
    bench_pairwise(tok_refs, args)


if __name__ == "__main__":
    main()
