"""Write expert40.json: pycocoevalcap's SPICE on 40 Flickr8k-Expert items (+ 2 edge cases).

Run from the project root after ``capmetrics setup spice`` (it takes about a minute):
``.venv/bin/python tests/data/spice/make_expert40.py``. Texts are tokenised with pycocoevalcap's
PTBTokenizer (Java) and scored by pycocoevalcap's ``Spice.compute_score`` with the original
``spice-1.0.jar`` (tests/plugins/spice_reference.py); the fixture keeps the raw texts, so the test
runs capmetrics' whole path (its own tokenizer included) against these values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "plugins"))

from capmetrics.plugins.spice._resources import find_corenlp, find_js_engine
from coco_reference import raw
from spice_reference import coco_spice

STEP, COUNT = 141, 40
EDGE = [("", ["a red car parked on the street", "a car"]), (" . ", ["two dogs play in the snow"])]
CATEGORIES = ("All", "Object", "Attribute", "Relation", "Color", "Cardinality", "Size")


def main() -> None:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    cands, refs, _ = raw("expert")
    items = [(cands[i], list(refs[i])) for i in range(0, STEP * COUNT, STEP)] + EDGE
    texts = sorted({t for c, rs in items for t in (c, *rs)})
    table = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
    tok = {t: table[i][0] for i, t in enumerate(texts)}
    average, scores = coco_spice(
        [tok[c] for c, _ in items],
        [[tok[r] for r in rs] for _, rs in items],
        find_corenlp()[0].parent,
        find_js_engine()[0],
    )
    out = {
        "source": "Flickr8k-Expert items 0, 141, ..., 5499 (+2 edge cases); "
        "pycocoevalcap 1.2 Spice.compute_score, "
        "original spice-1.0.jar, CoreNLP 3.6.0; made by make_expert40.py",
        "average": average,
        "items": [
            {
                "candidate": c,
                "references": rs,
                "scores": {
                    k: {f: s[k][f] for f in ("pr", "re", "f", "tp", "fp", "fn")} for k in CATEGORIES
                },
            }
            for (c, rs), s in zip(items, scores)
        ],
    }
    path = Path(__file__).with_name("expert40.json")
    path.write_text(json.dumps(out, indent=1, allow_nan=True) + "\n", encoding="utf-8")
    print(f"wrote {path}: average {average}")


if __name__ == "__main__":
    main()
