"""The embeddings family: word and sentence embedders and the metrics built on them.

Modules: ``embedders`` (GloVe, word2vec, fastText, spaCy vectors), ``bow`` (bag of words),
``clip`` (a CLIP text tower), ``elmo``, ``sentence`` (sentence-transformers),
``vectors`` (public: memory-mapped vector tables and their cache), ``text`` (public: content
words, mean vectors, cosines), ``spacy_vectors``, ``stopwords``, and the
metrics ``wmd`` (Word Mover's Distance) and ``wembsim`` (WEmbSim, embedding cosine).
"""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl
from capmetrics.plugins.embeddings.bow import BagOfWordsEmbedder
from capmetrics.plugins.embeddings.clip import ClipTextEmbedder
from capmetrics.plugins.embeddings.elmo import ElmoEmbedder
from capmetrics.plugins.embeddings.embedders import (
    FastTextEmbedder,
    GloveEmbedder,
    SpacyVectorsEmbedder,
    Word2VecEmbedder,
)
from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder
from capmetrics.plugins.embeddings.wembsim import EmbeddingCosine, WEmbSim
from capmetrics.plugins.embeddings.wmd import WMD


@hookimpl
def register_embedders(register: Callable[..., None]) -> None:
    for cls in (
        GloveEmbedder,
        Word2VecEmbedder,
        FastTextEmbedder,
        SpacyVectorsEmbedder,
        ElmoEmbedder,
    ):
        register(cls)
    register(SentenceTransformerEmbedder, aliases=("sentence-transformer",))
    register(BagOfWordsEmbedder)
    register(ClipTextEmbedder)


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    for cls in (WMD, WEmbSim, EmbeddingCosine):
        register(cls)
