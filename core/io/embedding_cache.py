"""A disk cache of per-text embeddings, shared by every embedding metric and every run.

An encoder that is batch invariant (a text's vectors do not depend on the other texts of its
batch; see ``capmetrics.plugins.bertscore._encoder``) can keep what it computed: the next run
embeds only the texts it has not seen, and every value is bit for bit what it would compute.
:class:`EmbeddingStore` keeps the arrays of each text (token embeddings, token ids, a sentence
vector: any tuple of numpy arrays of fixed dtypes) under one **namespace**, a mapping that
names what decides the numbers (model checksum, layer, device kind, library versions); a
different namespace is a different folder, so nothing computed one way is read another.

Layout: ``<cache root>/embeddings/<kind>-<digest of the namespace>/seg-*.emb``. Each segment
file is written once, under a temporary name, and renamed into place (``capmetrics.io.atomic``),
so two runs writing at once never see each other's half-written files; it holds a checksummed
JSON index (the blake2b digest of each text, the offset and shapes of its arrays, a CRC-32 of
their bytes) followed by the arrays, and is read memory-mapped: a run reads only the entries it
needs. The caption text itself is not stored.

* **Bounded**: all namespaces together hold at most :func:`max_bytes` (default 2 GiB,
  ``$CAPMETRICS_EMBEDDING_CACHE_SIZE``, e.g. ``500M`` or ``8G``); after a write, the least
  recently used segments (a segment is used when a run reads an entry of it) are deleted until
  the folder fits.
* **Healed**: a segment that is truncated, garbled or not a segment of this namespace is
  deleted with a one-line warning, and its texts are embedded again.
* **Off**: ``CAPMETRICS_EMBEDDING_CACHE=0`` (or ``off``) turns reading and writing off; the
  values are the same either way. A folder that cannot be written (read-only, full disk) is
  skipped with one warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import mmap
import os
import re
import sys
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.errors import CapmetricsError, SpecError
from capmetrics.io.atomic import atomic_write, remove_stale_temporaries
from capmetrics.io.cache import component_cache, switched_on

#: ``0``, ``off``, ``false`` or ``no`` turns the cache off.
ENABLE_ENV = "CAPMETRICS_EMBEDDING_CACHE"
#: The size bound of the whole embedding cache: bytes, or a number with K, M, G or T (powers of
#: 1024).
SIZE_ENV = "CAPMETRICS_EMBEDDING_CACHE_SIZE"
#: The bound when ``$CAPMETRICS_EMBEDDING_CACHE_SIZE`` is not set.
DEFAULT_MAX_BYTES = 2 << 30
#: A run's new entries are written in segments of about this many bytes (the unit of eviction).
SEGMENT_BYTES = 64 << 20
#: The first bytes of a segment file (format version 1).
MAGIC = b"CMEMBED1"
#: Where the data of a segment starts: magic, header length (u64), header sha256.
_PREFIX = len(MAGIC) + 8 + 32
_ALIGN = 64
_SUFFIX = ".emb"
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def enabled() -> bool:
    """Whether the embedding cache is on (``$CAPMETRICS_EMBEDDING_CACHE`` is not ``0``/``off``)."""
    return switched_on(ENABLE_ENV)


def max_bytes() -> int:
    """The size bound of the embedding cache (``$CAPMETRICS_EMBEDDING_CACHE_SIZE``).

    Raises:
        SpecError: the variable is not a size such as ``2000000``, ``500M`` or ``8G``.
    """
    value = os.environ.get(SIZE_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_BYTES
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?", value.upper())
    if match is None:
        raise SpecError(
            f"{SIZE_ENV}={value!r} is not a size; give bytes or a number with K, M, G or T "
            "(e.g. 500M, 8G)"
        )
    return int(float(match[1]) * _UNITS[match[2]])


def cache_folder() -> Path:
    """The folder of the embedding cache under the cache root (``capmetrics.io.cache``)."""
    return component_cache("embeddings")


def text_key(text: str) -> str:
    """The key of one text in a namespace: a 128-bit blake2b digest of its exact characters."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class _Corrupt(Exception):
    """A segment file that is not a whole, valid segment of this namespace."""


