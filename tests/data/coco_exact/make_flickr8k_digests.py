"""Make flickr8k.json: pycocoevalcap 1.2's numbers on all of Flickr8k-Expert and Flickr8k-CF.

For each benchmark and scorer (``Bleu(4)``, ``Meteor``, ``Rouge``, ``Cider``), ``compute_score``
on the texts tokenised by pycocoevalcap's own PTBTokenizer (``tests.plugins.coco_reference``):
the corpus value(s) (JSON floats read back to the same bits) and the SHA-256 of the per-image
values as little-endian float64 bytes (BLEU: the four orders one after the other). METEOR's
Flickr8k-Expert values are stored in full too, for a readable diff. The METEOR jar takes a few
minutes on CF, which is why tests/compat/test_exact_parity.py compares with these numbers
instead of running it.

Run from the repository root: ``python tests/data/coco_exact/make_flickr8k_digests.py``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))


def digest(values: object) -> str:
    """SHA-256 of per-image values as little-endian float64 bytes."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f8").tobytes()).hexdigest()


def main() -> None:
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge

    from tests.plugins.coco_reference import tokenized

    out: dict[str, dict] = {}
    meteor = Meteor()
    try:
        for name in ("expert", "cf"):
            cands, refs = tokenized(name)
            gts = {i: list(r) for i, r in enumerate(refs)}
            res = {i: [c] for i, c in enumerate(cands)}
            table: dict[str, dict] = {}
            corpus, per_image = Bleu(4).compute_score(gts, res, verbose=0)
            table["Bleu"] = {"corpus": [float(c) for c in corpus], "sha256": digest(per_image)}
            for label, scorer in (("Meteor", meteor), ("Rouge", Rouge()), ("Cider", Cider())):
                corpus, per_image = scorer.compute_score(gts, res)
                table[label] = {"corpus": float(corpus), "sha256": digest(per_image)}
                if label == "Meteor" and name == "expert":
                    table[label]["values"] = [float(v) for v in per_image]
            out[name] = {"items": len(cands), **table}
    finally:
        meteor.meteor_p.kill()
    (HERE / "flickr8k.json").write_text(json.dumps(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
