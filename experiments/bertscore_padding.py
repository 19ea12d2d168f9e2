"""How much bert-score's padding moves BERTScore: all of Flickr8k-Expert (5,664 candidates, 5
references each) with the bundled MiniLM, F1 by the definition (``floor=off``, bert-score with
``batch_size=1``), at bert-score's default ``batch_size=64`` (``floor=bert-score``) and with every
best match clamped at 0 (``floor=zero``, capmetrics' former default). Prints, per setting, the
items whose F1 differs from the definition's by more than 1e-6 and the largest difference, for
docs/metrics/bertscore.md.

Run: ``python experiments/bertscore_padding.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import capmetrics
import numpy as np
from capmetrics.data.flickr8k import load_expert

FLICKR8K = Path(
    os.environ.get(
        "CAPMETRICS_FLICKR8K", Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"
    )
)


def main() -> None:
    dataset, _ = load_expert(FLICKR8K)
    cands = [it.candidates[0] for it in dataset.items]
    refs = [list(it.references) for it in dataset.items]
    f1 = {
        floor: capmetrics.compose(f"bertscore(floor={floor})", "distance")
        .score(cands, refs)
        .details["f1"]
        for floor in ("off", "bert-score", "zero")
    }
    print(f"{len(cands)} items; F1 against floor=off (the definition, bert-score batch_size=1)")
    for floor in ("bert-score", "zero"):
        gap = np.abs(f1[floor] - f1["off"])
        worst = int(np.argmax(gap))
        print(
            f"floor={floor:10s} differs on {int((gap > 1e-6).sum())} items, by up to "
            f"{gap.max():.4f} (item {worst}: {cands[worst]!r}: {f1[floor][worst]:.4f} against "
            f"{f1['off'][worst]:.4f})"
        )
    per_pair_cands = [c for c, rs in zip(cands, refs) for _ in rs]
    per_pair_refs = [[r] for rs in refs for r in rs]
    pair = {
        floor: capmetrics.compose(f"bertscore(floor={floor})", "distance")
        .score(per_pair_cands, per_pair_refs)
        .details
        for floor in ("off", "zero")
    }
    gap = np.abs(pair["zero"]["f1"] - pair["off"]["f1"])
    print(
        f"single pairs: {len(gap)}; floor=zero differs on {int((gap > 1e-6).sum())}, by up to "
        f"{gap.max():.4f}"
    )
    p, r, f = (pair["off"][k] for k in ("precision", "recall", "f1"))
    outside = (f > np.maximum(p, r) + 1e-6) | (f < np.minimum(p, r) - 1e-6)
    print(
        f"floor=off: {int(((p < 0) | (r < 0)).sum())} pairs with a negative P or R; "
        f"{int(outside.sum())} of them with an F1 outside [min(P, R), max(P, R)] (2PR/(P+R) of "
        f"opposite signs), up to {f[outside].max(initial=0):.4f}"
    )


if __name__ == "__main__":
    main()
