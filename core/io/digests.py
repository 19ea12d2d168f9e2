"""SHA-256 of user files, remembered across runs by each file's ``stat``.

A model folder or a dictionary is identified by the SHA-256 of its bytes (signatures, cache
keys); hashing a 1.4 GB model folder on every run costs seconds. :func:`file_digest` and
:func:`files_digest` remember each digest in a small memo under the cache root
(``<cache root>/digests/sha256.json``), keyed by what ``stat`` says of each file: its real path,
device, inode, size, modification time and change time (``st_ctime``, which every write moves
and no user can set back), as git's index does. A hit reads no byte of the files.

* A file whose modification or change time is within :data:`RACY_NS` of the hash is not
  remembered (a write in the same clock tick could leave its ``stat`` unchanged), nor is one
  whose ``stat`` changed while it was read.
* The memo is data: read as strict JSON, size-checked; a memo that is not one (truncated,
  garbled) is dropped with a one-line warning and rebuilt. It is written under a temporary name
  and renamed into place (``capmetrics.io.atomic``): two processes writing at once never leave a
  torn file (the last writer's entries win; each writer merges the memo it finds first).
* Bounded: the :data:`MAX_ENTRIES` most recently used entries are kept.
* Off: ``CAPMETRICS_DIGEST_CACHE=0`` (or ``off``) hashes every time. A cache root that cannot be
  written (read-only) is read when it holds a memo and otherwise left alone: digests are then
  computed every time.

:func:`sha256_file` is plain hashing, for bytes a caller has just installed or must verify
against a pinned checksum.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from capmetrics.errors import CapmetricsError, MetricError
from capmetrics.io.atomic import atomic_write
from capmetrics.io.cache import component_cache, switched_on
from capmetrics.io.strict_json import file_kind, parse_json, read_bytes

__all__ = ["ENABLE_ENV", "file_digest", "files_digest", "memo_path", "sha256_file"]

#: ``0``, ``off``, ``false`` or ``no`` turns the memo off (every digest is computed).
ENABLE_ENV = "CAPMETRICS_DIGEST_CACHE"
#: The memo's ``format`` field (version 1).
FORMAT = "capmetrics-digests/1"
#: The memo keeps this many entries, the most recently used.
MAX_ENTRIES = 4096
#: A memo file larger than this is not one (4096 entries take about 450 KB).
MAX_MEMO_BYTES = 4 << 20
#: A file changed this recently (ns) before it is hashed is not remembered.
RACY_NS = 2_000_000_000
#: A hit on an entry last stamped longer ago than this (s) stamps it again (for the bound).
TOUCH_S = 86_400
_BLOCK = 1 << 20
_HEX = re.compile(r"[0-9a-f]{64}")
_lock = threading.Lock()
#: The memo as last read: ((inode, size, mtime, ctime) of the file, entries).
_loaded: tuple[tuple[int, ...] | None, dict[str, list]] = (None, {})
#: Memo files already warned about (by their stat), so a broken memo warns once.
_warned: set[tuple[int, ...]] = set()

Stamp = tuple[str, int, int, int, int, int]


def enabled() -> bool:
    """Whether the memo is on (``$CAPMETRICS_DIGEST_CACHE`` is not ``0``/``off``)."""
    return switched_on(ENABLE_ENV)


def memo_path() -> Path:
    """``<cache root>/digests/sha256.json``."""
    return component_cache("digests") / "sha256.json"


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 hex digest of the regular file ``path``, read now (nothing remembered)."""
    sha = hashlib.sha256()
    _hash_file(os.fspath(path), sha)
    return sha.hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 hex digest of the regular file ``path`` (a link to one is fine), from the
    memo when the file's ``stat`` is the one it was hashed with.

    Raises:
        MetricError: ``path`` is not a regular file (a FIFO would hang the read).
        OSError: it cannot be read.
    """
    return files_digest([path])


def files_digest(
    files: Sequence[str | os.PathLike[str]],
    root: str | os.PathLike[str] | None = None,
    name_end: bytes = b"",
) -> str:
    """The SHA-256 hex digest over ``files`` in the order given: for each, its path relative to
    ``root`` (POSIX, UTF-8, then ``name_end``) when ``root`` is given, then its bytes. From the
    memo when every file's ``stat`` is the one they were hashed with.

    Raises:
        MetricError: a file is not a regular file.
        OSError: a file cannot be read.
    """
    paths = [os.fspath(f) for f in files]
    names = [
        Path(os.path.relpath(p, root)).as_posix().encode() + name_end if root is not None else b""
        for p in paths
    ]
    if not enabled():
        return _compute(paths, names)
    started = time.time_ns()
    stamps = [_stamp(p) for p in paths]
    key = hashlib.sha256(
        json.dumps(
            [[n.decode("utf-8", "surrogateescape"), *s] for n, s in zip(names, stamps)]
        ).encode("utf-8", "surrogateescape")
    ).hexdigest()[:40]
    with _lock:
        entries = _read()
        hit = entries.get(key)
    if hit is not None:
        if time.time() - hit[1] > TOUCH_S:
            _store(key, hit[0])
        return hit[0]
    digest = _compute(paths, names)
    fresh = all(max(s[4], s[5]) < started - RACY_NS for s in stamps)
    if fresh and [_stamp(p) for p in paths] == stamps:
        _store(key, digest)
    return digest


def _stamp(path: str) -> Stamp:
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise MetricError(f"{path}: is {file_kind(info.st_mode)}, not a regular file to hash")
    return (
        os.path.realpath(path),
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def _compute(paths: list[str], names: list[bytes]) -> str:
    sha = hashlib.sha256()
    for path, name in zip(paths, names):
        sha.update(name)
        _hash_file(path, sha)
    return sha.hexdigest()


def _hash_file(path: str, sha: hashlib._Hash) -> None:
    """Feed the bytes of the regular file ``path`` to ``sha`` (opened without blocking, checked
    to be a regular file before a byte is read: a FIFO swapped in is refused, not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", closefd=True) as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise MetricError(f"{path}: is {file_kind(mode)}, not a regular file to hash")
        for block in iter(lambda: handle.read(_BLOCK), b""):
            sha.update(block)


def _memo_stat(path: Path) -> tuple[int, ...] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _read() -> dict[str, list]:
    """The memo's entries (key -> [digest, last used, s]); reread only when its file changed.
    A memo that is not a valid one is warned about once and treated as empty."""
    global _loaded
    path = memo_path()
    now = _memo_stat(path)
    if now is None:
        _loaded = (None, {})
        return {}
    if now == _loaded[0]:
        return _loaded[1]
    entries: dict[str, list] = {}
    try:
        if not stat.S_ISREG(now[0]):
            raise ValueError(f"it is {file_kind(now[0])}")
        value = parse_json(
            read_bytes(path, "digest memo", MAX_MEMO_BYTES), str(path), allow_nan=False
        )
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        raw = value.get("entries")
        if not isinstance(raw, dict):
            raise ValueError("no entries")
        for key, entry in raw.items():
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and isinstance(entry[0], str)
                and _HEX.fullmatch(entry[0])
                and isinstance(entry[1], int)
            ):
                raise ValueError(f"entry {key[:40]!r} is not [digest, time]")
            entries[key] = entry
    except (CapmetricsError, ValueError, OSError) as err:
        if now not in _warned:
            _warned.add(now)
            reason = str(err).splitlines()[-1].strip()
            print(
                f"capmetrics: warning: the digest memo {path} is damaged ({reason}); it is "
                "rebuilt (files are hashed again)",
                file=sys.stderr,
                flush=True,
            )
        entries = {}
    _loaded = (now, entries)
    return entries


def _store(key: str, digest: str) -> None:
    """Add (or stamp) one entry: merge into the memo as it is now, keep the most recently used
    :data:`MAX_ENTRIES`, write it atomically; skipped where the cache cannot be written."""
    global _loaded
    path = memo_path()
    with _lock:
        entries = dict(_read())
        found = _memo_stat(path)
        if found is not None and not stat.S_ISREG(found[0]):
            return  # a FIFO or a link there: never written into
        entries[key] = [digest, int(time.time())]
        if len(entries) > MAX_ENTRIES:
            kept = sorted(entries.items(), key=lambda item: item[1][1], reverse=True)
            entries = dict(kept[:MAX_ENTRIES])
        text = json.dumps({"format": FORMAT, "entries": entries}, separators=(",", ":"))
        with contextlib.suppress(OSError, CapmetricsError):
            with atomic_write(path) as out:
                out.write(text)
        _loaded = (None, {})  # read again: another process may have written after us
