"""CLIP's byte-level BPE text tokenizer (the vocabulary of OpenAI's checkpoints, PAC-S's and
open_clip's ViT models), written for capmetrics from the published scheme.

A text is cleaned (ftfy's ``fix_text`` when ftfy is installed, HTML entities unescaped twice,
runs of whitespace collapsed, lower-cased), split into words, letters, digits and punctuation
runs, and each piece's UTF-8 bytes are merged by rank; the sequence is framed by the start and
end tokens. Longer than the context: the first ``context - 1`` tokens are kept and the last one
becomes the end token (what ``clip.tokenize(..., truncate=True)`` gives).
"""

from __future__ import annotations

import functools
import gzip
import html
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: The vocabulary file shipped with the plugin (OpenAI CLIP's, MIT licence).
DEFAULT_VOCAB = Path(__file__).with_name("bpe_simple_vocab_16e6.txt.gz")
START, END = "<|startoftext|>", "<|endoftext|>"
_N_MERGES = 49152 - 256 - 2  # the checkpoints' vocabulary: 49408 ids


def _byte_alphabet() -> tuple[list[str], list[str]]:
    """One printable character per byte value (printable bytes stand for themselves, the others
    for 256, 257, ...), and the vocabulary's order of them: the printable bytes first."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    extra = iter(range(256, 512))
    chars = [chr(b) if b in printable else chr(next(extra)) for b in range(256)]
    order = printable + [b for b in range(256) if b not in printable]
    return chars, [chars[b] for b in order]


class ClipBPE:
    """Token ids of texts under CLIP's BPE vocabulary (``vocab``: the gzipped merges file)."""

    def __init__(self, vocab: str | Path = DEFAULT_VOCAB) -> None:
        import regex

        with gzip.open(vocab, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")[1 : _N_MERGES + 1]
        merges = [tuple(line.split()) for line in lines]
        self.alphabet, ordered = _byte_alphabet()
        symbols = (
            ordered + [c + "</w>" for c in ordered] + ["".join(m) for m in merges] + [START, END]
        )
        self.ids = {s: i for i, s in enumerate(symbols)}
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.start, self.end = self.ids[START], self.ids[END]
        self.pieces = regex.compile(
            r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+",
            regex.IGNORECASE,
        )
        try:
            import ftfy

            self._fix = ftfy.fix_text
        except ImportError:  # ftfy only mends mojibake; plain captions are the same without it
            self._fix = None

    @property
    def fixes_text(self) -> bool:
        """Whether ftfy is applied (it is in the reference code; part of the signature)."""
        return self._fix is not None

    def clean(self, text: str) -> str:
        if self._fix is not None:
            text = self._fix(text)
        text = html.unescape(html.unescape(text)).strip()
        return re.sub(r"\s+", " ", text).strip().lower()

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - one tokenizer per process, words repeat
    def _merge(self, piece: str) -> tuple[int, ...]:
        parts = list(piece[:-1]) + [piece[-1] + "</w>"]
        while len(parts) > 1:
            pairs = [
                (self.ranks.get((a, b), None), k) for k, (a, b) in enumerate(zip(parts, parts[1:]))
            ]
            ranked = [(r, k) for r, k in pairs if r is not None]
            if not ranked:
                break
            best = min(ranked)[0]
            first, second = next((parts[k], parts[k + 1]) for r, k in ranked if r == best)
            merged: list[str] = []
            k = 0
            while k < len(parts):  # merge every occurrence of the best pair, left to right
                if k + 1 < len(parts) and parts[k] == first and parts[k + 1] == second:
                    merged.append(first + second)
                    k += 2
                else:
                    merged.append(parts[k])
                    k += 1
            parts = merged
        return tuple(self.ids[p] for p in parts)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without the start and end tokens."""
        out: list[int] = []
        for piece in self.pieces.findall(self.clean(text)):
            out.extend(self._merge("".join(self.alphabet[b] for b in piece.encode("utf-8"))))
        return out

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Token counts with the start and end tokens."""
        return [len(self.encode(t)) + 2 for t in texts]

    def tokenize(self, texts: Sequence[str], context: int = 77) -> tuple[np.ndarray, list[int]]:
        """``(len(texts), context)`` int64 ids, zero-padded, and the indices of the texts that were
        truncated (first ``context - 1`` tokens kept, the last replaced by the end token)."""
        out = np.zeros((len(texts), context), dtype=np.int64)
        cut = []
        for row, text in enumerate(texts):
            ids = [self.start, *self.encode(text), self.end]
            if len(ids) > context:
                ids = ids[:context]
                ids[-1] = self.end
                cut.append(row)
            out[row, : len(ids)] = ids
        return out, cut
