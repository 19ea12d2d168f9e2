"""CLIP-S, RefCLIP-S (Hessel et al., 2021) and PAC-S, RefPAC-S (Sarto et al., 2023), as the
papers' own code computes them (jmhessel/clipscore ``clipscore.py``, aimagelab/pacscore
``evaluation/pac_score``):

- every text, candidate *and reference*, is prefixed with the prompt ``"A photo depicts "``;
- ``clip-score = w · max(cos(image, candidate), 0)`` on L2-normalised features;
- ``ref-clip-score`` is the harmonic mean ``2ab / (a + b)`` of that (w included) and
  ``b = max_r cos(candidate, reference_r)``; the code does not clamp ``b`` at 0 though the
  paper's formula does, and neither do we;
- PAC-S is the same with its fine-tuned checkpoint and ``w = 2.0``.

Per candidate values; the corpus value is their mean (what the scripts print).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from capmetrics import Distance, ImageTextModel, MetricError, Scores

from capmetrics.plugins.clip_score.model import ClipModel

TRUNCATION_RULE = "first context-1 tokens + end token (clip.tokenize truncate=True)"


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.sum(x * x, axis=1, keepdims=True))


class ClipScore(Distance):
    """CLIP-S: ``w · max(cos(image, "A photo depicts " + caption), 0)``, reference-free
    (Hessel et al., 2021; 0 to 2.5 with w = 2.5; torchmetrics' CLIPScore is 100 · cos without
    the prompt).

    Args:
        model: the image–text model: a checkpoint path (read by the ``clip-model`` model) or a spec
            such as ``clip-model("ViT-B-32.pt", precision=fp16)``; nothing is downloaded.
        w: the scale (2.5 as in the paper).
        prompt: put before every caption (a space is added if it does not end with one).
        truncate: ``true`` cuts captions longer than the text tower takes, as the papers' code
            does, with one warning that counts them; ``false`` refuses them.
    """

    name = "clip-score"
    requires = ("clip",)
    needs_images = True
    needs_references = False
    accepts_empty_candidates = True  # the prompt alone is a text CLIP embeds
    distance_offset = None
    example_specs = ('clip-score(model="ViT-B-32.pt")',)
    default_w: float = 2.5

    def __init__(self, model: ImageTextModel | str, w: float | None = None, prompt: str = "A photo depicts",
                 truncate: bool = True) -> None:
        self.model = model
        self.w = w
        self.prompt = prompt
        self.truncate = truncate

    @property
    def weight(self) -> float:
        return self.default_w if self.w is None else float(self.w)

    def backbone(self) -> ImageTextModel:
        """The image–text model (a path becomes the ``clip-model`` model)."""
        if isinstance(self.model, ImageTextModel):
            return self.model
        built = getattr(self, "_backbone", None)
        if built is None:
            if not isinstance(self.model, str) or not self.model:
                raise MetricError(f"{self.name} needs model=<path of a CLIP checkpoint> (nothing is downloaded)")
            built = self._backbone = ClipModel(self.model)
        return built

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_backbone"}

    def signature_extra(self) -> dict[str, str]:
        sig = {"prompt": self._prefix(), "w": repr(self.weight),
               "truncation": TRUNCATION_RULE if self.truncate else "refuse"}
        if not isinstance(self.model, ImageTextModel):
            sig.update(self.backbone().signature_extra())
        return sig

    def portable_spec(self) -> str:
        if isinstance(self.model, str):  # a path: only its checksum (in the signature) matters
            from capmetrics.registry.spec import format_component, format_value

            return format_component(self, portable=True).replace(f"model={format_value(self.model)}", "model=<local>")
        return super().portable_spec()

    def _prefix(self) -> str:
        return self.prompt if self.prompt.endswith(" ") else self.prompt + " "

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        raise MetricError(f"{self.name} compares captions with images: score it with capmetrics.score on a "
                          "dataset whose items have images")

    def text_features(self, texts: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """Unit features of the prompted texts and the distinct ones over the text tower's
        length (truncated; refused with ``truncate=false``)."""
        model = self.backbone()
        prefix = self._prefix()
        prompted = [prefix + t for t in texts]
        distinct = list(dict.fromkeys(prompted))
        long = [distinct[i][len(prefix):] for i in model.overlong(distinct)]
        if long and not self.truncate:
            shown = "; ".join(repr(t[:60] + "...") for t in long[:3])
            raise MetricError(f"{self.name}: {len(long)} caption(s) are longer than the text tower takes (with the "
                              f"prompt): {shown}; truncate=true cuts them as the reference code does")
        return _unit(model.embed_texts(prompted)), long

    def warn_truncated(self, long: Sequence[str]) -> None:
        """The one warning of a call that truncated captions."""
        if long:
            warnings.warn(f"{self.name}: {len(set(long))} distinct caption(s) longer than the text tower takes were "
                          "truncated as the reference code does (the first tokens and the end token); "
                          "truncate=false refuses them", UserWarning, stacklevel=4)

    def image_scores(self, candidates: Sequence[str], images: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The per-candidate CLIP-S (w included), the candidates' unit features, the truncated ones."""
        model = self.backbone()
        cand, long = self.text_features(candidates)
        img = _unit(model.embed_images(images))
        return self.weight * np.clip(np.sum(img * cand, axis=1), 0, None), cand, long

    def score_images(self, candidates: Sequence[str], references: Sequence[Sequence[str]],
                     images: Sequence[Any]) -> Scores:
        values, _, long = self.image_scores(candidates, images)
        self.warn_truncated(long)
        return Scores(values, float(np.mean(values)) if len(values) else float("nan"))


