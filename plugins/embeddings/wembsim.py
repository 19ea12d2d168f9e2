"""WEmbSim (Sharif et al. 2020) and the cosine distance of sentence embeddings.

``wembsim``: the cosine between the mean word vectors of candidate and reference, after
removing NLTK's English stop words and out-of-vocabulary words, combined over references (mean
by default; the authors' code uses max as its main feature). The paper prints |a·b| in the
numerator; like the authors' code, capmetrics uses the signed cosine. A text left with no word
scores ``empty`` (−1, the minimum, as in the authors' code) with a warning, never NaN.

``embedding-cosine``: the cosine between sentence embeddings (e.g. ``bert``); as a distance,
1 − cosine (the BERT distance of TRM).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from capmetrics import Aggregator, Distance, Embedder, Scores, Tokenizer
from capmetrics.plugins.aggregators import Mean
from capmetrics.plugins.embeddings.embedders import GloveEmbedder
from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder
from capmetrics.plugins.embeddings.stopwords import NLTK_ENGLISH
from capmetrics.plugins.embeddings.text import cosine_matrix, cosines, flatten, mean_vectors
from capmetrics.plugins.tokenizers import PTBTokenizer

GLOVE = GloveEmbedder()
BERT = SentenceTransformerEmbedder()
PTB = PTBTokenizer()
MEAN = Mean()


class _CosineMetric(Distance):
    """Cosine similarity of per-text vectors, combined over references; distance 1 − cosine."""

    higher_is_better = True
    distance_offset = 1.0
    # wembsim: a text with no usable word scores ``empty`` (-1) with a warning;
    # embedding-cosine: the cosine of the model's embedding of the empty text
    accepts_empty_candidates = True
    combine: Aggregator
    empty: float

    def text_vectors(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """One vector per text and the mask of texts that have one."""
        raise NotImplementedError

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        if not len(candidates) and not len(references):
            return Scores(np.zeros(0), float("nan"), {"per_reference": np.zeros(0)})
        texts, cand, refs, offsets = flatten(candidates, references)
        vectors, valid = self.text_vectors(texts)
        owner = np.repeat(cand, np.diff(offsets))
        slots = cosines(
            vectors[owner], vectors[refs], valid[owner], valid[refs], self.empty, self.name
        )
        values = self.combine.reduce_groups(slots, offsets)
        return Scores(values, float(values.mean()), {"per_reference": slots})

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """1 − cosine for every pair (a_i, b_j), with the same empty-text rule as :meth:`score`."""
        vectors, valid = self.text_vectors(list(a) + list(b))
        n = len(a)
        sims = cosine_matrix(vectors[:n], vectors[n:], valid[:n], valid[n:], self.empty, self.name)
        return self.to_distance(sims)


class WEmbSim(_CosineMetric):
    """WEmbSim: cosine of the mean word embeddings of candidate and references.

    Args:
        embedder: word embedder (static vectors, or ELMo whose vectors are taken in context).
        tokenizer: how texts become words (default: PTB, lower-cased, punctuation removed).
        combine: reduction over the references' cosines (``mean``, ``max``, ``min``, ...).
        stopwords: remove NLTK's English stop words.
        unit_word_vectors: L2-normalise each word vector before averaging (what the authors'
            word2vec variant did).
        empty: the score of a comparison where a side has no usable word.
    """

    name = "wembsim"

    def __init__(
        self,
        embedder: Embedder = GLOVE,
        tokenizer: Tokenizer = PTB,
        combine: Aggregator = MEAN,
        stopwords: bool = True,
        unit_word_vectors: bool = False,
        empty: float = -1.0,
    ) -> None:
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.combine = combine
        self.stopwords = stopwords
        self.unit_word_vectors = unit_word_vectors
        self.empty = empty

    def text_vectors(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        words = self.tokenizer.tokenize(list(texts))
        embedder = _UnitWords(self.embedder) if self.unit_word_vectors else self.embedder
        keep = (lambda w: w not in NLTK_ENGLISH) if self.stopwords else (lambda w: True)
        return mean_vectors(embedder, words, keep)


class _UnitWords:
    """An embedder view whose word vectors are L2-normalised."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.contextual = getattr(inner, "contextual", False)
        self.spec = inner.spec

    def embed_words(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        vectors, known = self.inner.embed_words(tokens)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0), known & (
            norms[:, 0] > 0
        )


class EmbeddingCosine(_CosineMetric):
    """Cosine similarity of sentence embeddings; as a distance 1 − cosine.

    Args:
        embedder: a text embedder (default ``bert``: all-MiniLM-L6-v2).
        combine: reduction over the references' cosines.
        empty: the score when a text embeds to a zero vector.
    """

    name = "embedding-cosine"

    def __init__(
        self, embedder: Embedder = BERT, combine: Aggregator = MEAN, empty: float = -1.0
    ) -> None:
        self.embedder = embedder
        self.combine = combine
        self.empty = empty

    def text_vectors(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.asarray(self.embedder.embed_texts(list(texts)), dtype=np.float64)
        return vectors, np.ones(len(texts), bool)
