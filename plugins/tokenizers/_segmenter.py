"""The shared part of the segmenting tokenizers (``jieba``, ``mecab``, ``sudachi``, ``kiwi``,
``char``): optional Unicode normalization, one segmenter call per distinct text (cached),
whitespace never a token, and the same case and punctuation options everywhere.

Order of work, for every text: NFKC (``normalize="nfkc"`` only) -> the segmenter ->
tokens split on whitespace (so no token holds a space and none is empty) -> punctuation
tokens dropped (``punctuation="remove"`` only) -> lower-casing (``lowercase=True`` only).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, ClassVar, Literal

from capmetrics import Tokenizer
from capmetrics.errors import MetricError
from capmetrics.io.models import installed_version

Normalize = Literal["none", "nfkc"]
Punctuation = Literal["keep", "remove"]

#: Distinct texts kept per tokenizer instance before the cache starts over (bounded memory in a
#: long-lived process such as a training loop).
CACHE_LIMIT = 1 << 18


def version(dist: str) -> str:
    """The installed version of distribution ``dist``, or ``"unknown"``."""
    return installed_version(dist)


def require(module: str, tokenizer: str, extra: str, packages: str) -> ModuleType:
    """Import ``module`` or raise a one-line MetricError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MetricError(
            f"tokenizer '{tokenizer}' needs {packages}: pip install 'capmetrics[{extra}]'"
        ) from err


def is_punctuation(token: str) -> bool:
    """True when every character of ``token`` is Unicode punctuation (categories P*)."""
    return all(unicodedata.category(ch).startswith("P") for ch in token)


class Segmenter(Tokenizer):
    """Base of the segmenting tokenizers; subclasses implement :meth:`_segment`.

    Parameters shared by every subclass (in this order, after the subclass's own):
    ``normalize`` (``"none"`` or ``"nfkc"``: Unicode NFKC before segmenting, which turns
    full-width Latin letters, digits and punctuation such as ``，`` into their ASCII forms and
    half-width katakana into full-width; ``。`` and ``、`` have no NFKC form and stay),
    ``lowercase`` (lower-case the tokens; off by default: the CJK conventions keep case) and
    ``punctuation`` (``"keep"``, the convention of pycocoevalcap-cn and STAIR, or ``"remove"``:
    drop tokens made only of Unicode punctuation).
    """

    whitespace_free_tokens = True
    #: Distribution names whose versions go into the signature.
    packages: ClassVar[tuple[str, ...]] = ()

    normalize: Normalize
    lowercase: bool
    punctuation: Punctuation

    def __init__(
        self,
        normalize: Normalize = "none",
        lowercase: bool = False,
        punctuation: Punctuation = "keep",
    ) -> None:
        self.normalize = normalize
        self.lowercase = lowercase
        self.punctuation = punctuation
        self._check_options()

    def _check_options(self) -> None:
        if self.normalize not in ("none", "nfkc"):
            raise ValueError(f"normalize must be 'none' or 'nfkc', got {self.normalize!r}")
        if self.punctuation not in ("keep", "remove"):
            raise ValueError(f"punctuation must be 'keep' or 'remove', got {self.punctuation!r}")

    # -- what subclasses provide --------------------------------------------------------------
    def _segment(self, texts: list[str]) -> list[list[str]]:
        """The segmenter's raw tokens of each (normalized) text."""
        raise NotImplementedError

    def dictionary_signature(self) -> dict[str, str]:
        """Signature entries naming the segmenter's dictionary or model."""
        return {}

    # -- shared machinery ---------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        cache = self._cache()
        todo = list(dict.fromkeys(t for t in texts if t not in cache))
        if todo:
            if len(cache) + len(todo) > CACHE_LIMIT:
                cache.clear()
            prepared = [
                unicodedata.normalize("NFKC", t) if self.normalize == "nfkc" else t for t in todo
            ]
            with self._lock():
                segmented = self._segment(prepared)
            for text, raw in zip(todo, segmented):
                cache[text] = self._finish(raw)
        return [list(cache[t]) for t in texts]

    def _finish(self, raw: list[str]) -> tuple[str, ...]:
        tokens = [part for token in raw for part in token.split()]
        if self.punctuation == "remove":
            tokens = [t for t in tokens if not is_punctuation(t)]
        if self.lowercase:
            tokens = [t.lower() for t in tokens]
        return tuple(tokens)

    def _cache(self) -> dict[str, tuple[str, ...]]:
        cache = self.__dict__.get("_tokens")
        if cache is None:
            cache = self.__dict__["_tokens"] = {}
        return cache  # type: ignore[no-any-return]

    def _lock(self) -> threading.Lock:
        lock = self.__dict__.get("_segment_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_segment_lock", threading.Lock())
        return lock  # type: ignore[no-any-return]

    def _loaded(self, key: str, load: Any) -> Any:
        """The segmenter object stored under ``key``, built once by ``load()``."""
        value = self.__dict__.get(key)
        if value is None:
            value = self.__dict__[key] = load()
        return value

    def signature_extra(self) -> dict[str, str]:
        sig = {dist: version(dist) for dist in self.packages}
        sig.update(self.dictionary_signature())
        return sig

    def __getstate__(self) -> dict[str, Any]:
        # the segmenter, its cache and the lock are rebuilt lazily wherever the copy runs
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


@contextlib.contextmanager
def logger_silenced(logger: Any) -> Iterator[None]:
    """Disable one :mod:`logging` logger for the duration (its previous state restored)."""
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before
