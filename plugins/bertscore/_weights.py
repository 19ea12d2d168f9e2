"""BERTScore's idf weights and baseline files, as bert-score 0.3.13 defines them.

idf: each reference is one document (the set of its token ids, special tokens included);
idf(t) = ln((N + 1) / (df(t) + 1)), and ln(N + 1) for a token no reference has. Without idf,
every token weighs 1 except the tokenizer's [CLS] and [SEP], which weigh 0 (with idf they get
ln(1) = 0 because every reference has them).

Baseline file: bert-score's CSV (``LAYER,P,R,F``, one row per layer from 0); scores are
rescaled as (x − b) / (1 − b) with the row of the layer used.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from capmetrics import MetricError
from capmetrics.io import digests


@dataclass(frozen=True)
class Idf:
    """Document frequencies of token ids over ``documents`` references."""

    df: dict[int, int]
    documents: int

    @classmethod
    def fit(cls, token_ids: Iterable[Sequence[int]]) -> Idf:
        counts: Counter[int] = Counter()
        documents = 0
        for ids in token_ids:
            counts.update(set(ids))
            documents += 1
        return cls(dict(counts), documents)

    def weights(self, ids: np.ndarray) -> np.ndarray:
        """idf of each token id."""
        df = np.fromiter((self.df.get(int(i), 0) for i in ids), dtype=np.float64, count=len(ids))
        return np.log((self.documents + 1) / (df + 1))

    def digest(self) -> str:
        text = repr((self.documents, sorted(self.df.items())))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def plain_weights(ids: np.ndarray, special: set[int]) -> np.ndarray:
    """Weight 1 per token, 0 for [CLS] and [SEP]."""
    return np.fromiter(
        (0.0 if int(i) in special else 1.0 for i in ids), dtype=np.float64, count=len(ids)
    )


def read_baseline(path: str, layer: int, depth: int) -> np.ndarray:
    """The (P, R, F) baseline of ``layer`` from a bert-score baseline file, float32 as
    bert-score."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise MetricError(f"baseline={path!r}: file not found")
    try:
        with file.open(newline="") as f:
            rows = list(csv.reader(f))
        header, body = [h.strip() for h in rows[0]], [r for r in rows[1:] if r]
        values = np.array([[float(x) for x in r] for r in body], dtype=np.float64)
    except (IndexError, ValueError, UnicodeDecodeError) as err:
        raise MetricError(
            f"baseline={path!r} is not a bert-score baseline file "
            f"(CSV with columns LAYER,P,R,F): {err}"
        ) from None
    if header[1:] != ["P", "R", "F"] or values.ndim != 2 or values.shape[1] != 4:
        raise MetricError(
            f"baseline={path!r} is not a bert-score baseline file: header {header}, "
            "expected LAYER,P,R,F"
        )
    if len(values) != depth + 1 or not np.array_equal(values[:, 0], np.arange(depth + 1)):
        raise MetricError(
            f"baseline={path!r} has {len(values)} layer rows but the model has {depth} "
            f"layers ({depth + 1} rows, LAYER 0..{depth}): a baseline of another model?"
        )
    if not all(math.isfinite(v) and v < 1.0 for v in values[layer, 1:]):
        raise MetricError(
            f"baseline={path!r}: row {layer} has values {values[layer, 1:]} (need < 1)"
        )
    return values[layer, 1:].astype(np.float32)


def file_digest(path: str) -> str:
    return "sha256:" + digests.file_digest(Path(path).expanduser())[:16]
