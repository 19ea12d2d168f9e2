"""A ``compute_metrics`` for Hugging Face's ``Trainer``: decode, score with capmetrics, return
floats.

>>> from capmetrics.integrations.hf import compute_metrics
>>> trainer = Seq2SeqTrainer(..., compute_metrics=compute_metrics(tokenizer, ["bleu-4", "cider-d"]))
>>> trainer.evaluate()            # {"eval_bleu-4": 0.21, "eval_cider-d": 0.64, ...}

Predictions are token ids (``predict_with_generate``) or logits (their argmax is taken); labels and
predictions have their ``-100`` positions replaced by the tokenizer's pad id and are decoded with
``skip_special_tokens=True``. Each label is its item's one reference, unless ``references`` gives
every evaluation item's reference list (in the evaluation set's order), as captioning data has
several per image. Values are :func:`capmetrics.score`'s corpus values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from capmetrics.errors import MetricError

__all__ = ["compute_metrics", "decode_ids"]


def decode_ids(tokenizer: Any, ids: Any, what: str) -> list[str]:
    """Token ids (2-D, ``-100`` where masked) decoded without special tokens, stripped."""
    array = np.asarray(ids)
    if array.ndim == 3:  # logits
        array = array.argmax(-1)
    if array.ndim != 2:
        raise MetricError(
            f"compute_metrics: {what} must be a 2-D array of token ids (or 3-D logits), "
            f"got shape {array.shape}"
        )
    pad = tokenizer.pad_token_id
    if pad is None:
        raise MetricError(
            "compute_metrics: the tokenizer has no pad token to replace the -100 positions with"
        )
    array = np.where(array == -100, pad, array)
    return [t.strip() for t in tokenizer.batch_decode(array.tolist(), skip_special_tokens=True)]


def compute_metrics(
    tokenizer: Any,
    metrics: str | Sequence[str] = ("bleu-4", "cider-d"),
    references: Sequence[Sequence[str]] | None = None,
) -> Callable[[Any], dict[str, float]]:
    """A function of an ``EvalPrediction`` (or a ``(predictions, label_ids)`` pair) returning
    ``{spec: corpus value}`` for each capmetrics metric spec."""
    specs = [metrics] if isinstance(metrics, str) else list(metrics)
    if not specs:
        raise MetricError("compute_metrics: no metrics given")
    refs_given = None if references is None else [list(r) for r in references]

    def compute(eval_pred: Any) -> dict[str, float]:
        from capmetrics.engine.scoring import score

        predictions, labels = (
            (eval_pred.predictions, eval_pred.label_ids)
            if hasattr(eval_pred, "predictions")
            else eval_pred
        )
        if isinstance(predictions, tuple):  # (logits, hidden states...)
            predictions = predictions[0]
        candidates = decode_ids(tokenizer, predictions, "predictions")
        if refs_given is not None:
            refs = refs_given
            what = "references"
        else:
            if labels is None:
                raise MetricError(
                    "compute_metrics: the evaluation has no label_ids; pass references="
                )
            refs = [[label] for label in decode_ids(tokenizer, labels, "label_ids")]
            what = "labels"
        if len(refs) != len(candidates):
            raise MetricError(
                f"compute_metrics: {len(candidates)} predictions but {len(refs)} {what}"
            )
        results = score(candidates=candidates, references=refs, metrics=specs)
        return {spec: float(results[spec].corpus) for spec in specs}

    return compute
