"""Time capmetrics' segmenting tokenizers (jieba, mecab, sudachi, kiwi, char) against calling each
segmenter directly in a loop, on N distinct captions per language (default 50,000), and check that
both give the same tokens.

Captions: the hand-written captions of tests/data/cjk/ recombined (the head of one caption joined
to the tail of another, seeded), so every one is distinct and no cache helps the first pass.
Reported per tokenizer: loading the segmenter (dictionary, model), the first pass over the N
captions (the direct loop and ``tokenize``), and a second ``tokenize`` of the same captions
(answered from the per-instance cache, as a second metric of a run or an epoch would be).

Usage: python benchmarks/bench_tokenizers_cjk.py [--n 50000] [--only jieba,mecab]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from capmetrics import compose

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cjk"


def captions(lang: str, n: int, seed: int = 0) -> list[str]:
    """``n`` distinct captions built from the fixture's captions of ``lang``."""
    coco = json.loads((DATA / f"{lang}_captions.json").read_text(encoding="utf-8"))
    base = [a["caption"] for a in coco["annotations"]]
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        a, b = rng.choice(base), rng.choice(base)
        cut_a, cut_b = rng.randint(1, len(a)), rng.randint(0, len(b) - 1)
        sep = " " if lang == "ko" else ""
        out[a[:cut_a] + sep + b[cut_b:] + rng.choice(["", "。" if lang != "ko" else "."])] = None
    return list(out)


def _direct_jieba() -> tuple[Callable[[str], list[str]], Callable[[], object]]:
    import jieba

    tok = jieba.Tokenizer()

    def load() -> object:
        jieba.setLogLevel(60)  # the benchmark's own process: no log lines in the table
        tok.initialize()
        return tok

    return (lambda t: " ".join(tok.lcut(t)).split()), load


def _direct_mecab() -> tuple[Callable[[str], list[str]], Callable[[], object]]:
    import fugashi
    import unidic_lite

    holder: dict[str, object] = {}

    def load() -> object:
        holder["t"] = fugashi.Tagger(f'-r "{unidic_lite.DICDIR}/mecabrc" -d "{unidic_lite.DICDIR}"')
        return holder["t"]

    return (lambda t: [w.surface for w in holder["t"](t)]), load  # type: ignore[operator]


def _direct_sudachi() -> tuple[Callable[[str], list[str]], Callable[[], object]]:
    import sudachipy

    holder: dict[str, object] = {}

    def load() -> object:
        holder["t"] = sudachipy.Dictionary(dict="core").tokenizer(mode="A")
        return holder["t"]

    def segment(text: str) -> list[str]:
        morphemes = holder["t"].tokenize(text)  # type: ignore[attr-defined]
        return [m.surface() for m in morphemes if m.surface().strip()]

    return segment, load


def _direct_kiwi() -> tuple[Callable[[str], list[str]], Callable[[], object]]:
    import kiwipiepy

    holder: dict[str, object] = {}

    def load() -> object:
        holder["k"] = kiwipiepy.Kiwi(num_workers=1)
        return holder["k"]

    return (lambda t: [x.form for x in holder["k"].tokenize(t)]), load  # type: ignore[attr-defined]


def _direct_char() -> tuple[Callable[[str], list[str]], Callable[[], object]]:
    return (lambda t: [c for c in t if not c.isspace()]), (lambda: None)


CASES = {  # tokenizer spec -> (language of the captions, direct segmenter)
    "jieba": ("zh", _direct_jieba),
    "mecab": ("ja", _direct_mecab),
    "sudachi": ("ja", _direct_sudachi),
    "kiwi": ("ko", _direct_kiwi),
    "char": ("zh", _direct_char),
}


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--only", default=",".join(CASES))
    args = parser.parse_args()
    print(
        f"{'tokenizer':9s} {'captions':>8s} {'load direct':>11s} {'load cm':>8s} {'direct':>8s} "
        f"{'capmetrics':>10s} {'ratio':>6s} {'cached':>8s}  same tokens"
    )
    for spec in args.only.split(","):
        run(spec, args.n)


def run(spec: str, n: int) -> None:
    """Time one tokenizer against its segmenter and print one row."""
    lang, make = CASES[spec]
    texts = captions(lang, n)
    segment, load = make()
    load_direct, _ = timed(load)
    direct_s, direct = timed(lambda: [segment(t) for t in texts])
    tok = compose(spec, "tokenizer")
    load_cm, _ = timed(lambda: tok.tokenize(["一"]))  # loads the segmenter (one text)
    cm_s, ours = timed(lambda: tok.tokenize(texts))
    cached_s, again = timed(lambda: tok.tokenize(texts))
    same = sum(a == b for a, b in zip(direct, ours))
    assert again == ours
    print(
        f"{spec:9s} {len(texts):8d} {load_direct:10.2f}s {load_cm:7.2f}s {direct_s:7.2f}s "
        f"{cm_s:9.2f}s {cm_s / direct_s:5.2f}x {cached_s:7.3f}s  {same}/{len(texts)}"
    )


if __name__ == "__main__":
    main()
