"""METEOR's ``-norm`` text normalisation for English (punctuation kept), then lower-casing.

What the jar does to a segment before aligning it, as observed and as described in its
documentation (mteval-style tokenisation): symbols other than letters, digits, ``. ' ` , -`` and
curly single quotes are split off; runs of dots become one token; commas are split off except
between digits; curly and doubled quotes are normalised; en dashes and ``--`` become ``-``;
hyphens between letters/digits become spaces; English contractions are split to the right
(``don't`` -> ``don 't``); a word-final dot is split off unless the word is a known nonbreaking
prefix (``Mr.``), is followed by a lower-case word, or a numeric-only prefix followed by a digit,
and dotted mixed abbreviations lose their dots (``U.S.`` -> ``US``). Character classes are the
jar's: ASCII digits, Latin-1/Latin Extended-A, Cyrillic and a few other letter ranges.
"""

from __future__ import annotations

import re
from functools import lru_cache

from capmetrics.plugins.meteor._resources import java_split

ALPHA = (
    "A-Za-z\u0160\u017d\u0161\u017e\u0178\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017e"
    "\u0400-\u04ff\u0500-\u0527\ua640-\ua66e\ua67e-\ua697\u1d00-\u1d7f"
)
ALNUM = "0-9" + ALPHA
JAVA_S = " \t\n\x0b\f\r"
DIGIT = "0-9"

SEP_OTHER = re.compile(f"([^{ALNUM}{JAVA_S}.'`,\\-\u2018\u2019])")
MULTI_DOT = re.compile(r"\.(\.+)")
MULTI_DOT2 = re.compile(r"DOTMULTI\.([^.])")
COMMAS = [
    re.compile(f"([^{DIGIT}]),([^{DIGIT}])"),
    re.compile(f"([{DIGIT}]),([^{DIGIT}])"),
    re.compile(f"([^{DIGIT}]),([{DIGIT}])"),
]
QUOTE1 = re.compile("[`\u2018\u2019]")
QUOTE2 = re.compile("[\u201c\u201d]|''")
RM_DASH = re.compile(f"([{ALNUM}.])-([{ALNUM}])")
CONTRACTIONS = [
    (re.compile(f"([^{ALPHA}])'([^{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([^{ALPHA}{DIGIT}])'([{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([{ALPHA}])'([^{ALPHA}])"), r"\1 ' \2"),
    (re.compile(f"([{ALPHA}])'([{ALPHA}])"), r"\1 '\2"),
    (re.compile(f"([{DIGIT}])'(s)"), r"\1 '\2"),
]
HAS_ALPHA = re.compile(f"[{ALPHA}]")
WHITE = re.compile("[  \u2000-\u200a\u202f\u205f\u3000\u00a0]+")
ANY, NUMERIC_ONLY = 1, 2


def nonbreaking_prefixes(text: str) -> dict[str, int]:
    """The jar's ``nonbreaking/english.prefixes``: prefix -> ANY or NUMERIC_ONLY."""
    prefixes: dict[str, int] = {}
    for line in text.splitlines():
        tokens = java_split(line)
        if not tokens or tokens[0].startswith("#"):
            continue
        numeric = len(tokens) > 1 and tokens[1] == "#NUMERIC_ONLY#"
        prefixes[tokens[0]] = NUMERIC_ONLY if numeric else ANY
    return prefixes


def java_trim(text: str) -> str:
    """java.lang.String.trim: drop characters <= U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _split_dots(words: list[str], prefixes: dict[str, int]) -> str:
    out = []
    for i, word in enumerate(words):
        if len(word) > 1 and word.endswith("."):
            pre = word[:-1]
            kind = prefixes.get(pre)
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if "." in pre and HAS_ALPHA.search(pre):
                out.append(word.replace(".", ""))
            elif (
                kind == ANY
                or ("a" <= nxt[:1] <= "z")
                or kind == NUMERIC_ONLY
                and ("0" <= nxt[:1] <= "9")
            ):
                out.append(word)
            else:
                out.append(pre + " .")
        else:
            out.append(word)
    return "".join(w + " " for w in out)


PLAIN = re.compile("[a-z0-9]+(?: [a-z0-9]+)*")


def normalize(line: str, prefixes: dict[str, int]) -> str:
    """The jar's English ``-norm`` normalisation of one segment (punctuation kept), lower-cased."""
    if PLAIN.fullmatch(line):  # single-spaced lower-case letters and digits: nothing to change
        return line
    s = SEP_OTHER.sub(r" \1 ", f" {line} ")
    s = MULTI_DOT.sub(r" DOTMULTI\1", s)
    while "DOTMULTI." in s:
        s = MULTI_DOT2.sub(r"DOTDOTMULTI \1", s)
        s = s.replace("DOTMULTI.", "DOTDOTMULTI")
    for pattern in COMMAS:
        s = pattern.sub(r"\1 , \2", s)
    s = QUOTE1.sub("'", s)
    s = QUOTE2.sub(' " ', s)
    s = s.replace("\u2013", "-").replace("--", "-")
    s = RM_DASH.sub(r"\1 \2", s)
    for pattern, repl in CONTRACTIONS:
        s = pattern.sub(repl, s)
    s = _split_dots(java_split(s), prefixes)
    while "DOTDOTMULTI" in s:
        s = s.replace("DOTDOTMULTI", "DOTMULTI.")
    s = s.replace("DOTMULTI", ".")
    return java_trim(WHITE.sub(" ", s)).lower()


@lru_cache(maxsize=1 << 16)
def segment_words(
    line: str, prefixes_key: int, prefixes: tuple[tuple[str, int], ...]
) -> tuple[str, ...]:
    """The words the jar aligns for one SCORE field (trimmed, normalised, lower-cased, split)."""
    return tuple(java_split(normalize(java_trim(line), dict(prefixes))))
