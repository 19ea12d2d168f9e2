"""A persistent, checksummed cache of each caption's SPICE parse (SQLite in the user cache folder).

Each row is keyed by the sha256 of the parser version and the exact caption text (as sent to the
parser) and holds, as JSON, the caption's tuples and the WordNet synsets of every word and phrase
in them (so a run over cached captions needs neither the parser nor Meteor's synonym tables),
plus the sha256 of those bytes. Rows are written in
one transaction per finished batch of parses, so a killed run leaves no half-written entry; a row
whose checksum does not match (a corrupt file) is treated as missing, deleted and parsed again.

The cache heals and never blocks a run: a file that is not this cache (not SQLite, another
program's database, a truncated or otherwise malformed one) is moved aside as
``parses.sqlite.corrupt-<time>`` with a one-line warning and a new cache is started; a cache that
cannot be used for another reason (locked past the timeout, a read-only folder, a full disk) is
skipped with a one-line warning and the run parses without it. The file is created owner-only
(0600): it holds caption text.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from capmetrics.plugins.spice._resources import private_folder, warn

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS parses "
    "(key TEXT PRIMARY KEY, value BLOB NOT NULL, sha256 TEXT NOT NULL)"
)
#: ``PRAGMA application_id`` of a capmetrics SPICE parse cache ("cmSP").
APPLICATION_ID = 0x636D5350
#: SQLite's error names for a file that is damaged or not a database.
CORRUPT_ERRORS = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
Parse = list[list[str]]
#: A cached caption: ``{"tuples": Parse, "synsets": {lookup key: [synset, ...]}}``.
Entry = dict[str, Any]
T = TypeVar("T")


class ForeignCache(Exception):
    """The file is an SQLite database, but not a SPICE parse cache."""


def caption_key(version: str, text: str) -> str:
    """The cache key of one caption: its exact text and the parser version."""
    return hashlib.sha256(
        json.dumps([version, text], ensure_ascii=False).encode("utf-8")
    ).hexdigest()


def _digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


def valid_parse(parse: object) -> bool:
    """Whether ``parse`` is a list of tuples of 1 to 3 strings."""
    return isinstance(parse, list) and all(
        isinstance(t, list) and 1 <= len(t) <= 3 and all(isinstance(w, str) for w in t)
        for t in parse
    )


def _valid(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and valid_parse(entry.get("tuples"))
        and isinstance(entry.get("synsets"), dict)
        and all(
            isinstance(v, list) and all(isinstance(n, int) for n in v)
            for v in entry["synsets"].values()
        )
    )


def _is_corrupt(error: sqlite3.DatabaseError) -> bool:
    name = getattr(error, "sqlite_errorname", "")
    text = str(error)
    return name in CORRUPT_ERRORS or "malformed" in text or "not a database" in text


def truncation(path: Path) -> str | None:
    """Why the SQLite file at ``path`` is shorter than its header says (a cut copy), or None.

    Reads only the 100-byte header: page size (offset 16) times the in-header page count (offset
    28, valid when the change counter at 24 equals the version-valid-for number at 92). A file with
    a journal beside it (a commit that a killed process left for SQLite to roll back) is left to
    SQLite."""
    journal = path.with_name(path.name + "-journal")
    if journal.exists() and journal.stat().st_size > 0:
        return None
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
        size = path.stat().st_size
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return None  # empty (new) or not SQLite at all: SQLite itself says so
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[24:28] != header[92:96] or pages == 0:
        return None
    if size < page_size * pages:
        return f"{size} bytes where its header says {page_size * pages}: truncated"
    return None


class ParseCache:
    """Caption entries (tuples and synsets) per caption, stored in ``path`` (an SQLite file)."""

    def __init__(self, path: Path, version: str) -> None:
        self.path = path
        self.version = version
        self.usable = True

    def _create_private(self) -> None:
        """Create the file 0600 before SQLite opens it (SQLite's journal copies its mode)."""
        private_folder(self.path.parent)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        if self.path.stat().st_mode & 0o077:
            self.path.chmod(0o600)

    def _connect(self) -> sqlite3.Connection:
        self._create_private()
        cut = truncation(self.path)
        if cut is not None:
            raise sqlite3.DatabaseError(f"database disk image is malformed ({cut})")
        connection = sqlite3.connect(self.path, timeout=60)
        try:
            (app,) = connection.execute("PRAGMA application_id").fetchone()
            if app != APPLICATION_ID:
                tables = connection.execute("SELECT name, sql FROM sqlite_master").fetchall()
                ours = [
                    ("parses", SCHEMA.replace(" IF NOT EXISTS", "")),
                    ("sqlite_autoindex_parses_1", None),
                ]
                if app != 0 or (tables and sorted(tables) != ours):
                    raise ForeignCache(
                        f"application id {app:#x}, tables {sorted(t for t, _ in tables)}"
                    )
                with connection:  # new, or made before the id was set
                    connection.execute(SCHEMA)
                    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        except BaseException:
            connection.close()
            raise
        return connection

    def _move_aside(self, reason: str, inode: int | None) -> None:
        """Rename the damaged file (and its journal) out of the way, unless another run already
        did."""
        try:
            if inode is not None and self.path.stat().st_ino != inode:
                return  # another process has already replaced it
            aside = self.path.with_name(
                f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
            )
            os.replace(self.path, aside)
            journal = self.path.with_name(self.path.name + "-journal")
            if journal.exists():
                os.replace(journal, aside.with_name(aside.name + "-journal"))
        except OSError as err:
            warn(
                f"spice: the parse cache {self.path} is damaged ({reason}) and cannot be moved "
                f"aside ({err}); this run parses without it"
            )
            self.usable = False
            return
        warn(
            f"spice: the parse cache {self.path} is damaged or not a parse cache ({reason}); moved "
            f"it to {aside.name} and started a new one (its captions are parsed again)"
        )

    def _run(self, operation: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``operation`` on an open connection, healing a damaged file once; ``default`` when
        the cache cannot be used (the run goes on without it)."""
        for attempt in range(2):
            if not self.usable:
                return default
            try:
                inode = self.path.stat().st_ino if self.path.exists() else None
            except OSError:
                inode = None
            try:
                connection = self._connect()
                try:
                    with connection:
                        return operation(connection)
                finally:
                    connection.close()
            except ForeignCache as err:
                reason = f"another program's database: {err}"
            except sqlite3.DatabaseError as err:
                if not _is_corrupt(err):
                    warn(
                        f"spice: the parse cache {self.path} cannot be used ({err}); this run "
                        "parses without it"
                    )
                    self.usable = False
                    return default
                reason = str(err)
            except OSError as err:
                warn(
                    f"spice: the parse cache {self.path} cannot be used ({err}); this run parses "
                    "without it"
                )
                self.usable = False
                return default
            if attempt == 1:
                break
            self._move_aside(reason, inode)
        warn(
            f"spice: the parse cache {self.path} is still unusable after starting a new one; "
            "this run parses without it"
        )
        self.usable = False
        return default

    def get_many(self, texts: Iterable[str]) -> dict[str, Entry]:
        """The cached, intact entries among ``texts``; corrupt rows are deleted and left out."""
        by_key = {caption_key(self.version, t): t for t in dict.fromkeys(texts)}
        keys = list(by_key)

        def lookup(connection: sqlite3.Connection) -> dict[str, Entry]:
            found: dict[str, Entry] = {}
            corrupt: list[str] = []
            for start in range(0, len(keys), 900):
                chunk = keys[start : start + 900]
                rows = connection.execute(
                    "SELECT key, value, sha256 FROM parses WHERE key IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                )
                for key, value, digest in rows:
                    entry = _loads(value) if _digest(value) == digest else None
                    if _valid(entry):
                        found[by_key[key]] = entry
                    else:
                        corrupt.append(key)
            if corrupt:
                connection.executemany("DELETE FROM parses WHERE key = ?", [(k,) for k in corrupt])
            return found

        return self._run(lookup, {})

    def put_many(self, entries: dict[str, Entry]) -> None:
        """Store ``entries`` (caption -> tuples and synsets) in one transaction."""
        rows = []
        for text, entry in entries.items():
            if not _valid(entry):
                raise ValueError(
                    f"spice: the cache entry of {text!r} is not tuples of 1-3 words and synsets"
                )
            value = json.dumps(entry, ensure_ascii=False).encode("utf-8")
            rows.append((caption_key(self.version, text), value, _digest(value)))
        self._run(
            lambda connection: connection.executemany(
                "INSERT OR REPLACE INTO parses VALUES (?, ?, ?)", rows
            ),
            None,
        )


def _loads(value: bytes) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return None
