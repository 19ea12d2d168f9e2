"""Compact, memory-mappable lookup tables for METEOR's resources, and their checked cache folder.

A :class:`StringIndex` finds strings by a 64-bit key (sorted array + binary search) and confirms
each hit against the stored UTF-8 bytes, so a key collision can never give a wrong answer. A
:class:`Ragged` is a list of integer lists in CSR form. A cache folder holds ``.npy`` arrays and a
``manifest.json`` with the CRC-32 of every array; a folder whose manifest or arrays do not check out
is moved aside (``<folder>.corrupt``, with a one-line warning) and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
from capmetrics.io.atomic import atomic_folder

MANIFEST = "manifest.json"


def text_key(text: str) -> int:
    """A stable 64-bit key of a string."""
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """:func:`text_key` of each text, as an array."""
    return np.fromiter((text_key(t) for t in texts), dtype=np.uint64, count=len(texts))


class Ragged:
    """Integer lists stored as ``values[offsets[i]:offsets[i + 1]]``."""

    def __init__(self, offsets: np.ndarray, values: np.ndarray) -> None:
        self.offsets, self.values = offsets, values

    @classmethod
    def build(cls, rows: Sequence[Sequence[int]]) -> Ragged:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter((v for r in rows for v in r), dtype=np.int32, count=int(offsets[-1]))
        return cls(offsets, values)

    def row(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}_offsets": self.offsets, f"{prefix}_values": self.values}

    @classmethod
    def load(cls, arrays: dict[str, np.ndarray], prefix: str) -> Ragged:
        return cls(arrays[f"{prefix}_offsets"], arrays[f"{prefix}_values"])


class StringIndex:
    """Strings numbered 0..n-1, found by :func:`text_key` and confirmed against their bytes."""

    def __init__(
        self, keys: np.ndarray, order: np.ndarray, blob: np.ndarray, offsets: np.ndarray
    ) -> None:
        self.keys, self.order, self.blob, self.offsets = keys, order, blob, offsets

    @classmethod
    def build(cls, strings: Sequence[str]) -> StringIndex:
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        keys = np.fromiter((text_key(s) for s in strings), dtype=np.uint64, count=len(strings))
        order = np.argsort(keys, kind="stable").astype(np.int32)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return cls(keys[order], order, blob, offsets)

    def find(self, text: str) -> int:
        """The number of ``text``, or -1."""
        key = np.uint64(text_key(text))
        return self._confirm(text, key, int(np.searchsorted(self.keys, key)))

    def _confirm(self, text: str, key: np.uint64, at: int) -> int:
        """The string equal to ``text`` among the entries with ``key`` from ``at``, or -1."""
        data = text.encode("utf-8", "surrogatepass")
        while at < len(self.keys) and self.keys[at] == key:
            i = int(self.order[at])
            if self.blob[self.offsets[i] : self.offsets[i + 1]].tobytes() == data:
                return i
            at += 1
        return -1

    def find_many(self, texts: Sequence[str], keys: np.ndarray | None = None) -> np.ndarray:
        """The numbers of ``texts`` (-1 where absent), with one binary search for all; ``keys``
        may give their ``text_keys`` already computed."""
        out = np.full(len(texts), -1, dtype=np.int64)
        if not len(texts) or not len(self.keys):
            return out
        keys = text_keys(texts) if keys is None else keys
        at = np.searchsorted(self.keys, keys)
        hits = np.flatnonzero(self.keys[np.minimum(at, len(self.keys) - 1)] == keys)
        for n in hits.tolist():
            out[n] = self._confirm(texts[n], keys[n], int(at[n]))
        return out

    def __len__(self) -> int:
        return len(self.order)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {
            f"{prefix}_keys": self.keys,
            f"{prefix}_order": self.order,
            f"{prefix}_blob": self.blob,
            f"{prefix}_offsets": self.offsets,
        }

    @classmethod
    def load(cls, arrays: dict[str, np.ndarray], prefix: str) -> StringIndex:
        return cls(
            arrays[f"{prefix}_keys"],
            arrays[f"{prefix}_order"],
            arrays[f"{prefix}_blob"],
            arrays[f"{prefix}_offsets"],
        )


def _crc(path: Path) -> int:
    crc = 0
    block = bytearray(1 << 22)
    view = memoryview(block)
    with path.open("rb", buffering=0) as f:
        while size := f.readinto(block):
            crc = zlib.crc32(view[:size], crc)
    return crc


def _random_access(array: np.ndarray) -> None:
    """Tell the kernel not to read ahead: lookups touch scattered pages (keeps RSS small)."""
    handle = getattr(array, "_mmap", None)
    if handle is not None and hasattr(handle, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        try:
            handle.madvise(mmap.MADV_RANDOM)
        except OSError:
            pass


def release_pages(arrays: dict[str, np.ndarray]) -> None:
    """Hand the pages of memory-mapped ``arrays`` back to the OS: they stay in the page cache and
    a later read maps them again, so the resident memory falls back after a burst of lookups."""
    for array in arrays.values():
        base = array
        while base is not None and getattr(base, "_mmap", None) is None:
            base = getattr(base, "base", None)
        handle = getattr(base, "_mmap", None)
        if handle is not None and hasattr(handle, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            try:
                handle.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass


def write_folder(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, object]) -> None:
    """Write ``arrays`` and a manifest of their checksums into ``folder`` (atomically, by rename;
    a corrupt folder of the same name is replaced)."""
    with atomic_folder(folder, replace=True) as tmp:
        crcs = {}
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
            crcs[name] = _crc(tmp / f"{name}.npy")
        (tmp / MANIFEST).write_text(json.dumps({**meta, "arrays": crcs}, indent=1))


class CorruptFolder(ValueError):
    """A cache folder that exists but cannot be used (the reason is the message)."""


#: A manifest is a few hundred bytes; anything over this is not one.
MAX_MANIFEST_BYTES = 1 << 20


def read_manifest(path: Path) -> object:
    """The parsed JSON of a cache manifest, read bounded (:mod:`capmetrics.io.strict_json`: a
    regular file of at most 1 MiB, nested at most 64 deep, no 5000-digit numbers); raises
    :class:`CorruptFolder` naming what is wrong, never a ``RecursionError``."""
    from capmetrics.errors import DataError
    from capmetrics.io.strict_json import MAX_DEPTH, read_json

    if not path.exists() and not path.is_symlink():
        raise CorruptFolder(f"no {path.name}")
    try:
        return read_json(path, "a cache manifest", MAX_MANIFEST_BYTES, MAX_DEPTH, allow_nan=False)
    except DataError as e:
        reason = e.problems[0].message if e.problems else str(e)
        raise CorruptFolder(f"{path.name} is not readable JSON ({reason})") from None


def _manifest_arrays(folder: Path, names: Iterable[str] | None) -> dict[str, int]:
    """The ``{array: CRC-32}`` of a folder's manifest, checked for shape (and for holding exactly
    ``names``); raises :class:`CorruptFolder` naming what is wrong."""
    manifest = read_manifest(folder / MANIFEST)
    arrays = manifest.get("arrays") if isinstance(manifest, dict) else None
    if (
        not isinstance(arrays, dict)
        or not arrays
        or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in arrays.items()
        )
    ):
        raise CorruptFolder(f"{MANIFEST} is not a manifest of arrays and checksums")
    if names is not None and set(arrays) != set(names):
        raise CorruptFolder(f"{MANIFEST} lists {sorted(arrays)}, expected {sorted(names)}")
    return arrays


def check_folder(folder: Path, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of a cache folder, memory-mapped; raises :class:`CorruptFolder` (why) when its
    manifest or an array does not check out, FileNotFoundError when there is no folder."""
    if not folder.is_dir():
        raise FileNotFoundError(folder)
    arrays = {}
    for name, crc in _manifest_arrays(folder, names).items():
        path = folder / f"{name}.npy"
        try:
            if _crc(path) != crc:
                raise CorruptFolder(f"{name}.npy does not match its checksum")
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CorruptFolder(f"{name}.npy cannot be read ({e})") from None
        _random_access(array)
        arrays[name] = array.view(np.ndarray)
    return arrays


