"""A pure-Python re-implementation of coco-caption's tokenization (CoreNLP 3.4.1 PTBTokenizer).

coco-caption runs ``edu.stanford.nlp.process.PTBTokenizer -preserveLines -lowerCase`` on its
captions and then drops punctuation tokens. This module reproduces the lexer's behaviour on
caption-like text with longest-match rules over whitespace-separated chunks (a token of the lexer
spans a space only in the fractions "1 1/2", handled on the whole line, and in phone numbers and
SGML tags with attributes, which are not reproduced). The rules follow the lexer's token classes;
the character classes were measured on the jar; tests/plugins/test_tokenizers.py compares everything
with the jar's output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

from capmetrics.plugins.tokenizers.ptb_chars import DIGITS, LETTERS, SYMBOLS

#: Tokens coco-caption removes after tokenization (pycocoevalcap ``PUNCTUATIONS``). The bracket
#: escapes are upper case there, so the lower-cased ``-lrb-`` ... survive, exactly as in
#: coco-caption.
PUNCTUATION = frozenset(
    [
        "''",
        "'",
        "``",
        "`",
        "-LRB-",
        "-RRB-",
        "-LCB-",
        "-RCB-",
        ".",
        "?",
        "!",
        ",",
        ":",
        "-",
        "--",
        "...",
        ";",
    ]
)

# the lexer reads the HTML entity &apos; as an apostrophe wherever it takes one
_APOS = "(?:['\u0092\u2019]|&apos;)"
_APOSX = "(?:['\u0092\u2019`\u0091\u2018\u201b]|&apos;)"
_ABBREV = (
    # months, days, states, companies, titles and other abbreviations that keep their period
    r"(?i:jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec|mon|tues?|wed|thu|thurs|fri"
    r"|ala|ariz|calif|colo|conn|ct|dak|fla|ga|ind|kans?|ky|md|mich|minn|miss|mo|mont|neb|nev|okla"
    r"|penn|tenn|va|vt|wisc?|wyo|inc|cos?|corp|ltd|plc|rt|bancorp|bhd|assn|univ|intl|sys|dept|invt|elec"
    r"|natl|blvd|rd|ave|wm|jos|cie|cf|ph|tel|est|ext|sq|jr|sr|bros|esq|etc|al|seq|bldg|mr|mrs|ms|drs?"
    r"|profs?|sens?|reps?|attys?|lt|col|gen|messrs|govs?|adm|rev|maj|sgt|cpl|pvt|capt|ste?|pres|lieut"
    r"|hon|brig|co?mdr|pfc|spc|supts?|det|mt|ft|adj|adv|asst|assoc|ens|insp|mlle|mme|msgr|sfc|vs|alex"
    r"|(?:ed|ph)\.d)"
    # case-sensitive first letter (or whole word) in the lexer
    r"|[A](?i:z|rk)|[D](?i:el)|[I](?i:ll)|[L](?i:a)|[M](?i:ass)|[O](?i:re)|[P](?i:a)|[T](?i:ex)|[W](?i:ash)"
    r"|(?i:p)p?t[ye]s?|(?i:m)[ft]g"
)

_SGML = r"</?[A-Za-z!][^<>\s]*>"


@dataclass(frozen=True)
class CharClasses:
    """The lexer's character classes (regex class bodies)."""

    letters: str
    digits: str  # besides 0-9
    symbols: str


#: The classes measured on the jar, and their ASCII parts (equal on ASCII text, much faster to
#: compile; tests/plugins/test_tokenizers.py checks they are the intersections).
UNICODE = CharClasses(LETTERS, DIGITS, SYMBOLS)
ASCII = CharClasses("A-Za-z", "", r"$%&'*+,:;<=>\\^`|~")


