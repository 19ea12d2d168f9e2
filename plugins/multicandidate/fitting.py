"""Fitting a statistic's distance on the corpus references, whole or in parts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from capmetrics import Distance
from capmetrics.components.protocols import CountsInParts, FitsInParts, parts_in_parent, supports


class FitsDistance:
    """For statistics over a ``distance``: :meth:`fit` fits it on every item's references.

    The statistic takes part in the statistics protocol (:mod:`capmetrics.components.protocols`)
    through its distance: it has the methods of
    :class:`~capmetrics.components.protocols.FitsInParts` and
    :class:`~capmetrics.components.protocols.CountsInParts`, and :meth:`supports_protocol` says
    whether its distance supports them (CIDEr-D's document frequencies are sums over items), so the
    executor computes the parts on its workers and :meth:`fit_states` joins them.
    """

    distance: Distance

    def fit(self, references: Sequence[Sequence[str]]) -> Any:
        """Fit the distance's corpus statistics on every item's references."""
        self.distance.fit(references)
        return self

    def supports_protocol(self, protocol: type) -> bool:
        """:class:`~capmetrics.components.protocols.Delegates`: fitting in parts, in either form, is
        supported as far as the distance supports it."""
        if protocol is FitsInParts:
            return self.fits_in_parts
        if protocol is CountsInParts:
            return self.counts_in_parts
        return True

    @property
    def parts_in_parent(self) -> bool:
        """Whether the distance's parts need this process (a model: BERTScore's idf)."""
        return parts_in_parent(self.distance)

    @property
    def fits_in_parts(self) -> bool:
        """Whether the distance fits in parts
        (:class:`~capmetrics.components.protocols.FitsInParts`)."""
        return supports(self.distance, FitsInParts)

    def fit_state(self, references: Sequence[Sequence[str]]) -> Any:
        """The distance's corpus statistics of one part of the references."""
        return self.distance.fit_state(references)  # type: ignore[attr-defined]

    def merge_fit_states(self, states: Iterable[Any]) -> Any:
        """The sum of parts' :meth:`fit_state` (the distance's)."""
        return self.distance.merge_fit_states(states)  # type: ignore[attr-defined]

    def fit_states(self, states: Iterable[Any]) -> Any:
        """Fit the distance from the parts' :meth:`fit_state` (as :meth:`fit` on all of them)."""
        self.distance.fit_states(states)  # type: ignore[attr-defined]
        return self

    @property
    def counts_in_parts(self) -> bool:
        """Whether the distance has the compact form of fitting in parts
        (:class:`~capmetrics.components.protocols.CountsInParts`: CIDEr-D's frequencies as integer
        arrays, cheap to send between processes)."""
        return supports(self.distance, CountsInParts)

    def count_state(self, references: Sequence[Sequence[str]]) -> Any:
        """The distance's compact :meth:`fit_state` of one part of the references."""
        return self.distance.count_state(references)  # type: ignore[attr-defined]

    def fit_counts(self, states: Iterable[Any]) -> Any:
        """Fit the distance from the parts' :meth:`count_state` (as :meth:`fit` on all of them)."""
        self.distance.fit_counts(states)  # type: ignore[attr-defined]
        return self
