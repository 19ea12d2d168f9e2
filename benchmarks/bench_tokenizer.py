"""Time capmetrics' pure-Python ``ptb`` tokenizer against pycocoevalcap's PTBTokenizer (Java, JVM
start-up included) on all 40,460 Flickr8k captions, and check that both give the same tokens.

Usage: python benchmarks/bench_tokenizer.py [path/to/Flickr8k.token.txt] [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from capmetrics.plugins.tokenizers import PTBJarTokenizer, PTBTokenizer

DEFAULT = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k" / "Flickr8k.token.txt"
)


def load(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [" ".join(line.split("\t", 1)[1].split()) for line in lines if "\t" in line]


def best_of(repeat: int, fn, *args):
    """(best wall time in seconds, result) over ``repeat`` runs."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


def coco_tokenize(captions: list[str]) -> list[list[str]]:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer as CocoPTBTokenizer

    out = CocoPTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    return [out[i][0].split() for i in range(len(captions))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    captions = load(args.path)
    n = len(captions)
    print(f"{n} captions from {args.path}")
    rows = [
        ("capmetrics ptb (pure Python)", *best_of(args.repeat, PTBTokenizer().tokenize, captions)),
        ("capmetrics ptb-jar (Java)", *best_of(args.repeat, PTBJarTokenizer().tokenize, captions)),
        ("pycocoevalcap PTBTokenizer (Java)", *best_of(args.repeat, coco_tokenize, captions)),
    ]
    for name, seconds, _ in rows:
        print(f"{name:36s} {seconds:7.3f} s  {n / seconds:10.0f} sentences/s")
    ratio = rows[2][1] / rows[0][1]
    print(f"speed-up of ptb over pycocoevalcap: {ratio:.2f}x")
    same = sum(a == b for a, b in zip(rows[0][2], rows[2][2]))
    print(
        f"identical token lists: {same}/{n} (ptb vs pycocoevalcap); "
        f"{sum(a == b for a, b in zip(rows[1][2], rows[2][2]))}/{n} (ptb-jar vs pycocoevalcap)"
    )


if __name__ == "__main__":
    main()
