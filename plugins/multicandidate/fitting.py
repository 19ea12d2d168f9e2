"""Fitting a statistic's distance on the corpus references, whole or in parts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from capmetrics import Distance


class FitsDistance:
    """For statistics over a ``distance``: :meth:`fit` fits it on every item's references; when
    the distance can fit in parts (CIDEr-D's document frequencies are sums over items), the
    executor computes the parts on its workers and :meth:`fit_states` joins them."""

    distance: Distance

    def fit(self, references: Sequence[Sequence[str]]) -> Any:
        """Fit the distance's corpus statistics on every item's references."""
        self.distance.fit(references)
        return self

    @property
    def fits_in_parts(self) -> bool:
        """Whether the distance has ``fit_state`` / ``fit_states`` (fitting in parts)."""
        return callable(getattr(self.distance, "fit_state", None)) and callable(
            getattr(self.distance, "fit_states", None))

    def fit_state(self, references: Sequence[Sequence[str]]) -> Any:
        """The distance's corpus statistics of one part of the references."""
        return self.distance.fit_state(references)  # type: ignore[attr-defined]

    def fit_states(self, states: Iterable[Any]) -> Any:
        """Fit the distance from the parts' :meth:`fit_state` (as :meth:`fit` on all of them)."""
        self.distance.fit_states(states)  # type: ignore[attr-defined]
        return self

    @property
    def counts_in_parts(self) -> bool:
        """Whether the distance has the compact form of fitting in parts (``count_state`` /
        ``fit_counts``: CIDEr-D's frequencies as integer arrays, cheap to send between processes)."""
        return callable(getattr(self.distance, "count_state", None)) and callable(
            getattr(self.distance, "fit_counts", None))

    def count_state(self, references: Sequence[Sequence[str]]) -> Any:
        """The distance's compact :meth:`fit_state` of one part of the references."""
        return self.distance.count_state(references)  # type: ignore[attr-defined]

    def fit_counts(self, states: Iterable[Any]) -> Any:
        """Fit the distance from the parts' :meth:`count_state` (as :meth:`fit` on all of them)."""
        self.distance.fit_counts(states)  # type: ignore[attr-defined]
        return self
