"""Tokenizers: ``whitespace`` (split on whitespace, no other change), the PTB tokenizers, the
segmenters for Chinese, Japanese and Korean (``jieba``, ``mecab``, ``sudachi``, ``kiwi``) and
``char`` (one token per character, any script).

``ptb`` reproduces coco-caption's tokenization in pure Python; ``ptb-jar`` runs the Stanford
CoreNLP 3.4.1 jar that pycocoevalcap ships, as coco-caption does. Both are English-only
(``languages = ("en",)``). The segmenters are in :mod:`.cjk` and :mod:`.char`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from capmetrics import Tokenizer, hookimpl
from capmetrics.errors import MetricError
from capmetrics.plugins.java import find_java, pycocoevalcap_folder, run_with_retries
from capmetrics.plugins.tokenizers import ptb as _ptb
from capmetrics.plugins.tokenizers.char import CharTokenizer
from capmetrics.plugins.tokenizers.cjk import (
    JiebaTokenizer,
    KiwiTokenizer,
    MecabTokenizer,
    SudachiTokenizer,
)

JAR_NAME = "stanford-corenlp-3.4.1.jar"


class WhitespaceTokenizer(Tokenizer):
    """Split on whitespace only, for text that is tokenized already (``str.split()``): what
    pycocoevalcap's scorers do with text segmented beforehand (the pycocoevalcap-cn convention:
    ``" ".join(jieba.lcut(caption))``). Case and punctuation are kept unless ``lowercase``."""

    name = "whitespace"
    whitespace_free_tokens = True

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        if self.lowercase:
            return [t.lower().split() for t in texts]
        return [t.split() for t in texts]


class PTBTokenizer(Tokenizer):
    """coco-caption's tokenization (PTBTokenizer jar, lower-casing, punctuation removal) in pure
    Python.

    Token for token equal to pycocoevalcap's ``PTBTokenizer`` on caption text, with no Java. As in
    coco-caption, the ``-lrb-``/``-rrb-`` bracket tokens and runs like ``!!`` are kept, and a
    fraction such as "1 1/2" is one token containing a non-breaking space. Like the jar, the tokens
    of a caption ending in a one-letter acronym ("... I.") depend on the first word of the next
    caption of the batch.
    """

    name = "ptb"
    languages = ("en",)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return _ptb.tokenize(texts)


class PTBJarTokenizer(Tokenizer):
    """coco-caption's tokenization run by the CoreNLP 3.4.1 jar shipped with pycocoevalcap (needs
    Java).

    One JVM call per :meth:`tokenize` batch; the input file goes to a temporary directory.
    Line breaks inside a caption become spaces (coco-caption does this for ``\\n`` only).
    """

    name = "ptb-jar"
    requires = ("coco",)  # the jar pycocoevalcap installs
    languages = ("en",)
    program_params = ("java",)

    def __init__(self, java: str | None = None) -> None:
        self.java = java

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        if not texts:
            return []
        java = find_java(self.java)
        lines = _ptb.split_lines(texts)
        with tempfile.TemporaryDirectory(prefix="capmetrics-ptb-") as tmp:
            path = Path(tmp) / "captions.txt"
            path.write_text("\n".join(lines), encoding="utf-8")
            output = self._run(java, path)
        out_lines = output.split("\n")
        out_lines += [""] * (len(lines) - len(out_lines))
        return [
            [w for w in line.rstrip().split(" ") if w and w not in _ptb.PUNCTUATION]
            for line in out_lines[: len(lines)]
        ]

    @staticmethod
    def _run(java: str, path: Path) -> str:
        cmd = [
            java,
            "-Dfile.encoding=UTF-8",
            "-cp",
            str(_jar_path()),
            "edu.stanford.nlp.process.PTBTokenizer",
            "-preserveLines",
            "-lowerCase",
            str(path),
        ]
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        proc = run_with_retries(cmd, "the PTBTokenizer jar", env=env)
        if proc.returncode != 0:
            raise MetricError(
                f"the PTBTokenizer jar failed (exit {proc.returncode}): "
                f"{proc.stderr.decode(errors='replace')[-500:]}"
            )
        return proc.stdout.decode("utf-8")


def _jar_path() -> Path:
    """The CoreNLP jar inside the installed pycocoevalcap package."""
    jar = pycocoevalcap_folder("tokenizer", "tokenizer 'ptb-jar'") / JAR_NAME
    if not jar.is_file():
        raise MetricError(
            f"{JAR_NAME} is missing from the pycocoevalcap package ({jar}); reinstall pycocoevalcap"
        )
    return jar


@hookimpl
def register_tokenizers(register: Callable[..., None]) -> None:
    register(WhitespaceTokenizer)
    register(PTBTokenizer)
    register(PTBJarTokenizer)
    for segmenter in (
        JiebaTokenizer,
        MecabTokenizer,
        SudachiTokenizer,
        KiwiTokenizer,
        CharTokenizer,
    ):
        register(segmenter)
