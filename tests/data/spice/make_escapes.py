"""Write escapes.json: pycocoevalcap's SPICE on captions full of what PTB tokenisation escapes or
unescapes (``&apos;``, ``&amp;``, ``&quot;``, ``-LRB-``, quotes, ``'s``, ``n't``, brackets,
slashes, non-ASCII), with the issue-30 item
(``a black and white photo of a riding a horse &apos;s``: the jar's 1/9).

Run from the project root after ``capmetrics setup spice`` (about a minute):
``.venv/bin/python tests/data/spice/make_escapes.py``. As make_expert40.py: texts are tokenised
with pycocoevalcap's PTBTokenizer (Java) and scored by pycocoevalcap's ``Spice.compute_score``
with the original ``spice-1.0.jar``; the fixture keeps the raw texts and the jar tokenizer's
output of each, so the test runs capmetrics' whole path (its own tokenizer included).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "plugins"))

from capmetrics.plugins.spice._resources import find_corenlp, find_js_engine
from spice_reference import coco_spice

HORSE_REFS = [
    "A man is riding a horse.",
    "A jockey is riding his brown colored horse",
    "A jockey is riding a horse.",
    "A horse and its jockey galloping in a field",
    "A jockey trots along on a brown horse.",
]
ITEMS: list[tuple[str, list[str]]] = [
    ("a black and white photo of a riding a horse &apos;s", HORSE_REFS),
    ("a jockey&apos;s brown horse", HORSE_REFS),
    ("the horse doesn&apos;t run &amp; the jockey can&apos;t ride", HORSE_REFS),
    ("a man &quot;riding&quot; a horse -LRB- brown -RRB-", HORSE_REFS),
    (
        "a dog 's ball and a cat 's toy",
        ["A dog's red ball lies next to a cat's toy .", "a dog and a cat play"],
    ),
    (
        "the dog doesn't want the cat's ball",
        ["A dog doesn't like the cat .", "The cat won't share its ball ."],
    ),
    (
        "a man (in a red shirt) rides a bike [left]",
        ["A man in a red shirt rides a bicycle .", "a cyclist -LRB- red shirt -RRB- on a road"],
    ),
    (
        "a boy {smiling} on a swing",
        ["A smiling boy on a swing -LCB- outdoors -RCB- .", "kid swinging"],
    ),
    (
        'a sign that says "stop" on a pole',
        ['A red "STOP" sign on a pole .', "a stop sign &quot;stop&quot;"],
    ),
    ("a ``quoted'' word on a wall", ["graffiti on a wall", "words ``written'' on a brick wall"]),
    (
        "a black/white dog and/or a cat",
        ["A black and white dog .", "a dog w/ a cat", "a dog 1/2 asleep"],
    ),
    (
        "a man & a woman at a caf\u00e9",
        ["A man and a woman at a caf\u00e9 .", "two people at a restaurant &amp; bar"],
    ),
    (
        "a na\u00efve d\u00e9j\u00e0-vu with \u201cquotes\u201d and \u2018single\u2019 ones",
        ["a \u201csmart\u201d person", "someone \u2014 somewhere \u2026 smiling"],
    ),
    (
        "children play in the snow &lt;outside&gt;",
        ["Kids playing in the snow .", "children outside in snow &gt; fun"],
    ),
    ("it&apos;s a dog&apos;s life", ["The dog is lying on the couch .", "a dog's life it's"]),
    ("&apos;&apos;a dog&apos;&apos; -- running", ["A dog is running .", "a running dog"]),
    (
        "the players&apos; uniforms are red",
        ["Players in red uniforms .", "the team's players wear red"],
    ),
    ("a man who won&apos;t stop &amp; can't stop", ["A man running .", "a man won't stop"]),
    ("stra\u00dfe in m\u00fcnchen at night", ["A street in Munich at night .", "a city street"]),
    ("\u65e5\u672c a dog", ["a dog", "a brown dog"]),
]
CATEGORIES = ("All", "Object", "Attribute", "Relation", "Color", "Cardinality", "Size")


def main() -> None:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    texts = sorted({t for c, rs in ITEMS for t in (c, *rs)})
    table = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(texts)})
    tok = {t: table[i][0] for i, t in enumerate(texts)}
    average, scores = coco_spice(
        [tok[c] for c, _ in ITEMS],
        [[tok[r] for r in rs] for _, rs in ITEMS],
        find_corenlp()[0].parent,
        find_js_engine()[0],
    )
    out = {
        "source": "captions with PTB escapes; "
        "pycocoevalcap 1.2 PTBTokenizer + Spice.compute_score, "
        "original spice-1.0.jar, CoreNLP 3.6.0; made by make_escapes.py",
        "average": average,
        "tokenized": tok,
        "items": [
            {
                "candidate": c,
                "references": rs,
                "scores": {
                    k: {f: s[k][f] for f in ("pr", "re", "f", "tp", "fp", "fn")} for k in CATEGORIES
                },
            }
            for (c, rs), s in zip(ITEMS, scores)
        ],
    }
    path = Path(__file__).with_name("escapes.json")
    path.write_text(
        json.dumps(out, indent=1, ensure_ascii=False, allow_nan=True) + "\n", encoding="utf-8"
    )
    print(f"wrote {path}: average {average}")


if __name__ == "__main__":
    main()
