"""A persistent, checksummed cache of each caption's SPICE parse (SQLite in the user cache folder).

Each row is keyed by the sha256 of the parser version and the exact caption text (as sent to the
parser) and holds, as JSON, the caption's tuples and the WordNet synsets of every word and phrase
in them (so a run over cached captions needs neither the parser nor Meteor's synonym tables),
plus the sha256 of those bytes. Rows are written in
one transaction per finished batch of parses, so a killed run leaves no half-written entry; a row
whose checksum does not match (a corrupt file) is treated as missing, deleted and parsed again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SCHEMA = "CREATE TABLE IF NOT EXISTS parses (key TEXT PRIMARY KEY, value BLOB NOT NULL, sha256 TEXT NOT NULL)"
Parse = list[list[str]]
#: A cached caption: ``{"tuples": Parse, "synsets": {lookup key: [synset, ...]}}``.
Entry = dict[str, Any]


def caption_key(version: str, text: str) -> str:
    """The cache key of one caption: its exact text and the parser version."""
    return hashlib.sha256(json.dumps([version, text], ensure_ascii=False).encode("utf-8")).hexdigest()


def _digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


def valid_parse(parse: object) -> bool:
    """Whether ``parse`` is a list of tuples of 1 to 3 strings."""
    return isinstance(parse, list) and all(
        isinstance(t, list) and 1 <= len(t) <= 3 and all(isinstance(w, str) for w in t) for t in parse)


def _valid(entry: object) -> bool:
    return (isinstance(entry, dict) and valid_parse(entry.get("tuples")) and isinstance(entry.get("synsets"), dict)
            and all(isinstance(v, list) and all(isinstance(n, int) for n in v) for v in entry["synsets"].values()))


class ParseCache:
    """Caption entries (tuples and synsets) per caption, stored in ``path`` (an SQLite file)."""

    def __init__(self, path: Path, version: str) -> None:
        self.path = path
        self.version = version

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(SCHEMA)
        return connection

    def get_many(self, texts: Iterable[str]) -> dict[str, Entry]:
        """The cached, intact entries among ``texts``; corrupt rows are deleted and left out."""
        by_key = {caption_key(self.version, t): t for t in dict.fromkeys(texts)}
        keys = list(by_key)
        found: dict[str, Entry] = {}
        corrupt: list[str] = []
        with self._connect() as connection:
            for start in range(0, len(keys), 900):
                chunk = keys[start:start + 900]
                rows = connection.execute(
                    f"SELECT key, value, sha256 FROM parses WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                for key, value, digest in rows:
                    entry = json.loads(value) if _digest(value) == digest else None
                    if _valid(entry):
                        found[by_key[key]] = entry
                    else:
                        corrupt.append(key)
            if corrupt:
                connection.executemany("DELETE FROM parses WHERE key = ?", [(k,) for k in corrupt])
        return found

    def put_many(self, entries: dict[str, Entry]) -> None:
        """Store ``entries`` (caption -> tuples and synsets) in one transaction."""
        rows = []
        for text, entry in entries.items():
            if not _valid(entry):
                raise ValueError(f"spice: the cache entry of {text!r} is not tuples of 1-3 words and synsets")
            value = json.dumps(entry, ensure_ascii=False).encode("utf-8")
            rows.append((caption_key(self.version, text), value, _digest(value)))
        with self._connect() as connection:
            connection.executemany("INSERT OR REPLACE INTO parses VALUES (?, ?, ?)", rows)
