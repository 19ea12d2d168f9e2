"""Tokenizers: ``whitespace`` (split on whitespace, no other change) and the PTB tokenizers."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from capmetrics import Tokenizer, hookimpl


class WhitespaceTokenizer(Tokenizer):
    """Split on whitespace only, for text that is tokenized already (``str.split()``)."""

    name = "whitespace"

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        if self.lowercase:
            return [t.lower().split() for t in texts]
        return [t.split() for t in texts]


@hookimpl
def register_tokenizers(register: Callable[..., None]) -> None:
    register(WhitespaceTokenizer)
