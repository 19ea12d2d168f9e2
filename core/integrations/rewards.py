"""Rewards for training loops: CIDEr-D and BLEU per sample, with document frequencies fixed
from a training corpus, and the self-critical (greedy-baseline) advantage.

>>> reward = CiderDReward.fit(train_references, path="coco-train-df.json.gz")   # once
>>> reward = CiderDReward("coco-train-df.json.gz", vocab=ix_to_word)            # every run
>>> r_sample = reward(sampled_ids, references)       # (batch * k,) numpy, or torch if given torch
>>> r_greedy = reward(greedy_ids, references)        # (batch,)
>>> advantage = self_critical(r_sample, r_greedy)    # r_sample - r_greedy of each sample's image
>>> # or in one batch:
>>> advantage, r_sample, r_greedy = reward.self_critical(sampled_ids, greedy_ids, references)

The metrics are the registered ``cider-d`` and ``bleu-N`` (composed by name, their values are
coco-caption's), reading text that is tokenised already (``tokenizer=whitespace`` by default:
training vocabularies are lower-cased words). Candidates are strings or token-id sequences
(lists, numpy arrays, torch tensors) of ``vocab``'s words, cut at ``end_id``: scored as ids, with
no text made, when every word is one whitespace-free token and the metric splits on whitespace,
else decoded to text (the same values). References are one list of strings per candidate, or
one per image when each image has ``k`` consecutive candidates (self-critical.pytorch's
``seq_per_img``).

``keep_end=True`` follows self-critical.pytorch instead: a sequence is cut *after* its first
``end_id``, so the end token is a word of every candidate and token-id reference that has one
(and of the df, as its ``scripts/prepro_ngrams.py`` counts it); ``df`` may then be that
script's pickle (``-words.p`` with ``vocab[end_id]`` its ``<eos>``, or ``-idxs.p``, whose
n-grams are ids: token ids are then scored as their decimal strings, as self-critical does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.components.base import Distance, Tokenizer
from capmetrics.errors import MetricError
from capmetrics.integrations.dffiles import df_kind, read_df_pickle

__all__ = [
    "BleuReward",
    "CiderDReward",
    "Reward",
    "check_end_word",
    "decode",
    "self_critical",
    "token_ids",
    "vocab_array",
]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def vocab_array(vocab: Sequence[str] | Mapping[int, str] | np.ndarray) -> np.ndarray:
    """The words of a vocabulary (a list, an id -> word dict, or such an array already) as an
    object array indexed by id."""
    if isinstance(vocab, np.ndarray) and vocab.dtype == object:
        return vocab
    if isinstance(vocab, Mapping):
        words = np.full(max(map(int, vocab), default=-1) + 1, "", dtype=object)
        for i, w in vocab.items():
            words[int(i)] = w
        return words
    return np.asarray(list(vocab), dtype=object)


def token_ids(
    sequences: Any, words: np.ndarray, end_id: int | None = 0, keep_end: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Token-id sequences (a 2-D array/tensor or a list of sequences) as one flat int64 array of
    each sequence's ids before its first ``end_id`` (None: no end token; ``keep_end``: up to and
    including it), and their lengths; ids outside ``words`` are an error."""
    if _is_torch(sequences):
        sequences = sequences.detach().cpu().numpy()
    if isinstance(sequences, np.ndarray) and sequences.ndim == 2:  # a padded batch: one pass
        ids = sequences.astype(np.int64, copy=False)
        lengths = np.full(len(ids), ids.shape[1])
        if end_id is not None:
            ends = ids == end_id
            lengths = np.where(ends.any(axis=1), ends.argmax(axis=1) + keep_end, lengths)
        used = np.arange(ids.shape[1]) < lengths[:, None]
        bad = used & ((ids < 0) | (ids >= len(words)))
        if bad.any():
            n = int(np.flatnonzero(bad.any(axis=1))[0])
            raise MetricError(
                f"sequence {n} has token ids outside the vocabulary of {len(words)} words"
            )
        return ids[used], lengths
    rows = []
    for n, row in enumerate(np.asarray(s, dtype=np.int64).ravel() for s in sequences):
        if end_id is not None:
            stop = np.flatnonzero(row == end_id)
            row = row[: stop[0] + keep_end] if len(stop) else row
        if len(row) and (row.min() < 0 or row.max() >= len(words)):
            raise MetricError(
                f"sequence {n} has token ids outside the vocabulary of {len(words)} words"
            )
        rows.append(row)
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    return (np.concatenate(rows) if rows else np.zeros(0, np.int64)), lengths


