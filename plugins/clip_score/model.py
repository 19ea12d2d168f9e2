"""The ``clip-model`` image–text model: CLIP weights from a local checkpoint (OpenAI ``.pt``, PAC-S
``.pth``, Hugging Face ``CLIPModel`` folder, open_clip), run by transformers' ``CLIPModel``. It is
the one CLIP loader: the ``clip`` text embedder runs on it too (a text-tower-only Hugging Face
folder included, whose images it refuses).

Images are decoded and preprocessed in a thread pool exactly as the checkpoint's own library
does (:mod:`._preprocess`); texts are tokenized with the checkpoint's tokenizer (CLIP's BPE for
OpenAI, PAC-S and open_clip, the folder's own for Hugging Face). Within a run
(:func:`capmetrics.score`), a checkpoint is loaded once and each distinct image and text is
embedded once, shared by every metric and embedder that uses the same model
(:mod:`capmetrics.engine.prepared`); nothing outlives the run but what its components hold.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics import ImageTextModel, MetricError
from capmetrics.data.images import ImageLimits, ImageProblems, image_key, image_limits, open_image
from capmetrics.engine.prepared import shared
from capmetrics.plugins.clip_score._checkpoints import (
    Loaded,
    file_checksum,
    load_checkpoint,
    no_vision_tower,
)
from capmetrics.runtime.device import device_signature, in_halving_batches, resolve_device

Precision = Literal["fp32", "fp16", "bf16"]
_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_lock = threading.Lock()  # one thread loads a checkpoint that others of the run wait for


def folder_checksum(folder: str | Path, suffixes: Sequence[str]) -> str:
    """``sha256:`` over the names (relative to ``folder``) and bytes of the folder's files whose
    suffix is one of ``suffixes``, in sorted order."""
    root = Path(folder).expanduser()
    files = sorted(f for f in root.rglob("*") if f.suffix in tuple(suffixes) and f.is_file())
    return file_checksum(files, root)


def _require(*modules: str) -> None:
    missing = []
    for module in modules or ("torch", "transformers"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise MetricError(
            f"{', '.join(missing)} not installed; install them with: pip install 'capmetrics[clip]'"
        )


class ClipModel(ImageTextModel):
    """CLIP from a local checkpoint: an OpenAI ``clip`` ``.pt`` (TorchScript or state dict), a
    PAC-S ``.pth``, a Hugging Face ``CLIPModel`` folder or an open_clip folder
    (``open_clip_config.json`` + weights); ViT image towers. Nothing is downloaded.

    A Hugging Face ``CLIPTextModelWithProjection`` folder (``clip_text_model``) gives text
    features only (what the ``clip`` embedder reads); its images are refused by name.

    Args:
        path: the checkpoint file or folder.
        activation: ``auto`` (QuickGELU for OpenAI/PAC-S files, the config's for open_clip
            folders), ``quick_gelu`` or ``gelu`` (a bare open_clip state dict of a non-OpenAI
            model needs ``gelu``).
        precision: ``fp32`` (the reference values on CPU), ``fp16`` or ``bf16``.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``; none = the run's (``--device``).
        batch_size: images or texts per forward pass (halved while the GPU is out of memory).
        workers: threads that decode and preprocess images (0: one per CPU, at most 8).
        trust_code: load a TorchScript archive (an OpenAI ``.pt`` as ``clip`` ships it), whose
            code runs while it loads; none = the run's (``--trust-code``), off by default: such
            a file is refused with how to convert it to a state dict. A model file cannot set it.
    """

    name = "clip-model"
    requires = ("clip",)
    path_params = ("path",)
    program_params = ("trust_code",)
    example_specs = ()

    def __init__(
        self,
        path: str,
        activation: Literal["auto", "quick_gelu", "gelu"] = "auto",
        precision: Precision = "fp32",
        device: str | None = None,
        batch_size: int = 64,
        workers: int = 0,
        trust_code: bool | None = None,
    ) -> None:
        self.path = path
        self.activation = activation
        self.precision = precision
        self.device = device
        self.batch_size = batch_size
        self.workers = workers
        self.trust_code = trust_code

    def __getstate__(self) -> dict[str, Any]:
        """Parameters only: a copy (another process) loads the checkpoint again when used."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    # ---------------------------------------------------------------- loading
    def _checkpoint(self) -> Loaded:
        loaded = getattr(self, "_state", None)
        if loaded is not None:
            return loaded  # type: ignore[no-any-return]
        _require("torch", "transformers")
        if self.precision not in _DTYPES:
            raise MetricError(f"precision must be fp32, fp16 or bf16, got {self.precision!r}")
        self._device = resolve_device(self.device)
        p = Path(self.path).expanduser()
        try:
            st = p.stat()
            stamp: tuple[Any, ...] = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = (str(p),)
        from capmetrics.io.trust import trust_code

        trusted = trust_code(self.trust_code)
        key = ("clip-checkpoint", *stamp, self.activation, self.precision, self._device, trusted)
        with _lock:  # loaded once per run (every call outside one), held by this instance
            loaded = shared(key, lambda: self._load(trusted))
        self._state = loaded
        return loaded

    def _load(self, trusted: bool) -> Loaded:
        import torch

        loaded = load_checkpoint(self.path, self.activation, trusted)
        if loaded.tokenizer is None:
            _bpe()  # the vocabulary is read with the model, not by the first caption
        loaded.model = loaded.model.to(
            device=self._device, dtype=getattr(torch, _DTYPES[self.precision])
        )
        return loaded

    def identity(self) -> str:
        """The checkpoint's checksum (files' bytes; the same files anywhere give the same one)."""
        return self._checkpoint().checksum

    def signature_extra(self) -> dict[str, str]:
        loaded = self._checkpoint()
        tokenizer = (
            "hf-folder"
            if loaded.tokenizer is not None
            else ("clip-bpe+ftfy" if _bpe().fixes_text else "clip-bpe")
        )
        return {
            "model": loaded.checksum,
            "format": loaded.format,
            "precision": self.precision,
            "preprocess": loaded.preprocess.describe() if loaded.preprocess else "none",
            "tokenizer": tokenizer,
            "context": str(loaded.context),
            **device_signature(self._device),
        }

    def _run_key(self) -> Hashable:
        loaded = self._checkpoint()
        return (loaded.checksum, self.activation, self.precision, self._device)

    # ---------------------------------------------------------------- texts
    def _tokens(self, texts: Sequence[str]) -> dict[str, Any]:
        """Model inputs for ``texts``, padded to the longest of them only: the causal mask keeps
        every position from seeing later ones, so the end token's features do not depend on
        the padding after it (the reference pads to the full context)."""
        import torch

        loaded = self._checkpoint()
        if loaded.tokenizer is None:
            ids, _ = _bpe().tokenize(texts, loaded.context)
            width = int((ids != 0).sum(axis=1).max()) if len(ids) else 1
            return {"input_ids": torch.from_numpy(np.ascontiguousarray(ids[:, :width]))}
        enc = loaded.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=loaded.context,
            return_tensors="pt",
        )
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def overlong(self, texts: Sequence[str]) -> list[int]:
        context = self.context_length()
        return [i for i, n in enumerate(self.token_counts(texts)) if n > context]

    def context_length(self) -> int:
        """The tokens the text tower takes, start and end tokens included: the rows of the
        checkpoint's text position table (77 for CLIP, 248 for Long-CLIP)."""
        return int(self._checkpoint().context)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in the checkpoint's own tokens, start and end tokens included,
        before any truncation."""
        loaded = self._checkpoint()
        if loaded.tokenizer is None:
            return _bpe().lengths(texts)
        full = loaded.tokenizer(list(texts), padding=False, truncation=False)["input_ids"]
        return [len(ids) for ids in full]

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self._cached("text", list(texts), list(texts), self._encode_texts)

    def _encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        return in_halving_batches(self._text_batch, texts, self.batch_size, "clip")

    def _text_batch(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        import torch

        loaded = self._checkpoint()
        out = np.zeros((len(texts), loaded.dim), np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths share a batch
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                inputs = self._tokens([texts[k] for k in rows])
                feats = loaded.text_features({k: v.to(self._device) for k, v in inputs.items()})
                out[rows] = feats.float().cpu().numpy()
        return out

    # ---------------------------------------------------------------- images
    def embed_images(self, images: Sequence[Any]) -> np.ndarray:
        if not self._checkpoint().vision:
            raise MetricError(no_vision_tower(self.path))
        _require("PIL")
        return self._cached(
            "image", [image_key(im) for im in images], list(images), self._encode_images
        )

    def _encode_images(self, images: Sequence[Any]) -> np.ndarray:
        return in_halving_batches(self._image_batch, images, self.batch_size, "clip")

    def _image_batch(self, images: Sequence[Any], batch_size: int) -> np.ndarray:
        import torch

        loaded = self._checkpoint()
        problems = ImageProblems()
        limits = image_limits()  # the caller's: the pool's threads do not see its context
        dim = loaded.model.config.projection_dim
        out = np.zeros((len(images), dim), np.float32)
        workers = self.workers or min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool, torch.inference_mode():
            for start in range(0, len(images), batch_size):
                chunk = images[start : start + batch_size]
                pixels = list(pool.map(lambda im: _prepare(im, loaded, problems, limits), chunk))
                good = [k for k, x in enumerate(pixels) if x is not None]
                if not good:
                    continue
                batch = torch.stack([pixels[k] for k in good]).to(
                    self._device, dtype=loaded.model.dtype
                )
                feats = _features(loaded.model.get_image_features(pixel_values=batch))
                out[[start + k for k in good]] = feats.float().cpu().numpy()
        problems.raise_if_any()
        return out

    # ---------------------------------------------------------------- run cache
    def _cached(
        self,
        what: str,
        keys: list[Hashable],
        values: list[Any],
        compute: Callable[[Sequence[Any]], np.ndarray],
    ) -> np.ndarray:
        """Vectors of ``values``, each distinct key computed once per run (and per call outside a
        run)."""
        table: dict[Hashable, np.ndarray] = shared(("clip-embeddings", what, self._run_key()), dict)
        todo: dict[Hashable, Any] = {}
        for key, value in zip(keys, values):
            if key not in table and key not in todo:
                todo[key] = value
        if todo:
            vectors = compute(list(todo.values()))
            table.update(zip(todo, vectors))
        dim = self._checkpoint().dim
        if not keys:
            return np.zeros((0, dim), np.float32)
        return np.stack([table[k] for k in keys])


def _features(out: Any) -> Any:
    """The projected features from ``get_image_features`` (a tensor, or an output object in
    newer transformers)."""
    return out if hasattr(out, "float") else out.pooler_output


def _prepare(
    image: Any, loaded: Loaded, problems: ImageProblems, limits: ImageLimits | None = None
) -> Any:
    with problems.collect(image):
        return loaded.preprocess(open_image(image, limits))
    return None


_bpe_lock = threading.Lock()


def _bpe() -> Any:
    """The process's CLIP BPE tokenizer (vocabulary read once)."""
    global _BPE
    with _bpe_lock:
        if _BPE is None:
            _require("regex")
            from capmetrics.plugins.clip_score._bpe import ClipBPE

            _BPE = ClipBPE()
        return _BPE


_BPE: Any = None
