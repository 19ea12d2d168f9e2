"""The n-gram family: BLEU-1..4, ROUGE-L, CIDEr-D (also ``cider``: coco-caption's CIDEr) and the
original CIDEr (``cider-original``) with coco-caption's numbers.

Modules: ``bleu``, ``rouge``, ``cider`` (the components) and ``counts`` (public: batched
n-gram counting and :class:`~capmetrics.plugins.ngram.counts.BatchDistance`, the base of
vectorised n-gram distances that plugin authors may reuse).
"""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl
from capmetrics.plugins.ngram.bleu import Bleu1, Bleu2, Bleu3, Bleu4
from capmetrics.plugins.ngram.cider import Cider, CiderD
from capmetrics.plugins.ngram.rouge import RougeL


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    # pycocoevalcap's names (Bleu_4, ROUGE_L, CIDEr...) normalise to these; its "CIDEr" is CIDEr-D.
    for cls in (Bleu1, Bleu2, Bleu3, Bleu4, RougeL):
        register(cls)
    register(CiderD, aliases=("cider",))
    register(Cider, aliases=("cider-vedantam",))