def _rules(c: CharClasses) -> list[tuple[str, str]]:
    """(kind, pattern) of every lexer rule over the classes ``c``; the longest match wins, the
    earlier rule on ties (JFlex semantics). A named group "t" marks the token when the match
    includes trailing context."""
    L, D = f"[{c.letters}]", f"[0-9{c.digits}]"
    AS = f"[{c.letters}0-9{c.digits}]"  # letter or digit
    A = f"[{c.letters}0-9{c.digits}\u00ad]"  # ... or soft hyphen
    A_ = f"(?:{A}|_+(?={AS}))"  # ... or "_" inside a token (only the THING rule joins it)
    not_l = f"(?!{L})"
    word = f"{L}{A}*(?:[.!?]{L}{A}*)*"
    redaux = f"{_APOS}(?i:s|m|d|re|ve|ll){not_l}"
    num = rf"{D}*(?:[.,]{D}+)+|{D}+(?:[.:,]{D}+)*"
    thing_part = f"(?:[dDoOlL]{_APOSX}{A})?{AS}{A_}*"
    return [
        ("assim", rf"{_APOS}t(?=(?:is|was){not_l})"),
        ("word_redaux", f"(?P<t>{word}){_APOS}(?i:s|m|d|re|ve|ll)"),
        ("word_not", f"(?P<t>{L}*[A-MO-Za-mo-z])[nN]{_APOSX}[tT]"),
        ("redaux", f"{redaux}|[nN]{_APOSX}[tT]{not_l}"),
        ("word", word),
        ("abbrev", rf"(?:{_ABBREV}|[A-Za-z](?:\.[A-Za-z])*)\."),
        ("word_dot", rf"(?P<t>{word}\.)[,;:]"),
        ("thing", f"{thing_part}(?:-(?:{thing_part}|{D}+(?:[.,]{D}+)+))*"),
        ("hthing", rf"{AS}(?:{A}|[.,])*(?:-(?:{A}+(?:\.{D}+)?|[A-Za-z](?:\.[A-Za-z])+\.))+"),
        ("thinga", r"[A-Z]+(?:(?:[+&]|&amp;)[A-Z]+)+"),
        ("thing3", r"[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"),
        (
            "apoword",
            (
                f"{_APOS}n(?:{_APOS}|{not_l})|[lLdDjJyY]{_APOS}|(?i:dunkin|somethin|ol){_APOS}|{_APOS}(?:em|till?|cause|[2-9]0s)"
                f"|[A-HJ-XZn]{_APOSX}{L}{{2,}}|{L}+[aeiouyAEIOUY]{_APOSX}[aeiouA-Z]{L}*"
                f"|(?i:c'mon|e'er|li'l|nat'l|cont'd|nor'easter|s'mores|ev'ry)|{_APOS}{D}{D}(?!\\S)"
            ),
        ),
        ("number", f"[-+]?(?:{num})"),
        ("frac", rf"(?:{D}{{1,4}}[-\x00])?{D}{{1,4}}\\?/{D}{{1,4}}"),
        (
            "url",
            r"(?:https?|ftp|mailto)://[^\s\"<>|()]*[^\s\"<>|().!?,;:'-]|www\.(?:[^\s\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4}(?:/[^\s\"<>|()]+[^\s\"<>|.!?(){},-])?(?![A-Za-z])",
        ),
        ("email", r"[A-Za-z0-9][^\s\"<>|(){}]*@(?:[^\s\"<>|(){}.]+\.)*[^\s\"<>|(){}\[\].,;:]+"),
        ("twitter", r"@[A-Za-z_][A-Za-z_0-9]*|#[A-Za-z]+"),
        ("sgml", _SGML),
        ("smiley", r"[<>]?[:;=][-o*']?[()DPdpO\\{@|\[\]](?![A-Za-z0-9])"),
        ("dollar", r"[A-Za-z]*\$"),
        ("ldots", r"\.\.\.+"),
        ("entity", r"&(?:amp|lt|gt|quot|nbsp|#\d+);"),
        ("apos_entity", "&apos;"),  # a lone one is a quote (removed as punctuation)
        ("bracket_escape", "(?i:-[lr][rcs]b-)"),  # the lexer's own escapes are kept as they are
        ("hyphens", "-+"),
        ("run", r"[?!]+|\*+|#+|@+|``|''|\^_\^"),
    ]


@dataclass(frozen=True)
class Lexer:
    """The compiled rules over one set of character classes."""

    rules: list[tuple[str, re.Pattern[str]]]
    symbol: re.Pattern[str]
    frac_space: re.Pattern[str]


@lru_cache(maxsize=2)
def lexer(ascii: bool) -> Lexer:
    """The lexer for ASCII text (compiled when first needed) or for any text."""
    c = ASCII if ascii else UNICODE
    D = f"[0-9{c.digits}]"
    return Lexer(
        [(kind, re.compile(pattern)) for kind, pattern in _rules(c)],
        re.compile(f"[{c.symbols}.?!@/#_-]"),
        re.compile(rf"(?<![\w'\u2019.,:/\\-])({D}{{1,4}}) (?={D}{{1,4}}\\?/{D}{{1,4}})"),
    )


