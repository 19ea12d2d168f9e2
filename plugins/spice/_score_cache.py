"""A persistent, checksummed cache of the jar's per-item SPICE scores (SQLite in the user cache).

Each row is keyed by the sha256 of the parser version, the tokenized candidate and its tokenized
references, and holds the item's numbers (a float64 vector: every category's P/R/F and tuple
counts) plus the sha256 of those bytes. Rows are
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

import numpy as np

SCHEMA = "CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, value BLOB NOT NULL, sha256 TEXT NOT NULL)"


def item_key(version: str, test: str, refs: Sequence[str]) -> str:
    """The cache key of one item: exact texts (as sent to the jar) and the parser version."""
    return hashlib.sha256(json.dumps([version, test, list(refs)], ensure_ascii=False).encode("utf-8")).hexdigest()


def _digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


class ScoreCache:
    """Per-item result vectors of ``width`` float64 numbers, stored in ``path`` (an SQLite file)."""

    def __init__(self, path: Path, width: int) -> None:
        self.path = path
        self.width = width

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(SCHEMA)
        return connection

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached, intact entries among ``keys``; corrupt rows are deleted and left out."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        corrupt: list[str] = []
        with self._connect() as connection:
            for start in range(0, len(wanted), 900):
                chunk = wanted[start:start + 900]
                rows = connection.execute(
                    f"SELECT key, value, sha256 FROM items WHERE key IN ({','.join('?' * len(chunk))})", chunk)
                for key, value, digest in rows:
                    if len(value) != 8 * self.width or _digest(value) != digest:
                        corrupt.append(key)
                    else:
                        found[key] = np.frombuffer(value, dtype="<f8")
            if corrupt:
                connection.executemany("DELETE FROM items WHERE key = ?", [(k,) for k in corrupt])
        return found

    def put_many(self, entries: dict[str, np.ndarray]) -> None:
        """Store ``entries`` (key -> vector of ``width`` numbers) in one transaction."""
        rows = []
        for key, vector in entries.items():
            value = np.ascontiguousarray(vector, dtype="<f8").tobytes()
            if len(value) != 8 * self.width:
                raise ValueError(f"cache row {key}: {len(value) // 8} numbers, not {self.width}")
            rows.append((key, value, _digest(value)))
        with self._connect() as connection:
            connection.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?)", rows)
