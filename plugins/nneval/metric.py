"""The distance ``nneval``: a trained NNEval model as a metric (a shipped one by default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capmetrics import Distance, Scores
from capmetrics.plugins.nneval.learner import NNEval
from capmetrics.plugins.nneval.model_files import DEFAULT_MODEL, model_digest, resolve_model


class NNEvalMetric(Distance):
    """A trained NNEval model as a metric: P(human-written) of each candidate.

    Args:
        model: a shipped model (``flickr8k-paper``, the default: the paper's features;
            ``flickr8k-embeddings``: adds ROUGE-L, CIDEr, WEmbSim, MiniLM embedding cosine and
            BERTScore; ``flickr8k-paper-spice``: the paper's features with SPICE, which needs
            ``capmetrics setup spice``; ``flickr8k-embeddings-spice``: the embedding features,
            SPICE and MiniLM vectors, two networks fitted to Flickr8k-Expert and -CF ratings, the
            best on unseen Flickr8k images) or the folder of a model written by
            ``capmetrics nneval train`` (or ``NNEval.save``).
        files: files the model's features need that are not in its folder (e.g. the CLIP
            checkpoint of a ``clip-score`` feature), matched by file name and checksum.

    A model with features that need images (``clip-score``, ...) needs them here too
    (``needs_images``): each candidate is scored with its item's image.
    """

    name = "nneval"
    accepts_empty_candidates = (
        True  # P(human) of its features; the paper's and the embedding features all score empties
    )
    distance_offset = 1.0

    path_params = ("files",)

    def __init__(self, model: str = DEFAULT_MODEL, files: list[str] | None = None) -> None:
        self.model = model
        self.files = files

    @property  # type: ignore[misc]
    def needs_images(self) -> bool:  # type: ignore[override]
        """Whether a feature of the model needs images (then :meth:`score_images` scores)."""
        return self.learner().needs_images()

    @property  # type: ignore[misc]
    def languages(self) -> tuple[str, ...] | None:  # type: ignore[override]
        """The languages every feature metric of the model serves (None: any); loads the model.
        The shipped models' features tokenize with PTB and parse English: English only."""
        from capmetrics.components.language import LANGUAGES, refusing

        features = self.run_components()
        served = tuple(
            code for code in LANGUAGES if all(refusing(c, code) is None for c in features)
        )
        return None if len(served) == len(LANGUAGES) else served

    def run_components(self) -> list[Any]:
        """The model's feature metrics (loading it), for readiness checks: a feature whose extra is
        missing raises here as in a run."""
        return self.learner().run_components()

    def learner(self) -> NNEval:
        """The loaded model (loaded once)."""
        cached = self.__dict__.get("_learner")
        if cached is None:
            cached = self.__dict__["_learner"] = NNEval.load(
                resolve_model(self.model)[1], self.files
            )
        return cached

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        values = self.learner().predict(candidates, references)
        return Scores(values, float(values.mean()) if values.size else float("nan"))

    def score_images(
        self, candidates: Sequence[str], references: Sequence[Sequence[str]], images: Sequence[Any]
    ) -> Scores:
        values = self.learner().predict(candidates, references, images)
        return Scores(values, float(values.mean()) if values.size else float("nan"))

    def signature_extra(self) -> dict[str, str]:
        label, folder = resolve_model(self.model)
        return {"nneval_model": label, "model_sha256": model_digest(folder)}
