"""The distance ``nneval``: a trained NNEval model as a metric (a shipped one by default)."""

from __future__ import annotations

from collections.abc import Sequence

from capmetrics import Distance, Scores
from capmetrics.plugins.nneval.learner import NNEval
from capmetrics.plugins.nneval.model_files import DEFAULT_MODEL, model_digest, resolve_model


class NNEvalMetric(Distance):
    """A trained NNEval model as a metric: P(human-written) of each candidate.

    Args:
        model: a shipped model (``flickr8k-paper``, the default: the paper's features;
            ``flickr8k-embeddings``: adds ROUGE-L, CIDEr, WEmbSim, MiniLM embedding cosine and BERTScore;
            ``flickr8k-paper-spice``: the paper's features with SPICE, which needs ``capmetrics setup spice``;
            ``flickr8k-embeddings-spice``: the embedding features, SPICE and MiniLM vectors, two networks
            fitted to Flickr8k-Expert and -CF ratings, the best on unseen Flickr8k images)
            or the folder of a model written by ``capmetrics nneval train`` (or ``NNEval.save``).
    """

    name = "nneval"
    accepts_empty_candidates = True  # P(human) of its features; the paper's and the embedding features all score empties
    distance_offset = 1.0

    def __init__(self, model: str = DEFAULT_MODEL) -> None:
        self.model = model

    def learner(self) -> NNEval:
        """The loaded model (loaded once)."""
        cached = self.__dict__.get("_learner")
        if cached is None:
            cached = self.__dict__["_learner"] = NNEval.load(resolve_model(self.model)[1])
        return cached

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        values = self.learner().predict(candidates, references)
        return Scores(values, float(values.mean()) if values.size else float("nan"))

    def signature_extra(self) -> dict[str, str]:
        label, folder = resolve_model(self.model)
        return {"nneval_model": label, "model_sha256": model_digest(folder)}
