"""A persistent, checksummed cache of the jar's per-item SPICE scores (SQLite in the user cache).

Each row is keyed by the sha256 of the parser version, the tokenized candidate and its tokenized
references, and holds the jar's ``scores`` object as JSON plus the sha256 of that JSON. Rows are
written in one transaction after the jar finished, so a killed run leaves no half-written entry;
a row whose checksum does not match (a corrupt file) is treated as missing, deleted and scored
again. The jar's own parse cache (``-cache``) sits next to it, so a new item whose captions were
seen before is not parsed again either.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

SCHEMA = "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL, sha256 TEXT NOT NULL)"


def item_key(version: str, test: str, refs: Sequence[str]) -> str:
    """The cache key of one item: exact texts (as sent to the jar) and the parser version."""
    return hashlib.sha256(json.dumps([version, test, list(refs)], ensure_ascii=False).encode("utf-8")).hexdigest()


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


class ScoreCache:
    """Per-item jar results stored in ``path`` (an SQLite file)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(SCHEMA)
        return connection

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The cached, intact entries among ``keys``; corrupt rows are deleted and left out."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        corrupt: list[str] = []
        with self._connect() as connection:
            for start in range(0, len(wanted), 900):
                chunk = wanted[start:start + 900]
                rows = connection.execute(
                    f"SELECT key, value, sha256 FROM scores WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                for key, value, digest in rows:
                    if _digest(value) != digest:
                        corrupt.append(key)
                        continue
                    try:
                        found[key] = json.loads(value)
                    except ValueError:
                        corrupt.append(key)
            if corrupt:
                connection.executemany("DELETE FROM scores WHERE key = ?", [(k,) for k in corrupt])
        return found

    def put_many(self, entries: dict[str, dict[str, Any]]) -> None:
        """Store ``entries`` (key -> the jar's scores object) in one transaction."""
        rows = []
        for key, scores in entries.items():
            value = json.dumps(scores, sort_keys=True)
            rows.append((key, value, _digest(value)))
        with self._connect() as connection:
            connection.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?)", rows)