class RefClipScore(ClipScore):
    """RefCLIP-S: the harmonic mean of CLIP-S (w included) and the best cosine between the
    candidate and a reference, both prompted; that cosine is not clamped at 0 (as
    clipscore.py computes it, unlike the paper's formula).

    Args: as ``clip-score``.
    """

    name = "ref-clip-score"
    needs_references = True
    example_specs = ('ref-clip-score(model="ViT-B-32.pt")',)

    def score_images(self, candidates: Sequence[str], references: Sequence[Sequence[str]],
                     images: Sequence[Any]) -> Scores:
        clip_s, cand, long = self.image_scores(candidates, images)
        flat = [r for refs in references for r in refs]
        ref, long_refs = self.text_features(flat)
        self.warn_truncated([*long, *long_refs])
        best = np.empty(len(candidates))
        start = 0
        for i, refs in enumerate(references):
            if not refs:
                raise MetricError(f"{self.name}: candidate {i} has no references")
            best[i] = np.max(ref[start : start + len(refs)] @ cand[i])
            start += len(refs)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = 2 * clip_s * best / (clip_s + best)
        return Scores(values, float(np.mean(values)) if len(values) else float("nan"))


class PacScore(ClipScore):
    """PAC-S: CLIP-S on a PAC-S checkpoint (CLIP fine-tuned with positive-augmented contrastive
    learning, Sarto et al., 2023) with w = 2.0, as aimagelab/pacscore computes it; 0 to 2.

    Args: as ``clip-score``; ``model`` is the PAC-S checkpoint (``clip_ViT-B-32.pth``).
    """

    name = "pac-score"
    default_w = 2.0
    example_specs = ('pac-score(model="clip_ViT-B-32.pth")',)


class RefPacScore(RefClipScore):
    """RefPAC-S: the harmonic mean of PAC-S (w = 2.0 included) and the best candidate–reference
    cosine on the PAC-S checkpoint, as aimagelab/pacscore computes it.

    Args: as ``clip-score``; ``model`` is the PAC-S checkpoint.
    """

    name = "ref-pac-score"
    default_w = 2.0
    example_specs = ('ref-pac-score(model="clip_ViT-B-32.pth")',)
