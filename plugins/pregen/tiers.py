"""The four tiers of pre-gen metrics, their table, and composition names.

Tier 1 (:class:`TokenFilter`) picks positions of each reference caption, tier 2
(:class:`SentenceScore`) turns the kept probabilities into one score per caption, tiers 3 and 4
are registered ``aggregator`` components (plus ``join`` at tier 3). A composition is named
``tier4_tier3_tier2_tier1``, e.g. ``mean_max_normcount_prefix0``.

Both base classes work on every caption and every filter at once: filters return one boolean
per position, scores take a positions × filters mask and return a captions × filters matrix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from capmetrics import Aggregator, Component
from capmetrics.errors import PluginError, SpecError, did_you_mean
from capmetrics.registry.spec import normalize_name

if TYPE_CHECKING:
    from capmetrics.plugins.pregen.compute import RaggedProbs

#: Tier 3 option that concatenates all caption scores instead of reducing per item.
JOIN = "join"


class TokenFilter(Component):
    """Tier 1: choose which positions (END included) of each reference a sentence score sees."""

    kind = "pregen-filter"

    def keep(self, probs: RaggedProbs) -> np.ndarray:
        """A boolean per position of ``probs``: True where the position is kept."""
        raise NotImplementedError


class SentenceScore(Component):
    """Tier 2: one score per reference caption from its kept probabilities."""

    kind = "pregen-score"

    def score(self, probs: RaggedProbs, keep: np.ndarray) -> np.ndarray:
        """Scores of every caption under every filter.

        Args:
            probs: the probabilities; ``probs.p`` has one entry per position.
            keep: positions × filters boolean mask.

        Returns:
            captions × filters float array.
        """
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# tier 1
# --------------------------------------------------------------------------------------------
class NoFilter(TokenFilter):
    """Keep every position."""

    name = "none"

    def keep(self, probs: RaggedProbs) -> np.ndarray:
        return np.ones(len(probs.p), dtype=bool)


class TopFilter(TokenFilter):
    """Keep the positions whose reference token was the model's top choice (the paper's filter0)."""

    name = "filter0"

    def keep(self, probs: RaggedProbs) -> np.ndarray:
        return probs.top.copy()


class NonTopFilter(TokenFilter):
    """Keep the positions whose reference token was not the top choice (the released code's
    filter0)."""

    name = "nonmax"

    def keep(self, probs: RaggedProbs) -> np.ndarray:
        return ~probs.top


class TopPrefixFilter(TokenFilter):
    """Keep the longest prefix of positions whose reference token was the top choice."""

    name = "prefix0"

    def keep(self, probs: RaggedProbs) -> np.ndarray:
        miss = (~probs.top).astype(np.int64)
        misses = np.cumsum(miss)
        before = misses[probs.starts] - miss[probs.starts]  # misses before each caption
        return misses - np.repeat(before, probs.lengths) == 0


# --------------------------------------------------------------------------------------------
# tier 2
# --------------------------------------------------------------------------------------------
def _caption_sums(probs: RaggedProbs, values: np.ndarray) -> np.ndarray:
    """Per-caption sums of a positions × filters array (captions are never empty)."""
    return np.add.reduceat(values, probs.starts, axis=0)


class Prob(SentenceScore):
    """Product of the kept probabilities; 0 for an empty selection."""

    name = "prob"

    def score(self, probs: RaggedProbs, keep: np.ndarray) -> np.ndarray:
        factors = np.where(keep, probs.p[:, None], 1.0)
        product = np.multiply.reduceat(factors, probs.starts, axis=0)
        return np.where(_caption_sums(probs, keep) > 0, product, 0.0)


class Perplexity(SentenceScore):
    """Base-2 perplexity of the kept probabilities; +inf for an empty selection or a kept 0."""

    name = "pplx"

    def score(self, probs: RaggedProbs, keep: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            logs = np.where(keep, np.log2(probs.p)[:, None], 0.0)
            count = _caption_sums(probs, keep)
            out = 2.0 ** (-_caption_sums(probs, logs) / count)
        return np.where(count > 0, out, np.inf)


class Count(SentenceScore):
    """Number of kept positions."""

    name = "count"

    def score(self, probs: RaggedProbs, keep: np.ndarray) -> np.ndarray:
        return _caption_sums(probs, keep).astype(float)


class NormCount(SentenceScore):
    """Number of kept positions divided by the caption's length (words + END)."""

    name = "normcount"

    def score(self, probs: RaggedProbs, keep: np.ndarray) -> np.ndarray:
        return _caption_sums(probs, keep) / probs.lengths[:, None].astype(float)


# --------------------------------------------------------------------------------------------
# the tier table
# --------------------------------------------------------------------------------------------
PAPER_TIERS: dict[int, tuple[str, ...]] = {
    4: ("sum", "mean", "median", "geomean", "max", "min"),
    3: ("sum", "mean", "median", "geomean", "max", "min", JOIN),
    2: ("prob", "pplx", "count", "normcount"),
    1: ("none", "filter0", "prefix0"),
}

FILTERS: dict[str, type[TokenFilter]] = {}
SCORES: dict[str, type[SentenceScore]] = {}
#: aggregator names usable at tiers 3 and 4 (``join`` is added at tier 3 only).
REDUCTIONS: list[str] = []