_PLAIN_WORD = re.compile("[A-Za-z]+|[0-9]+")  # always a single token (but see _ASSIMILATIONS)
_ASSIMILATIONS = {"cannot": 3, "gonna": 2, "gotta": 2, "lemme": 2, "gimme": 2, "wanna": 2}
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": "''", "&nbsp;": ""}
_SINGLE = {
    "(": "-LRB-",
    ")": "-RRB-",
    "[": "-LSB-",
    "]": "-RSB-",
    "{": "-LCB-",
    "}": "-RCB-",
    '"': "''",
    "\x93": "``",
    "\x94": "''",
    "\u201c": "``",
    "\u201d": "''",
    "\u00ab": "``",
    "\u00bb": "''",
    "\x91": "`",
    "\x92": "'",
    "\u2018": "`",
    "\u2019": "'",
    "\u201b": "`",
    "\u2039": "`",
    "\u203a": "'",
    "\x96": "--",
    "\x97": "--",
    "\u2013": "--",
    "\u2014": "--",
    "\u2015": "--",
    "\u00ad": "-",
    "\u2026": "...",
    "\x80": "$",
    "\u00a4": "$",
    "\u20a0": "$",
    "\u20ac": "$",
    "\u00a3": "#",
    "\u00a2": "cents",
    "\u00bc": "1/4",
    "\u00bd": "1/2",
    "\u00be": "3/4",
    "\u2153": "1/3",
    "\u2154": "2/3",
}
_PAREN_ESCAPES = str.maketrans({"(": "-LRB-", ")": "-RRB-"})
# After a one-letter acronym ("I."), these words make the lexer end the sentence: "I" + "." instead
# of "I.".
_STARTERS = frozenset(
    "A About According Additionally After An As At But Earlier He Her Here However If In It Last "
    "Many More Mr. Ms. Now Once One Other Our She Since So Some Such That The Their Then There "
    "These They This We When While What"
    " Yet You".split()
)
_ABBREV3 = frozenset(
    ["ca.", "fig.", "figs.", "prop.", "no.", "nos.", "art.", "bldg.", "pp.", "op."]
)
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _longest_match(
    rules: list[tuple[str, re.Pattern[str]]], chunk: str, pos: int
) -> tuple[str, str] | None:
    """Return (kind, token text) of the longest rule match at ``pos``; earlier rules win ties."""
    best: tuple[int, str, str] | None = None
    for kind, pattern in rules:
        m = pattern.match(chunk, pos)
        if m is None or m.end() == pos:
            continue
        if best is None or m.end() > best[0]:
            token = m.group("t") if "t" in pattern.groupindex else m.group()
            best = (m.end(), kind, token)
    return None if best is None else (best[1], best[2])


def _normalize(kind: str, text: str) -> list[str]:
    """Turn one lexer match into the token(s) the jar prints (before lower-casing)."""
    if kind == "word":
        split = _ASSIMILATIONS.get(text.lower())
        text = text.replace("\u00ad", "")
        return [text[:-split], text[-split:]] if split else [text]
    if kind == "frac":
        return [text.replace("\x00", "\u00a0")]
    if kind == "hyphens":
        return [text if len(text) > 4 else "-" if len(text) == 1 else "--"]
    if kind == "ldots":
        return ["..."]
    if kind == "entity":
        norm = _ENTITIES.get(text, text)
        return [norm] if norm else []
    if kind in ("redaux", "apos_entity"):
        return [text.replace("&apos;", "'")]
    if kind == "thinga":
        return [text.replace("&amp;", "&")]
    if kind == "smiley":
        return [text.translate(_PAREN_ESCAPES)]
    if kind == "run" and text[0] in "`'":
        return ["''"]
    return [text.replace("\u00ad", "")]


