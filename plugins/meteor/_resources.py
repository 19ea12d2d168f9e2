"""METEOR 1.5's English resources, read from the installed jar and paraphrase table.

Nothing is copied into this repository: the function words, the WordNet synsets and their
morphological exceptions come from inside ``meteor-1.5.jar``, the paraphrase table from
``paraphrase-en.gz`` (both installed by pycocoevalcap). The first use turns them into compact
arrays under ``<cache>/meteor/<checksum of the two files>`` (a few seconds, once); later processes
memory-map them, so a cold start reads only the pages a caption touches.

Paraphrase table layout: the table's phrases, deduplicated (``phrase_words``: vocabulary numbers
per phrase), their 64-bit keys sorted for lookup (``phrase_keys`` / ``phrase_order``), and for each
phrase the paraphrases listed for it as a reference phrase, in file order (``para``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from capmetrics.cache import cache_root as default_cache_dir
from capmetrics.errors import MetricError
from capmetrics.plugins.meteor._tables import Ragged, StringIndex, cached_arrays, release_pages
from capmetrics.plugins.meteor.jar import meteor_files

CACHE_VERSION = 1
#: Multiplier of the rolling phrase key (any odd 64-bit number works; collisions are checked).
KEY_MULT = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1
#: Characters Python's str.split() treats as whitespace but Java's StringTokenizer does not.
_PY_ONLY_SPACE = re.compile("[\x0b\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_JAVA_SPACE = re.compile("[ \t\n\r\f]+")


def java_split(text: str) -> list[str]:
    """Split on the five characters java.util.StringTokenizer splits on (space, \\t, \\n, \\r, \\f)."""
    if _PY_ONLY_SPACE.search(text) is None:
        return text.split()
    return [t for t in _JAVA_SPACE.split(text) if t]


def phrase_key(ids: tuple[int, ...] | list[int]) -> int:
    """The rolling 64-bit key of a phrase of vocabulary numbers (same as the vectorised build)."""
    key = 0
    for i in ids:
        key = (key * KEY_MULT + i + 1) & MASK
    return key


def _fix_hint(path: Path) -> str:
    return (f"{path} is missing or unreadable; reinstall pycocoevalcap "
            "(pip install --force-reinstall 'capmetrics[coco]')")


def _digest(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    except OSError as e:
        raise MetricError(f"meteor: {_fix_hint(path)} ({e})") from None
    return digest.hexdigest()


def _jar_text(jar: Path, member: str) -> str:
    try:
        with zipfile.ZipFile(jar) as z:
            return z.read(member).decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise MetricError(f"meteor: cannot read {member} from {jar}: {e}; reinstall pycocoevalcap "
                          "(pip install --force-reinstall 'capmetrics[coco]')") from None


def _lines(text: str) -> list[str]:
    """Lines as java.io.BufferedReader.readLine gives them (\\n, \\r or \\r\\n end a line)."""
    lines = re.split("\r\n|\r|\n", text) if "\r" in text else text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ---------------------------------------------------------------- building
def _build_synonyms(jar: Path) -> dict[str, np.ndarray]:
    synsets = _lines(_jar_text(jar, "synonym/english.synsets"))
    words = synsets[0::2]
    sets = [[int(t) for t in java_split(line)] for line in synsets[1::2]]
    # Later lines for the same word replace earlier ones (a Hashtable put).
    last = {w: i for i, w in enumerate(words)}
    words = list(last)
    sets = [sorted(set(sets[i])) for i in last.values()]
    index = StringIndex.build(words)
    exceptions = _lines(_jar_text(jar, "synonym/english.exceptions"))
    rows = {w: i for i, w in enumerate(words)}
    bases: dict[str, list[int]] = {}  # a form's base words (-1: a base without synsets)
    for base, forms in zip(exceptions[0::2], exceptions[1::2]):
        for form in java_split(forms):
            bases.setdefault(form, []).append(rows.get(base, -1))
    forms = list(bases)
    return {**index.arrays("syn_words"), **Ragged.build(sets).arrays("syn_sets"),
            **StringIndex.build(forms).arrays("exc_forms"),
            **Ragged.build([bases[f] for f in forms]).arrays("exc_bases")}


def _build_paraphrases(table: Path) -> dict[str, np.ndarray]:
    try:
        raw = gzip.decompress(table.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise MetricError(f"meteor: cannot read the paraphrase table: {_fix_hint(table)} ({e})") from None
    text = raw.decode("utf-8", "replace")
    del raw
    lines = _lines(text)
    irregular = _PY_ONLY_SPACE.search(text) is not None or re.search(
        "(?:^|\n)[ \t\f]|[ \t\f](?:\n|$)|[ \t\f]{2}|[\t\f]", text) is not None
    del text
    count = len(lines) // 3
    refs, pars = lines[1:3 * count:3], lines[2:3 * count:3]
    del lines
    if irregular:
        refs = [" ".join(java_split(x)) for x in refs]
        pars = [" ".join(java_split(x)) for x in pars]
    number: dict[str, int] = {}
    ref_ix = np.fromiter((number.setdefault(p, len(number)) for p in refs), dtype=np.int32, count=count)
    par_ix = np.fromiter((number.setdefault(p, len(number)) for p in pars), dtype=np.int32, count=count)
    del refs, pars
    vocab: dict[str, int] = {}
    phrases = Ragged.build([[vocab.setdefault(w, len(vocab)) for w in p.split(" ") if w] for p in number])
    del number
    keys = _phrase_keys(phrases)
    order = np.argsort(keys, kind="stable").astype(np.int32)
    by_ref = np.argsort(ref_ix, kind="stable")
    para_offsets = np.searchsorted(ref_ix[by_ref], np.arange(len(keys) + 1)).astype(np.int64)
    return {**StringIndex.build(list(vocab)).arrays("vocab"), **phrases.arrays("phrase_words"),
            "phrase_keys": keys[order], "phrase_order": order,
            "para_offsets": para_offsets, "para_values": par_ix[by_ref],
            "max_len": np.asarray([int(np.diff(phrases.offsets).max(initial=0))])}


def _phrase_keys(phrases: Ragged) -> np.ndarray:
    lengths = np.diff(phrases.offsets)
    keys = np.zeros(len(lengths), dtype=np.uint64)
    mult = np.uint64(KEY_MULT)
    with np.errstate(over="ignore"):
        for t in range(int(lengths.max(initial=0))):
            rows = np.flatnonzero(lengths > t)
            ids = phrases.values[phrases.offsets[rows] + t].astype(np.uint64)
            keys[rows] = keys[rows] * mult + ids + np.uint64(1)
    return keys


# ---------------------------------------------------------------- loading
@dataclass(frozen=True)
class Resources:
    """The English function words, synonym tables and paraphrase table (memory-mapped arrays)."""

    function_words: frozenset[str]
    arrays: dict[str, np.ndarray]

    def index(self, prefix: str) -> StringIndex:
        return StringIndex.load(self.arrays, prefix)

    def ragged(self, prefix: str) -> Ragged:
        return Ragged.load(self.arrays, prefix)

    def release(self) -> None:
        """Give the pages read so far back to the OS (see ``release_pages``)."""
        release_pages(self.arrays)


@lru_cache(maxsize=1)
def resource_key() -> str:
    """Names the installed jar and table by their checksums (the cache folder's name)."""
    jar, table = meteor_files()
    return f"v{CACHE_VERSION}-{_known_digest(jar)[:12]}-{_known_digest(table)[:12]}"


def _known_digest(path: Path) -> str:
    """``_digest(path)``, remembered in the cache folder by the file's path, size and modification
    time, so a process does not read 68 MB to name a folder it has named before."""
    memo = default_cache_dir() / "meteor" / "digests.json"
    try:
        stat = path.stat()
    except OSError as e:
        raise MetricError(f"meteor: {_fix_hint(path)} ({e})") from None
    stamp = [stat.st_size, stat.st_mtime_ns]
    try:
        known = json.loads(memo.read_text())
        entry = known.get(str(path))
        if isinstance(entry, list) and entry[:2] == stamp and isinstance(entry[2], str):
            return entry[2]
    except (OSError, ValueError, AttributeError, IndexError):
        known = {}
    digest = _digest(path)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f"digests.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**(known if isinstance(known, dict) else {}), str(path): [*stamp, digest]}))
        os.replace(tmp, memo)
    except OSError:  # a read-only cache folder: compute it again next time
        pass
    return digest


def cache_root(cache_dir: str | None = None) -> Path:
    """The cache folder: ``cache_dir`` or every component's (:func:`capmetrics.cache.cache_root`)."""
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()


@lru_cache(maxsize=2)
def load_resources(cache_dir: str | None = None) -> Resources:
    """The resources of the installed jar and table (cached arrays built on first use)."""
    jar, table = meteor_files()
    key = resource_key()
    root = cache_root(cache_dir)
    meta = {"jar": str(jar), "table": str(table), "version": CACHE_VERSION}
    words = frozenset(_lines(_jar_text(jar, "function/english.words")))
    synonyms = cached_arrays(root / "meteor" / key / "synonyms", lambda: _build_synonyms(jar), meta)
    paraphrases = cached_arrays(root / "meteor" / key / "paraphrases", lambda: _build_paraphrases(table), meta)
    return Resources(words, {**synonyms, **paraphrases})
