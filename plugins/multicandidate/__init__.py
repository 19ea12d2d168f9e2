"""The multi-candidate family: statistics over an item's candidate set and reference set.

Modules: ``trm`` (triangle-rank metrics over any distance), ``kernels`` (MMD and Fréchet over
any embedder), ``over_candidates`` (a classic metric reduced over the candidates, the naive
baseline). Their permutation p-values come from :mod:`capmetrics.components.permutation`.

Public for other families: :class:`EmbeddingStatistic`, the base of statistics over an
item's pooled embeddings (MAUVE builds on it).
"""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl
from capmetrics.plugins.multicandidate.kernels import MMD, EmbeddingStatistic, Frechet
from capmetrics.plugins.multicandidate.over_candidates import OverCandidates
from capmetrics.plugins.multicandidate.trm import TRM

__all__ = ["MMD", "TRM", "EmbeddingStatistic", "Frechet", "OverCandidates", "register_statistics"]


@hookimpl
def register_statistics(register: Callable[..., None]) -> None:
    register(TRM, aliases=("triangle-rank",))
    register(MMD, aliases=("mmd-bert",))
    register(Frechet, aliases=("frechet-bert", "fbd"))
    register(OverCandidates)
