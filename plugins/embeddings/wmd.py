"""Word Mover's Distance (Kusner et al. 2015) with gensim's ``wmdistance`` semantics.

Per pair: out-of-vocabulary words are dropped; a side left empty gives +inf; two documents
made of one and the same word give 0; otherwise the exact optimal-transport cost between the
normalised bag-of-words histograms under the Euclidean distance of the (by default
L2-normalised, as in gensim 4) word vectors, and +inf if that whole cost matrix sums to < 1e-8.

As a metric (``score``), WMD follows the coco-caption WMD scorer: similarity exp(−d/σ) per
reference, the maximum over references (= exp(−min d/σ)), +inf giving 0. ``pairwise`` returns
the raw distance matrix, not 1 − similarity.

Speed: every distinct text is tokenized once and every distinct word embedded and normalised
once; each pair costs one small ``cdist`` and, when both sides have several words, one call of
POT's network-simplex core (a one-word side has a closed form).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from capmetrics import Distance, Embedder, MetricError, Scores, Tokenizer
from capmetrics.plugins.embeddings.embedders import GloveEmbedder
from capmetrics.plugins.embeddings.text import content_words, flatten, vocabulary
from capmetrics.plugins.tokenizers import PTBTokenizer

ZERO_COST = 1e-8
GLOVE = GloveEmbedder()
PTB = PTBTokenizer()


def _solver() -> Callable[[np.ndarray, np.ndarray, np.ndarray], float]:
    """POT's exact EMD; its C core directly when available (it skips ``emd2``'s overhead)."""
    try:
        import ot
    except ImportError as err:
        raise MetricError(
            "POT is not installed; install it with: pip install 'capmetrics[embeddings]'"
        ) from err
    try:
        from ot.lp.emd_wrap import emd_c

        probe = emd_c(
            np.array([0.5, 0.5]), np.array([1.0]), np.array([[1.0], [2.0]]), 100000, 1, None, None
        )
        if abs(probe[1] - 1.5) > 1e-12:
            raise TypeError("unexpected emd_c result")
    except (ImportError, TypeError, ValueError):
        return lambda a, b, m: float(ot.emd2(a, b, m))

    def solve(a: np.ndarray, b: np.ndarray, m: np.ndarray) -> float:
        return float(emd_c(a, b * (a.sum() / b.sum()), m, 100000, 1, None, None)[1])

    return solve


class Documents:
    """Distinct texts as nBOW histograms over a shared table of (normalised) word vectors."""

    def __init__(self, ids: list[np.ndarray], vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.words: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []
        for doc in ids:
            words, counts = np.unique(doc, return_counts=True)
            self.words.append(words)
            self.weights.append(counts / max(len(doc), 1))
        self.solve = _solver()
        self._memo: dict[tuple[int, int], float] = {}

    def distance(self, i: int, j: int) -> float:
        """WMD between documents ``i`` and ``j`` (gensim's semantics, see the module doc)."""
        key = (i, j)
        if key not in self._memo:
            self._memo[key] = self._distance(i, j)
        return self._memo[key]

    def _distance(self, i: int, j: int) -> float:
        wi, wj = self.words[i], self.words[j]
        if not len(wi) or not len(wj):
            return float("inf")
        if len(wi) == 1 and len(wj) == 1 and wi[0] == wj[0]:
            return 0.0
        cost = _cdist(self.vectors[wi], self.vectors[wj])
        if abs(cost.sum()) < ZERO_COST:
            return float("inf")
        a, b = self.weights[i], self.weights[j]
        if len(wi) == 1:
            return float(cost[0] @ b)
        if len(wj) == 1:
            return float(a @ cost[:, 0])
        return self.solve(a, b, cost)


def _cdist(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.spatial.distance import cdist

    return cdist(x, y)


class WMD(Distance):
    """Word Mover's Distance; as a metric exp(−d/σ), max over references (coco-caption's WMD).

    Args:
        embedder: static word vectors (default: GloVe 6B 50d).
        tokenizer: how texts become words (default: PTB, lower-cased, punctuation removed).
        stopwords: remove NLTK's English stop words first (as the coco-caption scorer does).
        normalize: L2-normalise word vectors (gensim ≥ 4's default; gensim 3 used raw vectors).
        sigma: σ of the similarity exp(−d/σ).
        infinity: replace infinite distances (a side without known words) by this value, e.g.
            1000 as NNEval does; none keeps +inf (similarity 0).
    """

    name = "wmd"
    accepts_empty_candidates = True  # an empty side is at distance +inf: score 0
    higher_is_better = True
    requires = ("embeddings",)

    def __init__(
        self,
        embedder: Embedder = GLOVE,
        tokenizer: Tokenizer = PTB,
        stopwords: bool = True,
        normalize: bool = True,
        sigma: float = 1.0,
        infinity: float | None = None,
    ) -> None:
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.stopwords = stopwords
        self.normalize = normalize
        self.sigma = sigma
        self.infinity = infinity

    def documents(self, texts: Sequence[str]) -> Documents:
        """The nBOW documents of ``texts`` (tokenized, stop words removed, words embedded)."""
        ids, vectors = vocabulary(
            self.embedder, content_words(self.tokenizer, texts, self.stopwords)
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        if self.normalize and len(vectors):
            vectors = vectors / np.linalg.norm(vectors, axis=1)[:, None]
        return Documents(ids, vectors.astype(np.float64))

    def _finite(self, d: np.ndarray) -> np.ndarray:
        return d if self.infinity is None else np.where(np.isinf(d), self.infinity, d)

    def distances(self, candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
        """WMD of each (candidate, reference) pair."""
        texts, cand, refs, _ = flatten(candidates, [[r] for r in references])
        docs = self.documents(texts)
        return self._finite(
            np.array([docs.distance(i, j) for i, j in zip(cand, refs)], dtype=float)
        )

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        texts, cand, refs, offsets = flatten(candidates, references)
        docs = self.documents(texts)
        owner = np.repeat(cand, np.diff(offsets))
        slots = self._finite(
            np.array([docs.distance(i, j) for i, j in zip(owner, refs)], dtype=float)
        )
        nearest = np.minimum.reduceat(slots, offsets[:-1]) if len(slots) else np.zeros(0)
        values = np.exp(-nearest / self.sigma)
        corpus = float(values.mean()) if len(values) else float("nan")
        return Scores(values, corpus, {"distance": nearest, "per_reference_distance": slots})

    def to_distance(self, values: np.ndarray) -> np.ndarray:
        """Similarities back to distances: −σ·log(s) (+inf for 0)."""
        with np.errstate(divide="ignore"):
            return -self.sigma * np.log(np.asarray(values, dtype=float))

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """The raw WMD matrix d(a_i, b_j) (infinite where a side has no known word, unless
        ``infinity`` is set)."""
        position = {t: k for k, t in enumerate(dict.fromkeys([*a, *b]))}
        docs = self.documents(list(position))
        out = np.array(
            [[docs.distance(position[x], position[y]) for y in b] for x in a], dtype=float
        )
        return self._finite(out.reshape(len(a), len(b)))