def lex_chunk(chunk: str) -> list[str]:
    """Tokenize one whitespace-free chunk as the 3.4.1 lexer does (case preserved, nothing
    removed)."""
    tokens: list[str] = []
    lex = lexer(chunk.isascii())
    pos, end = 0, len(chunk)
    while pos < end:
        found = _longest_match(lex.rules, chunk, pos)
        if found is not None:
            kind, text = found
            pos += len(text)
            tokens.extend(_normalize(kind, text))
            continue
        char = chunk[pos]
        pos += 1
        if char in _SINGLE:
            tokens.append(_SINGLE[char])
        elif lex.symbol.match(char):
            tokens.append(char)
        # anything else is untokenizable for the lexer, which deletes it
    return tokens


class ChunkTokens(dict):
    """Per-call memo: chunk -> its final tokens (lower-cased, punctuation removed).

    ``contextual`` collects the chunks ending in "<letter>." whose tokens depend on the next word.
    """

    def __init__(self) -> None:
        super().__init__()
        self.contextual: set[str] = set()

    def __missing__(self, chunk: str) -> list[str]:
        if _PLAIN_WORD.fullmatch(chunk) and chunk.lower() not in _ASSIMILATIONS:
            value = self[chunk] = [chunk.lower()]
            return value
        if _LETTER_DOT_END.search(chunk):
            self.contextual.add(chunk)
        tokens = [t.lower() for t in lex_chunk(chunk)]
        value = self[chunk] = [t for t in tokens if t not in PUNCTUATION]
        return value


def _is_starter(word: str) -> bool:
    if word[:1] == "<":
        return re.match(_SGML, word) is not None
    return word[:1].isupper() and word[:1] + word[1:].lower() in _STARTERS


def _ends_with_letter_acronym(chunk: str) -> bool:
    """Whether the chunk ends with a one-letter acronym such as "I." (standing alone in its
    token)."""
    return (
        len(chunk) >= 2
        and chunk[-1] == "."
        and chunk[-2] in _ASCII_LETTERS
        and (len(chunk) == 2 or not (chunk[-3].isalnum() or chunk[-3] in ".'_"))
    )


_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ABBREV3_CASED = frozenset(v for a in _ABBREV3 for v in (a, a.upper(), a.capitalize()))
_LETTER_DOT_END = re.compile(
    r"[A-Za-z]\.$"
)  # a chunk ending in "<letter>." needs the context rules


def _tokenize_dotted(chunks: list[str], memo: ChunkTokens, next_word: str) -> list[str]:
    """Tokens of a caption with chunks ending in "<letter>.": these depend on the following word."""
    out: list[str] = []
    last = len(chunks) - 1
    for i, chunk in enumerate(chunks):
        following = chunks[i + 1] if i < last else next_word
        if chunk in _ABBREV3_CASED and following[:1].isdigit():  # "No. 5" keeps its period
            out.append(chunk.lower())
            continue
        out.extend(memo[chunk])
        if chunk[-1] == "." and _ends_with_letter_acronym(chunk) and _is_starter(following):
            out[-1] = out[-1][:-1]
    return out


def _next_word(lines: list[str], index: int) -> str:
    """First word of the next non-empty caption: the jar reads all captions of a batch as one
    text."""
    for line in lines[index + 1 :]:
        words = line.split(maxsplit=1)
        if words:
            return words[0]
    return ""


def split_lines(texts: Iterable[str]) -> list[str]:
    """The captions with line breaks replaced by spaces (coco-caption replaces "\\n"; the jar breaks
    on all)."""
    lines = list(texts)
    joined = "\n".join(lines)
    if (
        joined.count("\n") == max(len(lines) - 1, 0)
        and _LINE_BREAKS.search(joined.replace("\n", " ")) is None
    ):
        return lines
    return [_LINE_BREAKS.sub(" ", line) for line in lines]


def tokenize(texts: Iterable[str]) -> list[list[str]]:
    """Tokenize captions exactly like coco-caption's PTBTokenizer (one memo per call, nothing
    global)."""
    memo = ChunkTokens()
    lookup = memo.__getitem__
    flatten = chain.from_iterable
    contextual = memo.contextual
    lines = split_lines(texts)
    result: list[list[str]] = []
    for index, line in enumerate(lines):
        if "/" in line:
            line = lexer(line.isascii()).frac_space.sub("\\1\x00", line)
        chunks = line.split()
        tokens = list(flatten(map(lookup, chunks)))
        if contextual and not contextual.isdisjoint(chunks):
            tokens = _tokenize_dotted(chunks, memo, _next_word(lines, index))
        result.append(tokens)
    return result