def register_tier(tier: type[Component] | str) -> None:
    """Add a tier option; every composition enumerated afterwards picks it up.

    Args:
        tier: a :class:`TokenFilter` or :class:`SentenceScore` subclass, or an
            :class:`~capmetrics.Aggregator` subclass or registered aggregator name for tiers 3
            and 4 (the aggregator itself is registered with ``register_aggregators``).

    Registering the same class again does nothing; another class under a name already taken
    raises :class:`~capmetrics.errors.PluginError` naming both.
    """
    if isinstance(tier, type) and issubclass(tier, TokenFilter):
        table: dict = FILTERS
    elif isinstance(tier, type) and issubclass(tier, SentenceScore):
        table = SCORES
    elif isinstance(tier, str) or (isinstance(tier, type) and issubclass(tier, Aggregator)):
        name = normalize_name(tier if isinstance(tier, str) else tier.name)
        if name not in REDUCTIONS and name != JOIN:
            REDUCTIONS.append(name)
        return
    else:
        raise SpecError(
            f"{tier!r} is not a pre-gen tier (TokenFilter, SentenceScore or Aggregator)"
        )
    name = normalize_name(tier.name)
    old = table.get(name)
    if old is not None and old is not tier:
        raise PluginError(
            f"pre-gen tier name {name!r} is registered twice: "
            f"{old.__module__}.{old.__qualname__} and {tier.__module__}.{tier.__qualname__}"
        )
    table[name] = tier


for _cls in (
    NoFilter,
    TopFilter,
    TopPrefixFilter,
    NonTopFilter,
    Prob,
    Perplexity,
    Count,
    NormCount,
):
    register_tier(_cls)
for _name in PAPER_TIERS[4]:
    register_tier(_name)


#: hook that plugins implement to add tiers, once the core declares it (see docs/usage/pregen.md)
TIER_HOOK = "register_pregen_tiers"
_hooked: list[object] = []


def load_plugin_tiers() -> None:
    """Call every plugin's ``register_pregen_tiers(register)`` once per registry, if the hook
    is declared; ``register`` is :func:`register_tier`."""
    from capmetrics.registry import get_registry

    registry = get_registry()
    hook = getattr(registry.plugin_manager.hook, TIER_HOOK, None)
    if hook is None or any(seen is registry for seen in _hooked):
        return
    _hooked[:] = [registry]
    hook(register=register_tier)


def tier_options(level: int) -> tuple[str, ...]:
    """Every option currently known at tier ``level`` (1–4), paper ones first."""
    load_plugin_tiers()
    return {1: tuple(FILTERS), 2: tuple(SCORES), 3: (*REDUCTIONS, JOIN), 4: tuple(REDUCTIONS)}[
        level
    ]


# --------------------------------------------------------------------------------------------
# composition names
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Composition:
    """One pre-gen metric: the names of its four tiers."""

    tier4: str
    tier3: str
    tier2: str
    tier1: str

    @property
    def name(self) -> str:
        """``tier4_tier3_tier2_tier1``."""
        return "_".join((self.tier4, self.tier3, self.tier2, self.tier1))

    def __str__(self) -> str:
        return self.name


def parse_composition(name: str) -> Composition:
    """Parse ``tier4_tier3_tier2_tier1`` (``_`` or ``-`` between tiers; tier names may contain
    ``-``).

    Raises:
        SpecError: naming the part that is not a known option of its tier.
    """
    words = [w for w in re.split(r"[_\-\s]+", name.strip().lower()) if w]
    found = list(_splits(words, [4, 3, 2, 1]))
    if len(found) == 1:
        return Composition(*found[0])
    if len(found) > 1:
        raise SpecError(
            f"pre-gen name {name!r} is ambiguous: {', '.join('_'.join(f) for f in found)}"
        )
    raise SpecError(_explain(name, words))


def _splits(words: list[str], levels: list[int]) -> Iterator[tuple[str, ...]]:
    if not levels:
        if not words:
            yield ()
        return
    options = tier_options(levels[0])
    for cut in range(1, len(words) + 1):
        head = "-".join(words[:cut])
        if head in options:
            for rest in _splits(words[cut:], levels[1:]):
                yield (head, *rest)


def _explain(name: str, words: list[str]) -> str:
    lines = [f"{name!r} is not a pre-gen metric name tier4_tier3_tier2_tier1."]
    if len(words) == 4:
        for level, word in zip((4, 3, 2, 1), words):
            if word not in tier_options(level):
                lines.append(
                    f"  tier {level}: unknown {word!r}.{did_you_mean(word, tier_options(level))}"
                )
    for level in (4, 3, 2, 1):
        lines.append(f"  tier {level} options: {', '.join(tier_options(level))}")
    return "\n".join(lines)


def paper_compositions() -> list[Composition]:
    """The paper's 504 compositions in the released code's column order."""
    return _product(*(PAPER_TIERS[level] for level in (4, 3, 2, 1)))


def all_compositions() -> list[Composition]:
    """Every composition of the currently known tiers (672 with the bundled ones), same order."""
    return _product(*(tier_options(level) for level in (4, 3, 2, 1)))


def _product(
    t4: tuple[str, ...], t3: tuple[str, ...], t2: tuple[str, ...], t1: tuple[str, ...]
) -> list[Composition]:
    return [Composition(a, b, c, d) for a in t4 for b in t3 for c in t2 for d in t1]


__all__ = [
    "JOIN",
    "PAPER_TIERS",
    "Composition",
    "SentenceScore",
    "TokenFilter",
    "all_compositions",
    "paper_compositions",
    "parse_composition",
    "register_tier",
    "tier_options",
]
