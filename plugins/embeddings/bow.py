"""The ``bow`` embedder: word counts over the K most frequent words of the run's references
(the bag-of-words embedding of Chan et al. 2022, appendix B.1, K = 5,000)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from capmetrics import Embedder, MetricError, Tokenizer
from capmetrics.plugins.tokenizers import PTBTokenizer

PTB = PTBTokenizer()


class BagOfWordsEmbedder(Embedder):
    """Counts of the vocabulary's words in each text (out-of-vocabulary words are dropped).

    The vocabulary is fitted on the references (``fit``, which the statistics call with every
    item's references): the ``words`` most frequent tokens, ties broken alphabetically.

    Args:
        words: vocabulary size K.
        tokenizer: how texts become words (default: PTB, lower-cased, punctuation removed).
    """

    name = "bow"

    def __init__(self, words: int = 5000, tokenizer: Tokenizer = PTB) -> None:
        self.words = words
        self.tokenizer = tokenizer

    def fit(self, references: Sequence[Sequence[str]]) -> BagOfWordsEmbedder:
        """Fix the vocabulary: the ``words`` most frequent tokens of all references."""
        if self.words < 1:
            raise MetricError(f"bow: words={self.words} must be at least 1")
        counts = Counter(
            w for toks in self.tokenizer.tokenize([r for g in references for r in g]) for w in toks
        )
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: self.words]
        self.vocabulary_ = {w: k for k, (w, _) in enumerate(ranked)}
        return self

    def signature_extra(self) -> dict[str, str]:
        if not hasattr(self, "vocabulary_"):
            return {}
        import hashlib

        digest = hashlib.sha256("\n".join(self.vocabulary_).encode()).hexdigest()[:16]
        return {"vocabulary": f"fitted:{len(self.vocabulary_)}:{digest}"}

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        vocabulary = getattr(self, "vocabulary_", None)
        if vocabulary is None:
            raise MetricError(
                "bow has no vocabulary: call fit(references) first (the statistics' fit does, "
                "as `capmetrics compare` runs them)"
            )
        out = np.zeros((len(texts), max(len(vocabulary), 1)), np.float32)
        rows, cols = [], []
        for k, toks in enumerate(self.tokenizer.tokenize(list(texts))):
            ids = [vocabulary[w] for w in toks if w in vocabulary]
            rows.extend([k] * len(ids))
            cols.extend(ids)
        np.add.at(out, (np.asarray(rows, np.int64), np.asarray(cols, np.int64)), 1.0)
        return out
