"""The ``clip`` embedder: the text tower of a CLIP model (its projected text features, as
``CLIPModel.get_text_features``), loaded through transformers from a local directory, or from
an OpenAI ``.pt`` / PAC-S ``.pth`` file or an open_clip folder through the ``clip-model``
image–text model (capmetrics.plugins.clip_score), whose loaded checkpoints and per-run text
features it then shares with ``clip-score`` and kin."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from capmetrics import Embedder, MetricError
from capmetrics.plugins.embeddings.sentence import _model_identity, unique_texts
from capmetrics.plugins.embeddings.vectors import require
from capmetrics.runtime.device import device_signature, in_halving_batches, resolve_device

TEXT_TOWERS = ("clip", "clip_text_model")


class ClipTextEmbedder(Embedder):
    """Projected CLIP text features of each text (images are not needed).

    Args:
        model: a CLIP model directory (a full CLIP checkpoint or its text model) with its
            tokenizer, an OpenAI ``clip`` ``.pt`` / PAC-S ``.pth`` file or an open_clip folder;
            nothing is downloaded.
        batch_size: texts per forward pass (halved while the GPU is out of memory).
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``; none = the run's (``--device``).
        normalize: return unit-length vectors.
        trust_code: load a TorchScript ``.pt`` (its code runs while it loads); none = the run's
            (``--trust-code``), off by default (see ``clip-model``).
    """

    name = "clip"
    requires = ("torch",)
    program_params = ("trust_code",)

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 64,
        device: str | None = None,
        normalize: bool = False,
        trust_code: bool | None = None,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.trust_code = trust_code

    def _load(self):  # type: ignore[no-untyped-def]
        if getattr(self, "_tower", None) is not None:
            return self._tokenizer, self._tower
        if self.model is None:
            raise MetricError(
                "clip needs model=<CLIP model directory> (no CLIP weights are bundled)"
            )
        require("transformers", "torch")
        from transformers import AutoConfig, AutoTokenizer, CLIPTextModelWithProjection

        path = str(Path(self.model).expanduser())
        try:
            config = AutoConfig.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as err:
            raise MetricError(
                f"model={self.model!r} is not a model directory ({str(err).splitlines()[0]})"
            ) from None
        if config.model_type not in TEXT_TOWERS:
            raise MetricError(
                f"model={self.model!r} is a {config.model_type!r} model, not a CLIP model with a "
                "text tower (expected model_type clip or clip_text_model)"
            )
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError, TypeError) as err:
            raise MetricError(
                f"model={self.model!r} has no usable tokenizer ({str(err).splitlines()[0]})"
            ) from None
        text_config = config
        if (
            config.model_type == "clip"
        ):  # a full checkpoint: its text config, with its projection size
            text_config = config.text_config
            text_config.projection_dim = config.projection_dim
        from transformers.utils import logging as hf_logging

        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the vision weights of a full checkpoint are expected to go unused
        try:
            tower, info = CLIPTextModelWithProjection.from_pretrained(
                path, config=text_config, local_files_only=True, output_loading_info=True
            )
        except (
            pickle.UnpicklingError
        ) as err:  # transformers reads .bin weights with weights_only=True
            from capmetrics.plugins.clip_score._checkpoints import weights_only_refusal

            raise MetricError(weights_only_refusal(str(self.model), err)) from None
        finally:
            hf_logging.set_verbosity(level)
        absent = list(info.get("missing_keys", [])) + [
            str(k) for k in info.get("mismatched_keys", [])
        ]
        if absent:
            raise MetricError(
                f"model={self.model!r}: the text tower's weights are incomplete "
                f"({len(absent)} missing or mismatched, e.g. {absent[0]})"
            )
        self._device = resolve_device(self.device)
        self._tower = tower.eval().to(self._device)
        return self._tokenizer, self._tower

    def _shared(self):  # type: ignore[no-untyped-def]
        """The ``clip-model`` image–text model for checkpoints transformers cannot read as a
        folder (OpenAI/PAC-S files, open_clip folders); None for Hugging Face folders."""
        if self.model is None:
            return None
        path = Path(self.model).expanduser()
        if not (path.is_file() or (path / "open_clip_config.json").is_file()):
            return None
        shared = getattr(self, "_clip_model", None)
        if shared is None:
            from capmetrics.plugins.clip_score.model import ClipModel

            shared = self._clip_model = ClipModel(
                str(self.model),
                device=self.device,
                batch_size=self.batch_size,
                trust_code=self.trust_code,
            )
        return shared

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def identity(self) -> str:
        shared = self._shared()
        if shared is not None:
            return shared.identity()
        return _model_identity(self.model, str(Path(str(self.model)).expanduser()), None)

    def signature_extra(self) -> dict[str, str]:
        shared = self._shared()
        if shared is not None:
            return {**shared.signature_extra(), "normalize": str(self.normalize)}
        device = getattr(self, "_device", None) or resolve_device(self.device)
        return {
            "model": self.identity(),
            "normalize": str(self.normalize),
            **device_signature(device),
        }

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Text features of ``texts`` (no de-duplication)."""
        return in_halving_batches(self._encode, texts, self.batch_size, "clip")

    def _encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        import torch

        tokenizer, tower = self._load()
        limit = int(tower.config.max_position_embeddings)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), int(tower.config.projection_dim)), np.float32)
        cut = 0
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                rows = order[start : start + batch_size]
                batch = [texts[k] for k in rows]
                full = tokenizer(batch, padding=True, return_tensors="pt")
                cut += int((full["attention_mask"].sum(dim=1) > limit).sum())
                inputs = tokenizer(
                    batch, padding=True, truncation=True, max_length=limit, return_tensors="pt"
                )
                feats = tower(**{k: v.to(self._device) for k, v in inputs.items()}).text_embeds
                if self.normalize:
                    feats = feats / feats.norm(dim=-1, keepdim=True)
                out[rows] = feats.float().cpu().numpy()
        if cut:
            warnings.warn(
                f"clip: {cut} text(s) longer than {limit} tokens were truncated", stacklevel=2
            )
        return out

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        shared = self._shared()
        if shared is not None:
            distinct, inverse = unique_texts(texts)
            cut = len(shared.overlong(distinct))
            if cut:
                warnings.warn(
                    f"clip: {cut} text(s) longer than the text tower takes were truncated",
                    stacklevel=2,
                )
            feats = np.asarray(shared.embed_texts(distinct), dtype=np.float32)
            if self.normalize and len(feats):
                feats = feats / np.linalg.norm(feats, axis=1, keepdims=True)
            return feats[inverse]
        distinct, inverse = unique_texts(texts)
        return self.encode(distinct)[inverse]
