"""CHAIR's vocabulary: which words of a caption name which COCO object.

A caption is lower-cased and tokenized as NLTK's ``word_tokenize`` does (Punkt sentences, then
NLTK's Treebank-style word tokenizer; Punkt here runs with its default parameters, since NLTK's
trained English model is not installable offline), each token singularized (WordNet's noun
lemma: chair.py uses ``pattern.en.singularize``, which is not installable), then pairs of tokens
that form one of COCO's two-word objects are joined ("hot dog", "teddy bear", "baby bird" ->
"bird", "bow tie" -> "tie", ...), "seat" is dropped from captions that mention a toilet, and each
remaining word found in the synonym table is mapped to its COCO object (the first word of its
row), as chair.py's ``caption_to_words`` does.

The synonym table format is chair.py's ``synonyms.txt``: one COCO object per line, the object
first, then its synonyms, separated by ``", "`` (split exactly so: a double space leaves a word
with a leading space, which never matches, as in chair.py). A word on several lines maps to the
object of its last line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from capmetrics.errors import MetricError

#: Two-word COCO objects that count as one word (chair.py's list).
TWO_WORD_OBJECTS = (
    "motor bike",
    "motor cycle",
    "air plane",
    "traffic light",
    "street light",
    "traffic signal",
    "stop light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "suit case",
    "sports ball",
    "baseball bat",
    "baseball glove",
    "tennis racket",
    "wine glass",
    "hot dog",
    "cell phone",
    "mobile phone",
    "teddy bear",
    "hair drier",
    "potted plant",
    "bow tie",
    "laptop computer",
    "stove top oven",
    "home plate",
    "train track",
)
#: "baby <animal>" and "adult <animal>" name the animal, not a person.
ANIMALS = (
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "animal",
    "cub",
)
#: "passenger <vehicle>" names the vehicle.
VEHICLES = ("jet", "train")


def two_word_table() -> dict[str, str]:
    """Two consecutive (singularized) words -> the word they count as."""
    table = {w: w for w in TWO_WORD_OBJECTS}
    for animal in ANIMALS:
        table[f"baby {animal}"] = animal
        table[f"adult {animal}"] = animal
    for vehicle in VEHICLES:
        table[f"passenger {vehicle}"] = vehicle
    table.update({"bow tie": "tie", "toilet seat": "toilet", "wine glas": "wine glass"})
    return table


@dataclass(frozen=True)
class Vocabulary:
    """The synonym table as chair.py reads it: every word, and each word's COCO object."""

    words: frozenset[str]
    object_of: dict[str, str]

    @classmethod
    def from_text(cls, text: str, source: str) -> Vocabulary:
        rows = [line.strip().split(", ") for line in text.splitlines()]
        object_of: dict[str, str] = {}
        for n, row in enumerate(rows, start=1):
            if not row or not row[0]:
                raise MetricError(
                    f"chair: {source}:{n}: an empty line (one COCO object and its synonyms a line)"
                )
            for word in row:
                object_of[word] = row[0]
        return cls(frozenset(object_of), object_of)


@lru_cache(maxsize=8)
def read_vocabulary(path: str, size: int = -1, mtime: int = -1) -> Vocabulary:
    """The synonym table of ``path`` (``size`` and ``mtime`` key the cache to its version)."""
    from capmetrics.errors import DataError
    from capmetrics.io.strict_json import read_bytes

    try:
        text = read_bytes(Path(path).expanduser(), "a synonyms file").decode("utf-8")
    except (DataError, UnicodeDecodeError) as err:
        raise MetricError(f"chair: cannot read synonyms file {path}: {err}") from None
    return Vocabulary.from_text(text, path)


@lru_cache(maxsize=1)
def _tokenizers() -> tuple[object, object]:
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer(), NLTKWordTokenizer()


def tokenize(text: str) -> list[str]:
    """NLTK's ``word_tokenize`` with an untrained Punkt (see the module docstring)."""
    sentences, words = _tokenizers()
    return [t for s in sentences.tokenize(text) for t in words.tokenize(s)]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Mentions:
    """The COCO objects a caption names: the words as found, their objects, their positions."""

    words: tuple[str, ...]
    objects: tuple[str, ...]
    positions: tuple[int, ...]


def mentions(
    caption: str, vocabulary: Vocabulary, singular: Callable[[str], str], pairs: dict[str, str]
) -> Mentions:
    """chair.py's ``caption_to_words``: the COCO words of ``caption`` and their objects."""
    tokens = [singular(t) for t in tokenize(caption.lower())]
    merged: list[str] = []
    starts: list[int] = []
    i = 0
    while i < len(tokens):
        starts.append(i)
        pair = " ".join(tokens[i : i + 2])
        if pair in pairs:
            merged.append(pairs[pair])
            i += 2
        else:
            merged.append(tokens[i])
            i += 1
    if "toilet" in merged and "seat" in merged:
        merged = [w for w in merged if w != "seat"]
    keep = [k for k, w in enumerate(merged) if w in vocabulary.words]
    # chair.py takes positions from the list before the "seat" removal, by index in the list after
    # it
    return Mentions(
        tuple(merged[k] for k in keep),
        tuple(vocabulary.object_of[merged[k]] for k in keep),
        tuple(starts[k] for k in keep),
    )


def objects_of(
    captions: Sequence[str],
    vocabulary: Vocabulary,
    singular: Callable[[str], str],
    pairs: dict[str, str],
) -> set[str]:
    """The COCO objects that reference captions name."""
    return {o for c in captions for o in mentions(c, vocabulary, singular, pairs).objects}
