"""The ``clip`` embedder: the text tower of a CLIP model (its projected text features, as
``CLIPModel.get_text_features``), run by the ``clip-model`` image–text model
(capmetrics.plugins.clip_score), the one CLIP loader: a Hugging Face ``CLIPModel`` or
``clip_text_model`` folder, an OpenAI ``.pt`` / PAC-S ``.pth`` file or an open_clip folder. Within
a run it shares the loaded checkpoint and the text features with ``clip-score`` and kin."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics import Embedder, MetricError
from capmetrics.plugins.embeddings.sentence import unique_texts
from capmetrics.runtime.device import device_signature, resolve_device

#: The files whose names and bytes identify a Hugging Face folder (the embedder's identity since
#: before it ran on ``clip-model``, whose own checksum also reads ``.txt`` files).
HF_IDENTITY_FILES = (".safetensors", ".bin", ".json")


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

    def clip_model(self) -> Any:
        """The ``clip-model`` image–text model that embeds the texts."""
        shared = getattr(self, "_clip_model", None)
        if shared is None:
            if self.model is None:
                raise MetricError(
                    "clip needs model=<CLIP model directory> (no CLIP weights are bundled)"
                )
            from capmetrics.plugins.clip_score.model import ClipModel

            shared = self._clip_model = ClipModel(
                str(self.model),
                device=self.device,
                batch_size=self.batch_size,
                trust_code=self.trust_code,
            )
        return shared

    def _hf_folder(self) -> bool:
        """Whether the model is a Hugging Face folder (not a file, not an open_clip folder)."""
        path = Path(str(self.model)).expanduser()
        return path.is_dir() and not (path / "open_clip_config.json").is_file()

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def identity(self) -> str:
        if self.model is not None and self._hf_folder():
            from capmetrics.plugins.clip_score.model import folder_checksum

            return folder_checksum(str(self.model), HF_IDENTITY_FILES)
        return str(self.clip_model().identity())

    def signature_extra(self) -> dict[str, str]:
        if not self._hf_folder():
            return {**self.clip_model().signature_extra(), "normalize": str(self.normalize)}
        return {
            "model": self.identity(),
            "normalize": str(self.normalize),
            **device_signature(resolve_device(self.device)),
        }

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Text features of ``texts``: each distinct text embedded once (once per run)."""
        model = self.clip_model()
        distinct, inverse = unique_texts(texts)
        cut = len(model.overlong(distinct))
        if cut:
            warnings.warn(
                f"clip: {cut} text(s) longer than {model.context_length()} tokens were truncated",
                stacklevel=2,
            )
        feats = np.asarray(model.embed_texts(distinct), dtype=np.float32)
        if self.normalize and len(feats):
            import torch

            rows = torch.from_numpy(feats)
            feats = (rows / rows.norm(dim=-1, keepdim=True)).numpy()
        return feats[inverse]
