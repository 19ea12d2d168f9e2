"""Image-grounded caption metrics and the models they run on.

- image–text model ``clip-model``: CLIP from a local OpenAI ``.pt``, PAC-S ``.pth``, Hugging Face
  ``CLIPModel`` folder or open_clip checkpoint (:mod:`.model`);
- image–text metrics ``clip-score``, ``ref-clip-score``, ``pac-score``, ``ref-pac-score`` as the
  papers' code computes them (:mod:`.metrics`; docs/metrics/clip-score.md).

Needs ``pip install 'capmetrics[clip]'`` (torch, transformers, Pillow; ftfy for the exact text
cleaning of the reference code). CLIP's BPE vocabulary (OpenAI, MIT licence) ships with the
plugin; no weights do.
"""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl
from capmetrics.plugins.clip_score.metrics import ClipScore, PacScore, RefClipScore, RefPacScore
from capmetrics.plugins.clip_score.model import ClipModel

__all__ = ["ClipModel", "ClipScore", "PacScore", "RefClipScore", "RefPacScore"]


@hookimpl
def register_image_text_models(register: Callable[..., None]) -> None:
    register(ClipModel)


@hookimpl
def register_image_text_metrics(register: Callable[..., None]) -> None:
    for cls in (ClipScore, RefClipScore, PacScore, RefPacScore):
        register(cls)
