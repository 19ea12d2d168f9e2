"""``char``: one token per character, for any script (no segmenter, no dictionary)."""

from __future__ import annotations

import unicodedata

from capmetrics.plugins.tokenizers._segmenter import Segmenter

ZWJ = "\u200d"


#: Characters seen that never attach to the one before (whitespace included): a text made of
#: them only splits at C speed. Bounded, keyed by content.
_PLAIN: set[str] = set()
_PLAIN_LIMIT = 1 << 16


def _attaches(ch: str) -> bool:
    """Whether ``ch`` belongs to the character before it: a combining mark (Thai and Devanagari
    vowel signs, accents written apart), a zero-width joiner, a variation selector or an emoji
    skin tone."""
    return (
        ch == ZWJ or unicodedata.category(ch).startswith("M") or "\U0001f3fb" <= ch <= "\U0001f3ff"
    )


def characters(text: str) -> list[str]:
    """The characters of ``text`` without whitespace: each a base character with the marks that
    follow it, and emoji joined by a zero-width joiner kept together."""
    if _PLAIN.issuperset(text):
        return [ch for word in text.split() for ch in word]
    out: list[str] = []
    join_next = False
    for ch in text:
        if ch.isspace():
            join_next = False
        elif out and (join_next or _attaches(ch)):
            out[-1] += ch
        else:
            out.append(ch)
        if ch not in _PLAIN and len(_PLAIN) < _PLAIN_LIMIT and (ch.isspace() or not _attaches(ch)):
            _PLAIN.add(ch)
        join_next = ch == ZWJ
    return out


class CharTokenizer(Segmenter):
    """One token per character, for any script: Chinese, Japanese or Thai scored without a
    segmenter (character n-grams), or as a segmentation-free check beside one.

    Whitespace separates and is never a token; Latin words become letters too. A combining
    mark stays with the character before it (Thai, Devanagari and decomposed accents stay
    whole). Punctuation characters are tokens unless ``punctuation="remove"``; case is kept
    unless ``lowercase=true``; ``normalize="nfkc"`` maps full-width forms first.
    """

    name = "char"

    def _segment(self, texts: list[str]) -> list[list[str]]:
        return [characters(t) for t in texts]
