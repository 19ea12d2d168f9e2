"""WordNet 3.0 through NLTK's ``WordNetCorpusReader``, read from wherever its files are.

The files are looked for in this order: the folder given (a metric's ``wordnet`` parameter),
``$CAPMETRICS_WORDNET_DIR``, NLTK's own ``corpora/wordnet`` in the user's ``nltk_data``, then
Debian's ``wordnet-base`` (``/usr/share/wordnet``, ``apt-get install wordnet-base``). Debian's
package has no ``lexnames`` file, which NLTK's reader wants: its 45 lines (the lexicographer
files of WordNet 3.0, ``man 5 lexnames``) are served from memory when the folder lacks one.

The reader opens only the WordNet file names NLTK asks for, inside the chosen folder; nothing is
written, and NLTK's global state (``nltk.data.path``, its ``wordnet`` loader) is left alone.
Lemmatizing is NLTK's ``WordNetLemmatizer.lemmatize`` (the shortest of ``_morphy``'s lemmas, else
the word), synonyms are the lemma names of ``synsets(word)``, as CAPTURE and chair.py use them.
"""

from __future__ import annotations

import io
import os
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from capmetrics.errors import MetricError

#: Where Debian's ``wordnet-base`` installs WordNet 3.0.
DEBIAN_DIR = Path("/usr/share/wordnet")
_LEXNAMES = [
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
]
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
LEXNAMES = "".join(f"{i:02d}\t{n}\t{_CATEGORY[n.split('.')[0]]}\n" for i, n in enumerate(_LEXNAMES))
_LOCK = threading.Lock()


def find_wordnet(folder: str | None = None) -> Path:
    """The folder holding WordNet's ``data.noun``, ``index.noun``, ... files.

    Raises:
        MetricError: none of the places holds them (the message says how to install them).
    """
    places: list[Path] = []
    if folder:
        places.append(Path(folder).expanduser())
    elif os.environ.get("CAPMETRICS_WORDNET_DIR"):
        places.append(Path(os.environ["CAPMETRICS_WORDNET_DIR"]).expanduser())
    else:
        places.extend(_nltk_folders())
        places.append(DEBIAN_DIR)
    for place in places:
        if (place / "data.noun").is_file() and (place / "index.noun").is_file():
            return place
    raise MetricError(
        "WordNet 3.0 not found in "
        + ", ".join(str(p) for p in places)
        + "; install it with: apt-get install wordnet-base (or set CAPMETRICS_WORDNET_DIR)"
    )


def _nltk_folders() -> list[Path]:
    """``corpora/wordnet`` under the folders NLTK searches by default (unzipped copies only)."""
    import sys

    roots = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    roots += [
        "~/nltk_data",
        *(str(Path(sys.prefix) / d) for d in ("nltk_data", "share/nltk_data", "lib/nltk_data")),
        "/usr/share/nltk_data",
        "/usr/local/share/nltk_data",
        "/usr/lib/nltk_data",
        "/usr/local/lib/nltk_data",
    ]
    return [Path(p).expanduser() / "corpora" / "wordnet" for p in roots]


def _reader_class() -> type:
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from nltk.data import PathPointer, SeekableUnicodeStreamReader

    class Folder(PathPointer):  # type: ignore[misc]
        """A file or folder of the WordNet directory (no global path registration needed)."""

        def __init__(self, path: Path) -> None:
            self.path = path

        def open(self, encoding: str | None = None) -> Any:
            stream = open(self.path, "rb")  # noqa: SIM115  (the reader keeps its data files open)
            return SeekableUnicodeStreamReader(stream, encoding) if encoding else stream

        def file_size(self) -> int:
            return self.path.stat().st_size

        def join(self, fileid: str) -> Folder:
            if "/" in fileid or "\\" in fileid or fileid.startswith("."):
                raise MetricError(f"wordnet: unexpected file name {fileid!r}")
            return Folder(self.path / fileid)

    class Reader(WordNetCorpusReader):  # type: ignore[misc]
        def open(self, file: str) -> Any:
            path = self.root.join(file)
            if file == "lexnames" and not path.path.is_file():
                return io.StringIO(LEXNAMES)
            if file.startswith("index.") or file.endswith(".exc") or file == "lexnames":
                # read once, line by line: a plain text file (5x faster than NLTK's seekable reader)
                return open(path.path, encoding=self.encoding(file) or "utf-8")
            return path.open(self.encoding(file))

        def map_wn(self, version: str = "wordnet") -> None:
            return None  # the map to another WordNet version serves multilingual lookups only

    Reader.Folder = Folder
    return Reader


class WordNet:
    """NLTK's WordNet reader over one folder, with the lookups CAPTURE and CHAIR make (cached)."""

    def __init__(self, folder: Path) -> None:
        try:
            reader_class = _reader_class()
        except ImportError as err:
            raise MetricError(
                "nltk is not installed; install it with: pip install 'capmetrics[detailed]'"
            ) from err
        with warnings.catch_warnings():  # "multilingual functions are not available": none are used
            warnings.simplefilter("ignore")
            self.reader = reader_class(reader_class.Folder(folder), None)
        self.folder = folder
        self.version = str(self.reader.get_version())
        self.lemmatize = lru_cache(maxsize=None)(self._lemmatize)
        self.synonyms = lru_cache(maxsize=None)(self._synonyms)

    def _lemmatize(self, word: str, pos: str) -> str:
        """NLTK's ``WordNetLemmatizer().lemmatize(word, pos)``."""
        with _LOCK:
            lemmas = self.reader._morphy(word, pos)
        return min(lemmas, key=len) if lemmas else word

    def _synonyms(self, word: str) -> frozenset[str]:
        """The lemma names of every synset of ``word`` (any part of speech)."""
        with _LOCK:
            return frozenset(
                lemma.name() for synset in self.reader.synsets(word) for lemma in synset.lemmas()
            )


@lru_cache(maxsize=4)
def _load(folder: Path) -> WordNet:
    return WordNet(folder)


def wordnet(folder: str | None = None) -> WordNet:
    """The WordNet of ``folder`` (see :func:`find_wordnet`), loaded once per process."""
    found = find_wordnet(folder)
    net = _load(found.resolve())
    if net.version != "3.0":
        raise MetricError(
            f"WordNet in {found} is version {net.version}; CAPTURE and CHAIR use WordNet 3.0"
        )
    return net