class EmbeddingStore:
    """The cached arrays of texts under one namespace.

    Args:
        namespace: what decides the values (``{"kind": ..., "model": ..., ...}``; strings); its
            ``kind`` names the folder.
        dtypes: the dtype of each array of an entry, in order (e.g. ``("<f4", "<i8")``).
        folder: the embedding cache folder (default :func:`cache_folder`).
        limit: the size bound in bytes (default :func:`max_bytes`, read at each write).
    """

    def __init__(
        self,
        namespace: Mapping[str, str],
        dtypes: Sequence[str],
        folder: str | Path | None = None,
        limit: int | None = None,
    ) -> None:
        self.namespace = {str(k): str(v) for k, v in sorted(namespace.items())}
        self.dtypes = tuple(np.dtype(d).str for d in dtypes)
        self._itemsizes = tuple(np.dtype(d).itemsize for d in self.dtypes)
        self.root = Path(folder) if folder is not None else cache_folder()
        digest = hashlib.sha256(json.dumps([self.namespace, self.dtypes]).encode()).hexdigest()[:24]
        kind = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.namespace.get("kind", "embeddings"))[:40]
        self.folder = self.root / f"{kind}-{digest}"
        self.limit = limit
        self.usable = True
        #: Segment headers already read, by (name, inode, size): a segment never changes.
        self._headers: dict[tuple[str, int, int], dict[str, tuple[int, list[list[int]], int]]] = {}

    # -- reading -------------------------------------------------------------------------------
    def get(self, texts: Iterable[str]) -> dict[str, tuple[np.ndarray, ...]]:
        """The cached, intact arrays of those ``texts`` that have an entry (copies, owned)."""
        wanted = {text_key(t): t for t in dict.fromkeys(texts)}
        found: dict[str, tuple[np.ndarray, ...]] = {}
        if not wanted or not self.usable or not self.folder.is_dir():
            return found
        for path in self._segments():
            if len(found) == len(wanted):
                break
            try:
                used = self._read(path, wanted, found)
            except _Corrupt as err:
                self._drop(path, str(err))
                continue
            except FileNotFoundError:  # evicted by another run meanwhile
                continue
            except OSError as err:
                self._unusable(f"cannot be read ({err})")
                break
            if used:
                with contextlib.suppress(OSError):
                    os.utime(path)  # least recently used: the eviction order
        return found

    def _segments(self) -> list[Path]:
        """The folder's segment files, most recently used first."""
        entries = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.folder):
                if entry.name.startswith("seg-") and entry.name.endswith(_SUFFIX):
                    with contextlib.suppress(OSError):
                        entries.append((entry.stat().st_mtime_ns, entry.name))
        return [self.folder / name for _, name in sorted(entries, reverse=True)]

    def _read(
        self, path: Path, wanted: dict[str, str], found: dict[str, tuple[np.ndarray, ...]]
    ) -> bool:
        """Copy the entries of ``path`` that are wanted and not yet found; whether any was."""
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < _PREFIX:
                raise _Corrupt(f"{size} bytes, shorter than a segment's header")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                index = self._index(path, view, size, os.fstat(handle.fileno()).st_ino)
                hits = [
                    (key, index[key]) for key in wanted if key in index and wanted[key] not in found
                ]
                bad = 0
                for key, (offset, shapes, crc) in hits:
                    arrays = self._arrays(view, offset, shapes, crc)
                    if arrays is None:
                        bad += 1
                    else:
                        found[wanted[key]] = arrays
                if bad:
                    raise _Corrupt(f"{bad} entr{'y' if bad == 1 else 'ies'} fail their checksum")
        return bool(hits)

    def _index(
        self, path: Path, view: mmap.mmap, size: int, inode: int
    ) -> dict[str, tuple[int, list[list[int]], int]]:
        cache_key = (path.name, inode, size)
        if cache_key in self._headers:
            return self._headers[cache_key]
        if view[: len(MAGIC)] != MAGIC:
            raise _Corrupt("not an embedding cache segment")
        length = int.from_bytes(view[len(MAGIC) : len(MAGIC) + 8], "little")
        if length > size - _PREFIX:
            raise _Corrupt(f"{size} bytes, shorter than its header says: truncated")
        header = view[_PREFIX : _PREFIX + length]
        if hashlib.sha256(header).digest() != view[len(MAGIC) + 8 : _PREFIX]:
            raise _Corrupt("its header fails its checksum")
        try:
            meta = json.loads(header)
            if meta["namespace"] != self.namespace or tuple(meta["dtypes"]) != self.dtypes:
                raise _Corrupt("a segment of another namespace")
            start = _aligned(_PREFIX + length)
            index = {
                str(k): (start + int(o), [[int(n) for n in s] for s in shapes], int(c))
                for k, o, shapes, c in meta["entries"]
            }
        except (ValueError, KeyError, TypeError) as err:
            raise _Corrupt(f"its header is not a segment index ({type(err).__name__})") from None
        for offset, shapes, _ in index.values():
            if (
                len(shapes) != len(self.dtypes)
                or offset < _PREFIX + length
                or offset + self._nbytes(shapes) > size
                or any(n < 0 for s in shapes for n in s)
            ):
                raise _Corrupt(f"{size} bytes, shorter than its index says: truncated")
        self._headers[cache_key] = index
        return index

    def _nbytes(self, shapes: list[list[int]]) -> int:
        # math.prod of Python ints: numpy's reduction costs ~15 us a call, 3 calls an entry
        return sum(math.prod(s) * i for s, i in zip(shapes, self._itemsizes))

    def _arrays(
        self, view: mmap.mmap, offset: int, shapes: list[list[int]], crc: int
    ) -> tuple[np.ndarray, ...] | None:
        """The arrays of one entry (copied out of the map), or None when its bytes are damaged."""
        block = memoryview(view)[offset : offset + self._nbytes(shapes)]
        try:
            if zlib.crc32(block) != crc:
                return None
            arrays, start = [], 0
            for shape, dtype, itemsize in zip(shapes, self.dtypes, self._itemsizes):
                count = math.prod(shape)
                arrays.append(
                    np.frombuffer(block, dtype=dtype, count=count, offset=start)
                    .reshape(shape)
                    .copy()
                )
                start += count * itemsize
            return tuple(arrays)
        finally:
            block.release()

    # -- writing -------------------------------------------------------------------------------
    def put(self, entries: Mapping[str, Sequence[np.ndarray]]) -> None:
        """Store the arrays of each text (in segments of about :data:`SEGMENT_BYTES`), then evict
        the least recently used segments until the cache fits its bound."""
        if not entries or not self.usable:
            return
        limit = self.limit if self.limit is not None else max_bytes()
        rows = [
            (text_key(t), [np.ascontiguousarray(a, dtype=d) for a, d in zip(arrays, self.dtypes)])
            for t, arrays in entries.items()
        ]
        for arrays in (a for _, a in rows):
            if len(arrays) != len(self.dtypes):
                raise ValueError(
                    f"an entry has {len(arrays)} arrays; this store keeps {len(self.dtypes)}"
                )
        written = 0
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            for segment in self._chunks(rows):
                size = (
                    _PREFIX
                    + sum(a.nbytes for _, arrays in segment for a in arrays)
                    + _ALIGN * (len(segment) + 1)
                )
                if written + size > limit:
                    break  # what is left would not fit the bound anyway
                written += self._write(segment)
            evict(self.root, limit)
        except (
            CapmetricsError
        ) as err:  # OutputError of atomic_write: a read-only folder, a full disk
            self._unusable(f"cannot be written ({err})")
        except OSError as err:
            self._unusable(f"cannot be written ({err})")

    @staticmethod
    def _chunks(
        rows: list[tuple[str, list[np.ndarray]]],
    ) -> Iterator[list[tuple[str, list[np.ndarray]]]]:
        chunk: list[tuple[str, list[np.ndarray]]] = []
        size = 0
        for row in rows:
            chunk.append(row)
            size += sum(a.nbytes for a in row[1])
            if size >= SEGMENT_BYTES:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk

    def _write(self, rows: list[tuple[str, list[np.ndarray]]]) -> int:
        """Write one segment (atomically: a temporary file renamed into place); its size."""
        entries: list[list[Any]] = []
        offset = 0
        for key, arrays in rows:
            entries.append([key, offset, [list(a.shape) for a in arrays], _crc(arrays)])
            offset += _aligned(sum(a.nbytes for a in arrays))
        meta = {"namespace": self.namespace, "dtypes": list(self.dtypes), "entries": entries}
        header = json.dumps(meta, separators=(",", ":")).encode()
        start = _aligned(_PREFIX + len(header))
        name = f"seg-{time.time_ns():x}-{os.getpid()}-{os.urandom(4).hex()}{_SUFFIX}"
        with atomic_write(self.folder / name, "wb") as out:
            out.write(
                MAGIC + len(header).to_bytes(8, "little") + hashlib.sha256(header).digest() + header
            )
            for (_, arrays), (_, rel, _, _) in zip(rows, entries):
                out.write(b"\0" * (start + rel - out.tell()))
                for a in arrays:
                    out.write(a.data.cast("B"))
            out.write(b"\0" * (start + offset - out.tell()))
        return start + offset

    # -- healing -------------------------------------------------------------------------------
    def _drop(self, path: Path, reason: str) -> None:
        """Delete a damaged segment (unless another run already replaced or removed it)."""
        with contextlib.suppress(OSError):
            path.unlink()
        self._headers = {k: v for k, v in self._headers.items() if k[0] != path.name}
        _warn(
            f"the embedding cache segment {path} is damaged ({reason}); deleted it (its texts are "
            "embedded again)"
        )

    def _unusable(self, reason: str) -> None:
        if self.usable:
            _warn(f"the embedding cache {self.folder} {reason}; this run goes on without it")
        self.usable = False


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _crc(arrays: Sequence[np.ndarray]) -> int:
    crc = 0
    for a in arrays:
        crc = zlib.crc32(a.data.cast("B"), crc)
    return crc


