"""capmetrics-chrf: the chrF metric (Popović 2015) as a capmetrics plugin.

Installing the distribution is all it takes: its entry point ``chrf`` in group ``capmetrics``
names this module, whose :func:`register_distances` hook registers :class:`ChrF`.
"""

from __future__ import annotations

from collections.abc import Callable

from capmetrics import hookimpl

from capmetrics_chrf.metric import ChrF

__all__ = ["ChrF", "register_distances"]


@hookimpl
def register_distances(register: Callable[..., None]) -> None:
    """Register chrF (and chrF++, its ``word_order=2`` setting)."""
    register(ChrF)
