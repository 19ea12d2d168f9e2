"""Input rules shared by ``meteor`` and ``meteor-jar``: how a caption becomes one SCORE field.

Captions are tokenized, ``|||`` is removed (as coco-caption does for hypotheses) and whitespace
(newlines included) collapses to single spaces; a caption longer than ``max_tokens`` tokens keeps
its first ``max_tokens``, with one warning per call.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from capmetrics import Tokenizer


def clean_segment(tokens: Sequence[str], max_tokens: int | None) -> tuple[str, bool]:
    """One caption as the jar reads it (no ``|||``, single spaces); True if it was truncated."""
    words = " ".join(tokens).replace("|||", "").split()
    if max_tokens is not None and len(words) > max_tokens:
        return " ".join(words[:max_tokens]), True
    return " ".join(words), False


def segmenter(
    tokenizer: Tokenizer, texts: Sequence[str], max_tokens: int | None, metric: str
) -> Callable[[str], str]:
    """Tokenize the distinct ``texts`` once; return text -> cleaned segment (warns on
    truncation)."""
    distinct = list(dict.fromkeys(texts))
    cleaned = [clean_segment(t, max_tokens) for t in tokenizer.tokenize_shared(distinct)]
    cut = sum(truncated for _, truncated in cleaned)
    if cut:
        warnings.warn(
            f"{metric}: {cut} caption(s) longer than max_tokens={max_tokens} tokens were truncated",
            UserWarning,
            stacklevel=4,
        )
    table = {t: seg for t, (seg, _) in zip(distinct, cleaned)}
    return table.__getitem__