def decode(
    sequences: Any,
    vocab: Sequence[str] | Mapping[int, str] | np.ndarray,
    end_id: int | None = 0,
    keep_end: bool = False,
) -> list[str]:
    """Token-id sequences (a 2-D array/tensor or a list of sequences) to space-joined words,
    each cut at its first ``end_id`` (None: no end token; ``keep_end``: after it, the end
    token's word included)."""
    words = vocab_array(vocab)
    ids, lengths = token_ids(sequences, words, end_id, keep_end)
    tokens = words[ids].tolist()
    ends = np.cumsum(lengths).tolist()
    return [" ".join(tokens[end - k : end]) for end, k in zip(ends, lengths.tolist())]


def _plain_words(words: np.ndarray, end_id: int | None) -> bool:
    """Whether every word but the end token is one whitespace-free token (``w.split() == [w]``),
    so that scoring the words as tokens is scoring their space-joined text split on whitespace."""
    return all(w.split() == [w] for i, w in enumerate(words.tolist()) if i != end_id)


def self_critical(sample_rewards: Any, baseline_rewards: Any) -> Any:
    """Self-critical advantage: each sample's reward minus its image's baseline (greedy) reward.

    ``sample_rewards`` has ``k`` consecutive samples per image, ``baseline_rewards`` one value per
    image; numpy in, numpy out, torch in, torch out.
    """
    n, m = len(sample_rewards), len(baseline_rewards)
    if m == 0 or n % m:
        raise MetricError(
            f"self_critical: {n} sample rewards are not k per image for {m} baseline rewards"
        )
    if _is_torch(sample_rewards):
        return sample_rewards - baseline_rewards.repeat_interleave(n // m)
    return np.asarray(sample_rewards, dtype=float) - np.repeat(
        np.asarray(baseline_rewards, dtype=float), n // m
    )


class Reward:
    """Per-sample values of a registered distance as a training reward (base class).

    Args:
        metric: the spec of the metric (a distance) to compose.
        vocab: id -> word (a list or a dict) for token-id candidates.
        end_id: the id that ends a sequence (self-critical.pytorch: 0); None: none.
        tokenizer: how the metric splits text (``whitespace`` for decoded or tokenised text).
        keep_end: cut sequences after the end token, which is then scored as a word
            (self-critical.pytorch's convention; ``vocab`` must have a word for ``end_id``).
    """

    def __init__(
        self,
        metric: str | Distance,
        vocab: Sequence[str] | Mapping[int, str] | None = None,
        end_id: int | None = 0,
        tokenizer: str | Tokenizer = "whitespace",
        keep_end: bool = False,
    ) -> None:
        from capmetrics.registry.compose import compose

        if isinstance(metric, Distance):
            self.metric = metric
        else:
            built = compose(metric, "distance", tokenizer=compose(tokenizer, "tokenizer"))
            assert isinstance(built, Distance)
            self.metric = built
        self.vocab, self.end_id, self.keep_end = vocab, end_id, keep_end
        self._words = None if vocab is None else vocab_array(vocab)  # built once, not per batch
        if keep_end:
            check_end_word(self._words, end_id)
        # token ids go to the metric as ids, with no text in between, where it reads them so
        self._reads_ids = (
            self._words is not None
            and hasattr(self.metric, "score_token_ids")
            and _plain_words(self._words, None if keep_end else end_id)
        )

    @staticmethod
    def _is_text(sequences: Any) -> bool:
        return (
            not _is_torch(sequences)
            and not isinstance(sequences, np.ndarray)
            and set(map(type, sequences)) <= {str}
        )

    def texts(self, sequences: Any, what: str = "candidates") -> list[str]:
        """Strings as they are; token-id sequences decoded with ``vocab``."""
        if self._is_text(sequences):
            return list(sequences)
        if self.vocab is None:
            raise MetricError(f"{what} are token ids; pass vocab=<id -> word> to the reward")
        assert self._words is not None  # made from vocab
        return decode(sequences, self._words, self.end_id, self.keep_end)

    def grouped_references(
        self, n: int, references: Sequence[Sequence[Any]]
    ) -> tuple[list[list[str]], np.ndarray]:
        """The reference lists as strings, and which one each of ``n`` candidates uses:
        ``references`` one per candidate, or one per image for its ``n // len(references)``
        consecutive candidates."""
        refs = [
            list(r) if set(map(type, r)) <= {str} else self.texts(r, "references")
            for r in references
        ]
        if len(refs) == n:
            return refs, np.arange(n)
        if not refs or n % len(refs):
            raise MetricError(
                f"{n} candidates need {n} reference lists or k per image "
                f"(a divisor of {n}); got {len(refs)}"
            )
        return refs, np.arange(n) // (n // len(refs))

    def references_for(self, n: int, references: Sequence[Sequence[Any]]) -> list[list[str]]:
        """One reference list per candidate (see :meth:`grouped_references`)."""
        refs, refset = self.grouped_references(n, references)
        return [refs[q] for q in refset.tolist()]

    def __call__(self, candidates: Any, references: Sequence[Sequence[Any]]) -> Any:
        """The reward of each candidate: float64, as numpy, or as a torch tensor on the
        candidates' device when the candidates are a torch tensor."""
        refs, refset = self.grouped_references(len(candidates), references)
        return _like(candidates, self._values([candidates], refs, refset))

    def self_critical(
        self, samples: Any, baselines: Any, references: Sequence[Sequence[Any]]
    ) -> tuple[Any, Any, Any]:
        """The self-critical advantage, the samples' rewards and the baselines' (greedy)
        rewards: ``k`` consecutive samples and one baseline per image, ``references`` one list
        per image. One batch scores both, so the references are read and counted once."""
        m, n = len(baselines), len(samples)
        if len(references) != m or m == 0 or n % m:
            raise MetricError(
                f"self_critical: {n} samples and {m} baselines need k samples, one "
                f"baseline and one reference list per image; got {len(references)} lists"
            )
        refs, _ = self.grouped_references(m, references)
        values = self._values(
            [samples, baselines], refs, np.concatenate([np.arange(n) // (n // m), np.arange(m)])
        )
        sampled, greedy = _like(samples, values[:n]), _like(samples, values[n:])
        return self_critical(sampled, greedy), sampled, greedy

    def _values(
        self, parts: Sequence[Any], refs: list[list[str]], refset: np.ndarray
    ) -> np.ndarray:
        """The rewards of the candidates of ``parts`` one after the other, candidate i against
        ``refs[refset[i]]``: as token ids where the metric reads them, else as text."""
        scores = None
        if self._reads_ids and not any(map(self._is_text, parts)):
            assert self._words is not None
            ids, lengths = zip(
                *(token_ids(p, self._words, self.end_id, self.keep_end) for p in parts)
            )
            scores = self.metric.score_token_ids(  # type: ignore[attr-defined]
                np.concatenate(ids), np.concatenate(lengths), self._words, refs, refset
            )
        if scores is None:
            texts = [t for p in parts for t in self.texts(p)]
            if hasattr(self.metric, "score_grouped"):  # each image's references read once
                scores = self.metric.score_grouped(texts, refs, refset)
            else:
                scores = self.metric.score(texts, [refs[q] for q in refset.tolist()])
        return np.asarray(scores.values, dtype=float)


def check_end_word(words: np.ndarray | None, end_id: int | None) -> None:
    """keep_end scores the end token as a word: it needs an end id and, given a vocabulary, a
    word for it."""
    if end_id is None:
        raise MetricError(
            "keep_end=True needs end_id (the token that ends a sequence, kept as a word)"
        )
    if words is not None and (not 0 <= end_id < len(words) or not str(words[end_id]).strip()):
        raise MetricError(
            f"keep_end=True scores the end token as a word, but vocab has no word for end_id "
            f"{end_id} (self-critical.pytorch's prepro_ngrams calls it '<eos>': "
            f"add {{{end_id}: '<eos>'}})"
        )


def _like(candidates: Any, values: np.ndarray) -> Any:
    """``values`` (float64) as a torch float64 tensor on the candidates' device if they are a
    torch tensor: the metric's values as they are, whatever the input type (cast them yourself
    where a loss wants float32)."""
    if _is_torch(candidates):
        import torch

        return torch.as_tensor(values, dtype=torch.float64, device=candidates.device)
    return values


class CiderDReward(Reward):
    """CIDEr-D rewards (coco-caption's ``Cider`` values) with fixed document frequencies.

    Args:
        df: a document-frequency file written by :meth:`save` (or ``cider-d``'s ``save_df``),
            a pickle written by self-critical.pytorch's ``scripts/prepro_ngrams.py`` (a path, or
            a name read as ``data/<name>.p``, read without running code; see
            :mod:`capmetrics.integrations.dffiles`), or None for a
            reward that :meth:`fit` fills in.
        vocab, end_id, tokenizer, keep_end: see :class:`Reward`.
    """

    def __init__(
        self,
        df: str | Path | None = None,
        vocab: Sequence[str] | Mapping[int, str] | None = None,
        end_id: int | None = 0,
        tokenizer: str | Tokenizer = "whitespace",
        keep_end: bool = False,
    ) -> None:
        from capmetrics.registry.compose import compose

        pickled = _prepro_ngrams_pickle(df)
        params: dict[str, Any] = {"df": str(df)} if df is not None and pickled is None else {}
        metric = compose("cider-d", "distance", tokenizer=compose(tokenizer, "tokenizer"), **params)
        assert isinstance(metric, Distance)
        if pickled is not None:
            table, images = read_df_pickle(pickled)
            metric.fit_states([(table, images)])  # type: ignore[attr-defined]
            if vocab is not None and _id_grams(table):  # an -idxs pickle: the ids are its words
                vocab = [str(i) for i in range(len(vocab_array(vocab)))]
        super().__init__(metric, vocab, end_id, tokenizer, keep_end)
        if pickled is None and df is not None:
            # read the file now: errors here, not mid-epoch
            self.metric.fixed_df()  # type: ignore[attr-defined]

    @classmethod
    def fit(
        cls, references: Sequence[Sequence[str]], path: str | Path | None = None, **kwargs: Any
    ) -> CiderDReward:
        """Fix the document frequencies from a training corpus (one reference list per image),
        and save them to ``path`` (``.gz``: gzipped) if given."""
        reward = cls(None, **kwargs)
        reward.metric.fit(references)
        if path is not None:
            reward.save(path)
        return reward

    def save(self, path: str | Path) -> None:
        """Write the document frequencies; ``CiderDReward(path)`` loads them."""
        self.metric.save_df(path)  # type: ignore[attr-defined]

    def _values(
        self, parts: Sequence[Any], refs: list[list[str]], refset: np.ndarray
    ) -> np.ndarray:
        if self.metric.fixed_df() is None:  # type: ignore[attr-defined]
            raise MetricError(
                "CiderDReward needs fixed document frequencies: CiderDReward(df=<file>) "
                "or CiderDReward.fit(training references)"
            )
        return super()._values(parts, refs, refset)


def _prepro_ngrams_pickle(df: str | Path | None) -> Path | None:
    """The prepro_ngrams pickle that ``df`` names (a pickle file, or ``data/<df>.p``), or None
    (capmetrics' own df files, read by ``cider-d`` itself)."""
    if df is None:
        return None
    path = Path(df)
    if path.is_file():
        return path if df_kind(path) == "pickle" else None
    named = Path("data") / f"{df}.p"
    return named if named.is_file() else None


def _id_grams(table: Mapping[str, int]) -> bool:
    """Whether a df table's n-grams are token ids (prepro_ngrams' ``-idxs.p``), not words."""
    return bool(table) and all(gram.replace(" ", "").isdigit() for gram in table)


class BleuReward(Reward):
    """BLEU-``order`` per sample (coco-caption's per-caption value), as a reward."""

    def __init__(
        self,
        order: int = 4,
        vocab: Sequence[str] | Mapping[int, str] | None = None,
        end_id: int | None = 0,
        tokenizer: str | Tokenizer = "whitespace",
        keep_end: bool = False,
    ) -> None:
        if order not in (1, 2, 3, 4):
            raise MetricError(f"BleuReward: order must be 1, 2, 3 or 4, got {order!r}")
        super().__init__(f"bleu-{order}", vocab, end_id, tokenizer, keep_end)
