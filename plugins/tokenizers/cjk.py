"""Segmenters for Chinese (``jieba``), Japanese (``mecab``, ``sudachi``) and Korean (``kiwi``),
each with its dictionary from PyPI (extras ``zh``, ``ja``, ``ko``; ``cjk`` installs all).

Each states its library version and dictionary in the signature; none prints anything; each
segments every distinct text once per instance (:class:`~._segmenter.Segmenter`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from capmetrics.errors import MetricError
from capmetrics.io import digests
from capmetrics.io.cache import component_cache
from capmetrics.plugins.tokenizers._segmenter import (
    Normalize,
    Punctuation,
    Segmenter,
    logger_silenced,
    require,
    version,
)


def file_digest(path: str) -> str:
    """The first 16 hex digits of the sha256 of a file (a dictionary's identity)."""
    return digests.file_digest(path)[:16]


class JiebaTokenizer(Segmenter):
    """Chinese words by jieba (its bundled dictionary; HMM for unknown words), as
    ``jieba.lcut``: the COCO-CN / AIC-ICC convention of pycocoevalcap-cn.

    Runs its own ``jieba.Tokenizer`` (words a program adds to jieba's global one do not change
    the scores), keeps jieba's prefix-dictionary cache under the capmetrics cache folder
    (``jieba/``, named by the dictionary's checksum) and silences jieba's log while it loads.
    Punctuation is kept and case too by default, as ``jieba.lcut`` gives them.
    """

    name = "jieba"
    requires = ("zh",)
    languages = ("zh",)
    packages = ("jieba",)

    def __init__(
        self,
        hmm: bool = True,
        normalize: Normalize = "none",
        lowercase: bool = False,
        punctuation: Punctuation = "keep",
    ) -> None:
        self.hmm = hmm
        self.normalize = normalize
        self.lowercase = lowercase
        self.punctuation = punctuation
        self._check_options()

    @staticmethod
    def _dict_path() -> str:
        jieba = require("jieba", "jieba", "zh", "jieba")
        return os.path.join(os.path.dirname(jieba.__file__), "dict.txt")

    def _load(self) -> Any:
        jieba = require("jieba", "jieba", "zh", "jieba")
        tokenizer = jieba.Tokenizer()
        folder = component_cache("jieba")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tokenizer.tmp_dir = str(folder)
            tokenizer.cache_file = f"jieba-{file_digest(self._dict_path())}.cache"
        except OSError:  # no writable cache folder: jieba builds its prefix dictionary each time
            tokenizer.tmp_dir = None
            tokenizer.cache_file = None
        with logger_silenced(jieba.default_logger):
            tokenizer.initialize()
        return tokenizer

    def _segment(self, texts: list[str]) -> list[list[str]]:
        tokenizer = self._loaded("_jieba", self._load)
        jieba = require("jieba", "jieba", "zh", "jieba")
        with logger_silenced(jieba.default_logger):
            return [tokenizer.lcut(t, HMM=self.hmm) for t in texts]

    def dictionary_signature(self) -> dict[str, str]:
        return {"dictionary": f"jieba dict.txt sha256:{file_digest(self._dict_path())}"}


MecabDictionary = Literal["unidic-lite", "ipadic"]
#: dictionary name -> (module, distribution)
_MECAB_DICTS = {"unidic-lite": ("unidic_lite", "unidic-lite"), "ipadic": ("ipadic", "ipadic")}


class MecabTokenizer(Segmenter):
    """Japanese words by MeCab through fugashi: the surface forms of its parse (what
    ``[w.surface for w in fugashi.Tagger()(text)]`` gives), with UniDic-lite (default) or
    IPAdic, the dictionary STAIR Captions' tokenization used.

    Both dictionaries install from PyPI with the ``ja`` extra; the one chosen is named with its
    version in the signature, whatever other MeCab dictionary the machine has.
    """

    name = "mecab"
    requires = ("ja",)
    languages = ("ja",)
    packages = ("fugashi",)

    def __init__(
        self,
        dictionary: MecabDictionary = "unidic-lite",
        normalize: Normalize = "none",
        lowercase: bool = False,
        punctuation: Punctuation = "keep",
    ) -> None:
        self.dictionary = dictionary  # type: ignore[assignment]
        self.normalize = normalize
        self.lowercase = lowercase
        self.punctuation = punctuation
        if dictionary not in _MECAB_DICTS:
            raise ValueError(
                f"dictionary must be one of {', '.join(_MECAB_DICTS)}, got {dictionary!r}"
            )
        self._check_options()

    def _load(self) -> Any:
        fugashi = require("fugashi", "mecab", "ja", "fugashi")
        module, dist = _MECAB_DICTS[str(self.dictionary)]
        dic = require(module, "mecab", "ja", dist)
        folder = Path(dic.DICDIR)
        args = f'-Owakati -r "{folder / "mecabrc"}" -d "{folder}"'
        if module == "ipadic":
            return fugashi.GenericTagger(args)
        return fugashi.Tagger(args)

    def _segment(self, texts: list[str]) -> list[list[str]]:
        tagger = self._loaded("_tagger", self._load)
        return [tagger.parse(t).split() for t in texts]

    def signature_extra(self) -> dict[str, str]:
        _module, dist = _MECAB_DICTS[str(self.dictionary)]
        return {"fugashi": version("fugashi"), "dictionary": f"{dist} {version(dist)}"}


SplitMode = Literal["A", "B", "C"]


class SudachiTokenizer(Segmenter):
    """Japanese words by SudachiPy with the sudachidict-core dictionary, in split mode A
    (shortest units, close to UniDic's short words; default), B or C (named entities and
    compounds whole, SudachiPy's own default). Surface forms, as the text writes them."""

    name = "sudachi"
    requires = ("ja",)
    languages = ("ja",)
    packages = ("sudachipy",)

    def __init__(
        self,
        mode: SplitMode = "A",
        normalize: Normalize = "none",
        lowercase: bool = False,
        punctuation: Punctuation = "keep",
    ) -> None:
        self.mode = mode
        self.normalize = normalize
        self.lowercase = lowercase
        self.punctuation = punctuation
        if mode not in ("A", "B", "C"):
            raise ValueError(f"mode must be A, B or C, got {mode!r}")
        self._check_options()

    def _load(self) -> Any:
        sudachipy = require("sudachipy", "sudachi", "ja", "sudachipy")
        require("sudachidict_core", "sudachi", "ja", "sudachidict-core")
        return sudachipy.Dictionary(dict="core").tokenizer(mode=self.mode)

    def _segment(self, texts: list[str]) -> list[list[str]]:
        tokenizer = self._loaded("_sudachi", self._load)
        out = []
        for i, text in enumerate(texts):
            try:
                out.append([m.surface() for m in tokenizer.tokenize(text)])
            except Exception as err:  # SudachiError: input too long, for one
                raise MetricError(
                    f"sudachi cannot segment text {i} ({text[:40]!r}...): {err}"
                ) from err
        return out

    def dictionary_signature(self) -> dict[str, str]:
        return {"dictionary": f"sudachidict-core {version('sudachidict-core')}"}


class KiwiTokenizer(Segmenter):
    """Korean morphemes by Kiwi (kiwipiepy and its bundled model): each token is a morpheme's
    form, so a contracted syllable gives its morphemes (``했다`` -> ``하``, ``었``, ``다``), as
    morpheme-level Korean scoring (mecab-ko's ``morphs``) splits words."""

    name = "kiwi"
    requires = ("ko",)
    languages = ("ko",)
    packages = ("kiwipiepy",)

    def _load(self) -> Any:
        kiwipiepy = require("kiwipiepy", "kiwi", "ko", "kiwipiepy")
        return kiwipiepy.Kiwi(num_workers=1)

    def _segment(self, texts: list[str]) -> list[list[str]]:
        kiwi = self._loaded("_kiwi", self._load)
        return [[t.form for t in tokens] for tokens in kiwi.tokenize(texts)]

    def dictionary_signature(self) -> dict[str, str]:
        return {"dictionary": f"kiwipiepy-model {version('kiwipiepy-model')}"}
