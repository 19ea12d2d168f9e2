"""METEOR 1.5's English resources, read from the installed jar and paraphrase table.

Nothing is copied into this repository: the function words, the WordNet synsets and their
morphological exceptions come from inside ``meteor-1.5.jar``, the paraphrase table from
``paraphrase-en.gz`` (both installed by pycocoevalcap). The first use turns them into compact
arrays under ``<cache>/meteor/<checksum of the two files>`` (once, announced on stderr, by a child
process that reads the 62 MB table streaming: about 300 MB at its peak); later processes
memory-map them, so a cold start reads only the pages a caption touches. A damaged cache folder
is moved aside with a one-line warning and rebuilt.

Paraphrase table layout: the table's phrases, deduplicated (``phrase_words``: vocabulary numbers
per phrase), their 64-bit keys sorted for lookup (``phrase_keys`` / ``phrase_order``), and for each
phrase the paraphrases listed for it as a reference phrase, in file order (``para``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from capmetrics.engine.notices import one_time_step
from capmetrics.errors import MetricError
from capmetrics.io.cache import cache_root as default_cache_dir
from capmetrics.plugins.meteor._child import run_child, stopped
from capmetrics.plugins.meteor._paraphrase_build import build_paraphrase_arrays
from capmetrics.plugins.meteor._tables import (
    CorruptFolder,
    Ragged,
    StringIndex,
    cached_arrays,
    check_folder,
    move_aside,
    read_manifest,
    release_pages,
)
from capmetrics.plugins.meteor.jar import meteor_files

CACHE_VERSION = 1
#: Multiplier of the rolling phrase key (any odd 64-bit number works; collisions are checked).
KEY_MULT = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1
#: Characters Python's str.split() treats as whitespace but Java's StringTokenizer does not.
_PY_ONLY_SPACE = re.compile(
    "[\x0b\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
)
_JAVA_SPACE = re.compile("[ \t\n\r\f]+")


def java_split(text: str) -> list[str]:
    """Split on the five characters java.util.StringTokenizer splits on (space, \\t, \\n, \\r,
    \\f)."""
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
    return (
        f"{path} is missing or unreadable; reinstall pycocoevalcap "
        "(pip install --force-reinstall 'capmetrics[coco]')"
    )


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
        raise MetricError(
            f"meteor: cannot read {member} from {jar}: {e}; reinstall pycocoevalcap "
            "(pip install --force-reinstall 'capmetrics[coco]')"
        ) from None


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
    return {
        **index.arrays("syn_words"),
        **Ragged.build(sets).arrays("syn_sets"),
        **StringIndex.build(forms).arrays("exc_forms"),
        **Ragged.build([bases[f] for f in forms]).arrays("exc_bases"),
    }


def _build_paraphrases(
    table: Path,
    advance: Callable[[int], None] = lambda n: None,
    between: Callable[[], None] = lambda: None,
) -> dict[str, np.ndarray]:
    """The paraphrase arrays, read from the table streaming (``_paraphrase_build``); ``advance``
    gets the compressed bytes read, for a progress bar; ``between`` is called between blocks."""
    normal = lambda p: " ".join(java_split(p))  # noqa: E731
    vocab, offsets, values, ref_ix, par_ix = build_paraphrase_arrays(
        table, _lines, normal, advance, between
    )
    between()
    phrases = Ragged(offsets, values)
    keys = _phrase_keys(phrases)
    order = np.argsort(keys, kind="stable").astype(np.int32)
    para_offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(np.bincount(ref_ix, minlength=len(keys)), out=para_offsets[1:])
    by_ref = np.argsort(ref_ix, kind="stable")
    del ref_ix
    para_values = par_ix[by_ref]
    del by_ref, par_ix
    return {
        **StringIndex.build(vocab).arrays("vocab"),
        **phrases.arrays("phrase_words"),
        "phrase_keys": keys[order],
        "phrase_order": order,
        "para_offsets": para_offsets,
        "para_values": para_values,
        "max_len": np.asarray([int(np.diff(phrases.offsets).max(initial=0))]),
    }


def _phrase_keys(phrases: Ragged, chunk: int = 1 << 18) -> np.ndarray:
    """:func:`phrase_key` of every phrase, vectorised a chunk of phrases at a time (bounded
    temporaries)."""
    keys = np.zeros(len(phrases.offsets) - 1, dtype=np.uint64)
    mult = np.uint64(KEY_MULT)
    with np.errstate(over="ignore"):
        for start in range(0, len(keys), chunk):
            offsets = phrases.offsets[start : start + chunk + 1]
            lengths, part = np.diff(offsets), keys[start : start + chunk]
            for t in range(int(lengths.max(initial=0))):
                rows = np.flatnonzero(lengths > t)
                ids = phrases.values[offsets[rows] + t].astype(np.uint64)
                part[rows] = part[rows] * mult + ids + np.uint64(1)
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
        known = read_manifest(memo)
        entry = known.get(str(path))  # type: ignore[attr-defined]
        if isinstance(entry, list) and entry[:2] == stamp and isinstance(entry[2], str):
            return entry[2]
    except (CorruptFolder, AttributeError, IndexError):
        known = {}
    digest = _digest(path)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f"digests.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({**(known if isinstance(known, dict) else {}), str(path): [*stamp, digest]})
        )
        os.replace(tmp, memo)
    except OSError:  # a read-only cache folder: compute it again next time
        pass
    return digest


def cache_root(cache_dir: str | None = None) -> Path:
    """The cache folder: ``cache_dir`` or every component's
    (:func:`capmetrics.io.cache.cache_root`)."""
    return Path(cache_dir).expanduser() if cache_dir else default_cache_dir()


def _index(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}_{part}" for part in ("keys", "order", "blob", "offsets"))


def _ragged(prefix: str) -> tuple[str, ...]:
    return (f"{prefix}_offsets", f"{prefix}_values")


#: The arrays of each cache part (a folder missing one, or listing another, is rebuilt).
PARTS = {
    "synonyms": (
        *_index("syn_words"),
        *_ragged("syn_sets"),
        *_index("exc_forms"),
        *_ragged("exc_bases"),
    ),
    "paraphrases": (
        *_index("vocab"),
        *_ragged("phrase_words"),
        "phrase_keys",
        "phrase_order",
        *_ragged("para"),
        "max_len",
    ),
}
TABLES_USUAL = "5-15 s"


def resource_folder(root: Path) -> Path:
    """The cache folder of the installed jar's and table's arrays under the cache root ``root``."""
    return root / "meteor" / resource_key()


def _cached_parts(root: Path) -> dict[str, dict[str, np.ndarray] | None]:
    """Each cache part's arrays, or None where absent or damaged (a damaged one is moved aside,
    with a warning)."""
    parts: dict[str, dict[str, np.ndarray] | None] = {}
    for part, names in PARTS.items():
        try:
            parts[part] = check_folder(resource_folder(root) / part, names)
        except FileNotFoundError:
            parts[part] = None
        except (OSError, CorruptFolder) as e:
            move_aside(resource_folder(root) / part, str(e))
            parts[part] = None
    return parts


def build_tables(
    root: Path, between: Callable[[], None] = lambda: None
) -> dict[str, dict[str, np.ndarray]]:
    """The cache parts, building the missing ones in this process with a one-line announcement
    (``one_time_step``); reading the paraphrase table streaming keeps this near 300 MB.
    ``between`` is called between blocks of the build (see ``_child.wait_beside_compile``)."""
    jar, table = meteor_files()
    meta = {"jar": str(jar), "table": str(table), "version": CACHE_VERSION}
    found = _cached_parts(root)
    if all(arrays is not None for arrays in found.values()):
        return found  # type: ignore[return-value]
    size = table.stat().st_size if found["paraphrases"] is None else 0
    folder = resource_folder(root)
    with one_time_step(
        "building METEOR's resource tables from pycocoevalcap's paraphrase table",
        TABLES_USUAL,
        total=size or None,
        unit="of the table",
    ) as advance:
        synonyms = found["synonyms"] or cached_arrays(
            folder / "synonyms", lambda: _build_synonyms(jar), meta, PARTS["synonyms"]
        )
        paraphrases = found["paraphrases"] or cached_arrays(
            folder / "paraphrases",
            lambda: _build_paraphrases(table, advance, between),
            meta,
            PARTS["paraphrases"],
        )
    return {"synonyms": synonyms, "paraphrases": paraphrases}


@lru_cache(maxsize=2)
def load_resources(cache_dir: str | None = None) -> Resources:
    """The resources of the installed jar and table. On first use (or when the cache is damaged)
    the arrays are built by a child process, so this one never holds the build's memory; where a
    child cannot run, here."""
    jar, _ = meteor_files()
    root = cache_root(cache_dir)
    parts = _cached_parts(root)
    if any(arrays is None for arrays in parts.values()):
        from capmetrics.plugins.meteor._compiled import start_compile

        start_compile(root)  # beside the tables, when the aligner is not compiled yet
        run_child("tables", root)
        if stopped():  # an interrupted preparation: not here either
            raise MetricError("METEOR's first-use build was stopped")
        parts = build_tables(root)  # reads what the child wrote; builds what it could not
    words = frozenset(_lines(_jar_text(jar, "function/english.words")))
    return Resources(words, {**parts["synonyms"], **parts["paraphrases"]})  # type: ignore[dict-item]
