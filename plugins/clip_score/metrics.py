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

Captions longer than the text tower takes (77 tokens for CLIP, 248 for Long-CLIP: the rows of the
checkpoint's position table) are cut as the reference code cuts them, with one warning that counts
the captions and the tokens cut, or refused (``truncate=false``). ``long=chunk`` (opt-in, not the
papers' number) embeds a caption sentence by sentence instead (:meth:`ClipScore.chunks`).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

import numpy as np
from capmetrics import ImageTextMetric, ImageTextModel, MetricError, Scores
from capmetrics.plugins.clip_score.model import ClipModel

TRUNCATION_RULE = "first context-1 tokens + end token (clip.tokenize truncate=True)"
CHUNK_RULE = (
    "chunk: sentences (split after . ! ? and white space, or after 。！？), a sentence over "
    "the context packed word by word into pieces that fit; the prompt before each piece; "
    "mean of the pieces' unit features, re-normalised"
)
LongMode = Literal["truncate", "chunk"]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+|(?<=[。！？])")


def sentences(text: str) -> list[str]:
    """``text``'s sentences: split after ``.``, ``!`` or ``?`` (a closing quote or bracket may
    follow) and white space, or after ``。``, ``！``, ``？``; stripped, empty ones dropped."""
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s]


@dataclass
class Cut:
    """What truncation cut: every distinct prompted text embedded with its token count (prompt,
    start and end tokens included; None where the model does not count tokens), and those over
    the context."""

    texts: dict[str, int | None] = field(default_factory=dict)
    over: set[str] = field(default_factory=set)
    context: int | None = None  # None: the model does not count tokens
    unit: str = "captions"

    @property
    def lengths(self) -> list[int]:
        """The token counts of the texts over the context."""
        return [n for t, n in self.texts.items() if t in self.over and n is not None]

    def __add__(self, other: Cut) -> Cut:
        """Both calls' cuts (candidates, then references); a text in both counts once."""
        context = self.context if self.context is not None else other.context
        unit = self.unit if self.unit == other.unit else "texts"
        return Cut({**self.texts, **other.texts}, self.over | other.over, context, unit)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt(np.sum(x * x, axis=1, keepdims=True))


class ClipScore(ImageTextMetric):
    """CLIP-S: ``w · max(cos(image, "A photo depicts " + caption), 0)``, reference-free
    (Hessel et al., 2021; 0 to 2.5 with w = 2.5; torchmetrics' CLIPScore is 100 · cos without
    the prompt).

    Args:
        model: the image–text model: a checkpoint path (read by the ``clip-model`` model) or a spec
            such as ``clip-model("ViT-B-32.pt", precision=fp16)``; nothing is downloaded.
        w: the scale (2.5 as in the paper).
        prompt: put before every caption (a space is added if it does not end with one).
        truncate: ``true`` cuts captions longer than the text tower takes (77 tokens for CLIP, the
            checkpoint's context, e.g. 248 for Long-CLIP), as the papers' code does, with one
            warning that counts the captions and the tokens cut; ``false`` refuses them (with
            ``long=chunk``: a single word longer than a piece).
        long: ``truncate`` (the papers' way; the default) or ``chunk``: each caption is split into
            sentences (a sentence over the context into word pieces that fit), each piece is
            embedded with the prompt, and the caption's feature is the mean of the pieces' unit
            features, re-normalised; the score is then computed as usual. Not the papers' number.
    """

    name = "clip-score"
    requires = ("clip",)
    needs_references = False
    accepts_empty_candidates = True  # the prompt alone is a text CLIP embeds
    example_specs = ('clip-score(model="ViT-B-32.pt")',)
    default_w: float = 2.5

    def __init__(
        self,
        model: ImageTextModel | str,
        w: float | None = None,
        prompt: str = "A photo depicts",
        truncate: bool = True,
        long: LongMode = "truncate",
    ) -> None:
        if long not in ("truncate", "chunk"):
            raise MetricError(f"{self.name}: long must be truncate or chunk, got {long!r}")
        self.model = model
        self.w = w
        self.prompt = prompt
        self.truncate = truncate
        self.long = long

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
                raise MetricError(
                    f"{self.name} needs model=<path of a CLIP checkpoint> (nothing is downloaded)"
                )
            built = self._backbone = ClipModel(self.model)
        return built

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_backbone"}

    def signature_extra(self) -> dict[str, str]:
        sig = {
            "prompt": self._prefix(),
            "w": repr(self.weight),
            "truncation": TRUNCATION_RULE if self.truncate else "refuse",
            "long": CHUNK_RULE if self.long == "chunk" else "truncate",
        }
        if not isinstance(self.model, ImageTextModel):
            sig.update(self.backbone().signature_extra())
        return sig

    def portable_spec(self) -> str:
        if isinstance(self.model, str):  # a path: only its checksum (in the signature) matters
            from capmetrics.registry.spec import format_component, format_value

            return format_component(self, portable=True).replace(
                f"model={format_value(self.model)}", "model=<local>"
            )
        return super().portable_spec()

    def _prefix(self) -> str:
        return self.prompt if self.prompt.endswith(" ") else self.prompt + " "

    def text_features(self, texts: Sequence[str]) -> tuple[np.ndarray, Cut]:
        """Unit features of the prompted texts and what truncation cut: texts over the text
        tower's context are cut (refused with ``truncate=false``). With ``long=chunk`` a text's
        feature is the re-normalised mean of its pieces' unit features (:meth:`chunks`)."""
        model = self.backbone()
        if self.long == "chunk":
            pieces = [self.chunks(t) for t in texts]
            flat = [piece for ps in pieces for piece in ps]
            cut = self._cut(flat, "caption pieces")
            if cut.over and not self.truncate:  # a single word longer than a piece
                shown = "; ".join(repr(t[:60] + "...") for t in sorted(cut.over)[:3])
                raise MetricError(
                    f"{self.name}: {len(cut.over)} piece(s) of a sentence are longer than the "
                    f"text tower takes though split at words (with the prompt): {shown}; "
                    "truncate=true cuts them"
                )
            unit = _unit(model.embed_texts(flat))
            starts = np.cumsum([0, *(len(ps) for ps in pieces)])
            means = [unit[a:b].mean(axis=0) for a, b in pairwise(starts)]
            feats = _unit(np.stack(means)) if means else unit[:0]
            return feats, cut
        prefix = self._prefix()
        prompted = [prefix + t for t in texts]
        cut = self._cut(prompted, "captions")
        if cut.over and not self.truncate:
            long = list(dict.fromkeys(t for t, full in zip(texts, prompted) if full in cut.over))
            shown = "; ".join(repr(t[:60] + "...") for t in long[:3])
            size = f"the {cut.context} tokens" if cut.context else "what"
            most = f"; up to {max(cut.lengths)} tokens" if cut.context else ""
            raise MetricError(
                f"{self.name}: {len(long)} caption(s) are longer than {size} the text tower "
                f"takes (with the prompt{most}): {shown}; truncate=true cuts them as the "
                "reference code does, long=chunk embeds them sentence by sentence"
            )
        return _unit(model.embed_texts(prompted)), cut

    def _counts(self, prompted: Sequence[str]) -> list[int] | None:
        """Token counts (start and end tokens included) where the model gives them."""
        counts = getattr(self.backbone(), "token_counts", None)
        return [int(n) for n in counts(prompted)] if callable(counts) else None

    def _context(self) -> int | None:
        context = getattr(self.backbone(), "context_length", None)
        return int(context()) if callable(context) else None

    def _cut(self, prompted: Sequence[str], unit: str) -> Cut:
        """Which of ``prompted`` are over the context, with their token counts where the model
        counts tokens (else from its ``overlong``)."""
        distinct = list(dict.fromkeys(prompted))
        context, counts = self._context(), self._counts(distinct)
        if context is None or counts is None:
            long = {distinct[i] for i in self.backbone().overlong(distinct)}
            return Cut(dict.fromkeys(distinct), long, None, unit)
        over = {t for t, n in zip(distinct, counts) if n > context}
        return Cut(dict(zip(distinct, counts)), over, context, unit)

    def chunks(self, text: str) -> list[str]:
        """The prompted pieces ``long=chunk`` embeds for ``text``: one per sentence
        (:func:`sentences`); a sentence over the context (prompt, start and end tokens included)
        is packed word by word into pieces that fit (a single word over it is cut as usual). A
        text without a sentence gives the prompt alone, as CLIP-S embeds an empty caption."""
        prefix = self._prefix()
        context = self._context()
        out: list[str] = []
        for sentence in sentences(text) or [""]:
            if context is None or self._fits([prefix + sentence], context):
                out.append(prefix + sentence)
                continue
            words: list[str] = []
            for word in sentence.split():
                if words and not self._fits([prefix + " ".join([*words, word])], context):
                    out.append(prefix + " ".join(words))
                    words = []
                words.append(word)
            out.append(prefix + " ".join(words))
        return out

    def _fits(self, prompted: list[str], context: int) -> bool:
        counts = self._counts(prompted)
        return counts is None or counts[0] <= context

    def warn_truncated(self, cut: Cut) -> None:
        """The one warning of a call that cut texts: how many of how many, and how many tokens."""
        if not cut.over:
            return
        if cut.context is None:
            what = (
                f"{len(cut.over)} of {len(cut.texts)} distinct {cut.unit} longer than the text "
                "tower takes (with the prompt) were cut"
            )
        else:
            dropped = sum(n - cut.context for n in cut.lengths)
            what = (
                f"{len(cut.over)} of {len(cut.texts)} distinct {cut.unit} longer than "
                f"{cut.context} tokens were cut (up to {max(cut.lengths)} tokens; {dropped} tokens "
                "dropped in all; prompt, start and end tokens counted)"
            )
        how = (
            "; truncate=false refuses them, long=chunk embeds them sentence by sentence"
            if self.long == "truncate"
            else " (a single word longer than a piece)"
        )
        warnings.warn(
            f"{self.name}: {what}, as the reference code cuts them (the first tokens and the end "
            f"token){how}",
            UserWarning,
            stacklevel=4,
        )

    def image_scores(
        self, candidates: Sequence[str], images: Sequence[Any]
    ) -> tuple[np.ndarray, np.ndarray, Cut]:
        """The per-candidate CLIP-S (w included), the candidates' unit features, what was cut."""
        img = _unit(self.backbone().embed_images(images))  # first: a text tower alone is refused
        cand, cut = self.text_features(candidates)
        return self.weight * np.clip(np.sum(img * cand, axis=1), 0, None), cand, cut

    def score_images(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Sequence[Any]
    ) -> Scores:
        values, _, cut = self.image_scores(candidates, images)
        self.warn_truncated(cut)
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

    def score_images(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Sequence[Any]
    ) -> Scores:
        clip_s, cand, cut = self.image_scores(candidates, images)
        flat = [r for refs in references for r in refs]
        ref, cut_refs = self.text_features(flat)
        self.warn_truncated(cut + cut_refs)
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