def _warn(message: str) -> None:
    """One line on stderr: ``capmetrics: warning: <message>``."""
    print(f"capmetrics: warning: {message}", file=sys.stderr, flush=True)


def usage(root: str | Path | None = None) -> list[tuple[Path, int, int]]:
    """Every segment under the embedding cache folder: (path, size, last use in ns)."""
    root = Path(root) if root is not None else cache_folder()
    found = []
    with contextlib.suppress(OSError):
        for folder in os.scandir(root):
            if not folder.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                for entry in os.scandir(folder.path):
                    if entry.name.startswith("seg-") and entry.name.endswith(_SUFFIX):
                        with contextlib.suppress(OSError):
                            st = entry.stat(follow_symlinks=False)
                            found.append((Path(entry.path), st.st_size, st.st_mtime_ns))
    return found


def evict(root: str | Path | None = None, limit: int | None = None) -> list[Path]:
    """Delete the least recently used segments until the cache folder holds at most ``limit``
    bytes (default :func:`max_bytes`); return what was deleted. One process evicts at a time
    (an advisory lock); a segment another run is reading stays readable to it (POSIX)."""
    root = Path(root) if root is not None else cache_folder()
    limit = max_bytes() if limit is None else limit
    removed: list[Path] = []
    with _locked(root / ".evict.lock"):
        segments = sorted(usage(root), key=lambda s: s[2])
        total = sum(size for _, size, _ in segments)
        for path, size, _ in segments:
            if total <= limit:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
            total -= size
        for folder in {p.parent for p, _, _ in segments}:
            remove_stale_temporaries(folder)
    return removed


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[Any]:
    """An exclusive advisory lock on ``path`` for the block (none where flock is unavailable)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        import fcntl
    except ImportError:  # not POSIX: unlink races are harmless, the bound is approximate
        yield None
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