def read_folder(folder: Path, names: Iterable[str] | None = None) -> dict[str, np.ndarray] | None:
    """The arrays of a cache folder (memory-mapped), or None if it is missing or corrupt."""
    try:
        return check_folder(folder, names)
    except (OSError, CorruptFolder):
        return None


def move_aside(folder: Path, reason: str) -> None:
    """Rename a damaged cache folder to ``<folder>.corrupt`` (replacing an older one) with a
    one-line warning on stderr, so that it is rebuilt; never raises."""
    aside = folder.with_name(folder.name + ".corrupt")
    try:
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(folder, aside)
        what = f"moved it to {aside.name} and rebuilding it"
    except OSError as e:
        what = f"cannot move it aside ({e}); rebuilding it"
    print(
        f"capmetrics: warning: meteor: the cache folder {folder} is damaged ({reason}); {what}",
        file=sys.stderr,
        flush=True,
    )


def cached_arrays(
    folder: Path,
    build: Callable[[], dict[str, np.ndarray]],
    meta: dict[str, object],
    names: Iterable[str] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays in ``folder``; built and written first if the folder is missing or damaged (a
    damaged one is moved aside with a warning first: a cache never blocks a run)."""
    try:
        return check_folder(folder, names)
    except FileNotFoundError:
        pass
    except (OSError, CorruptFolder) as e:
        move_aside(folder, str(e))
    built = build()
    try:
        write_folder(folder, built, meta)
    except OSError:  # a read-only cache folder: use the tables built in memory
        return built
    return read_folder(folder) or built
