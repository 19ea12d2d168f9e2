"""Helpers shared by the embedding metrics: unique texts, word vocabularies, mean vectors."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
from capmetrics import Embedder, MetricError, Tokenizer
from capmetrics.plugins.embeddings.stopwords import NLTK_ENGLISH


def is_contextual(embedder: Embedder) -> bool:
    """Whether a word's vector depends on its sentence (ELMo), so words cannot be pooled."""
    return bool(getattr(embedder, "contextual", False))


def unique_index(texts: Sequence[str], position: dict[str, int]) -> np.ndarray:
    """Index of each text in ``position`` (new texts are appended to it)."""
    return np.fromiter(
        (position.setdefault(t, len(position)) for t in texts), dtype=np.int64, count=len(texts)
    )


def flatten(
    candidates: Sequence[str], references: Sequence[Sequence[str]]
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct texts, the index of each candidate and of each reference slot, and the
    offsets of each candidate's block of reference slots."""
    if len(candidates) != len(references):
        raise MetricError(f"{len(candidates)} candidates but {len(references)} reference lists")
    position: dict[str, int] = {}
    cand = unique_index(candidates, position)
    refs = unique_index([r for group in references for r in group], position)
    offsets = np.concatenate([[0], np.cumsum([len(g) for g in references])]).astype(np.int64)
    if (np.diff(offsets) == 0).any():
        first = int(np.flatnonzero(np.diff(offsets) == 0)[0])
        raise MetricError(f"candidate {first} ({candidates[first]!r}) has no references")
    return list(position), cand, refs, offsets


def content_words(tokenizer: Tokenizer, texts: Sequence[str], stopwords: bool) -> list[list[str]]:
    """Tokens of each text, without NLTK's English stop words if ``stopwords``."""
    tokens = tokenizer.tokenize(list(texts))
    if not stopwords:
        return tokens
    return [[t for t in toks if t not in NLTK_ENGLISH] for toks in tokens]


def vocabulary(
    embedder: Embedder, sentences: Sequence[Sequence[str]]
) -> tuple[list[np.ndarray], np.ndarray]:
    """Embed every distinct word once: per sentence, the ids of its known words (in order,
    repeats kept), and the vectors of the known words (one row per id)."""
    if is_contextual(embedder):
        raise MetricError(
            f"embedder {embedder.spec} gives contextual vectors; this metric needs static word "
            "vectors"
        )
    position: dict[str, int] = {}
    raw = [unique_index(s, position) for s in sentences]
    vectors, known = embedder.embed_words(list(position))
    known = np.asarray(known, dtype=bool)
    new_id = np.where(known, np.cumsum(known) - 1, -1)
    ids = [new_id[r][new_id[r] >= 0] for r in raw]
    return ids, np.asarray(vectors)[known]


def mean_vectors(
    embedder: Embedder,
    sentences: Sequence[Sequence[str]],
    keep: Callable[[str], bool] = lambda w: True,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean vector of the kept, known words of each sentence, and a mask of the sentences
    that have at least one such word (their row is zero otherwise).

    Static embedders embed each distinct word once; contextual ones embed each sentence whole
    and drop the unkept words afterwards.
    """
    if is_contextual(embedder):
        return _contextual_means(embedder, sentences, keep)
    ids, vectors = vocabulary(embedder, [[w for w in s if keep(w)] for s in sentences])
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.concatenate([np.zeros(0, np.int64), *ids])
    sums = np.zeros((len(ids), vectors.shape[1]))
    np.add.at(sums, np.repeat(np.arange(len(ids)), lengths), vectors[flat].astype(np.float64))
    valid = lengths > 0
    sums[valid] /= lengths[valid, None]
    return sums, valid


def _contextual_means(
    embedder: Embedder, sentences: Sequence[Sequence[str]], keep: Callable[[str], bool]
) -> tuple[np.ndarray, np.ndarray]:
    embed = getattr(embedder, "embed_sentences", None)
    embedded = embed(sentences) if embed else [embedder.embed_words(list(s)) for s in sentences]
    rows, valid = [], []
    for s, (vectors, known) in zip(sentences, embedded):
        use = np.asarray(known, bool) & np.array([keep(w) for w in s], bool)
        valid.append(bool(use.any()))
        rows.append(
            vectors[use].astype(np.float64).mean(axis=0)
            if use.any()
            else np.zeros(vectors.shape[1])
        )
    return np.array(rows).reshape(len(rows), -1), np.array(valid, bool)


def _unit(a: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norms = np.linalg.norm(a, axis=1)
    ok = np.asarray(valid, bool) & (norms > 0)
    return np.where(ok[:, None], a / np.where(ok, norms, 1.0)[:, None], 0.0), ok


def _finish(values: np.ndarray, ok: np.ndarray, empty: float, what: str) -> np.ndarray:
    values = np.where(ok, np.clip(values, -1.0, 1.0), float(empty))
    if not ok.all():
        warnings.warn(
            f"{what}: {int((~ok).sum())} comparison(s) involve a text with no usable word "
            f"(all stop words or out of vocabulary); they score {empty}",
            stacklevel=3,
        )
    return values


def cosines(
    a: np.ndarray, b: np.ndarray, valid_a: np.ndarray, valid_b: np.ndarray, empty: float, what: str
) -> np.ndarray:
    """Row-wise cosine of ``a`` and ``b``; ``empty`` (with a warning) where a side has no
    usable word or a zero vector."""
    (ua, oka), (ub, okb) = _unit(a, valid_a), _unit(b, valid_b)
    return _finish(np.einsum("ij,ij->i", ua, ub), oka & okb, empty, what)


def cosine_matrix(
    a: np.ndarray, b: np.ndarray, valid_a: np.ndarray, valid_b: np.ndarray, empty: float, what: str
) -> np.ndarray:
    """All cosines between the rows of ``a`` and ``b`` (``empty`` where a side is unusable)."""
    (ua, oka), (ub, okb) = _unit(a, valid_a), _unit(b, valid_b)
    return _finish(ua @ ub.T, oka[:, None] & okb[None, :], empty, what)
