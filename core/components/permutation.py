"""Permutation tests for multi-candidate statistics (public API for statistic plugins).

Subclass :class:`PermutationStatistic` and implement ``pooled`` and ``split_statistic``; the
exact and Monte-Carlo p-values, the undefined-item handling and batching come with it.

A statistic first builds its item's pooled matrix once (candidates first, then references), and
returns a function that takes split masks — a float 0/1 array of shape ``(splits, n + m)``, 1
for the positions on the candidate side — and returns one statistic value per split. The
observed split is ``[True] * n + [False] * m``. The p-value is then either exact, over all
``C(n + m, n)`` splits (observed included), or Monte-Carlo over random splits drawn from a
generator seeded by the statistic's ``seed`` (and the set sizes), so that an item's p-value does
not depend on the order of the items, on the process that computes it or on the executor.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from typing import Any, ClassVar, Literal

import numpy as np
from capmetrics.components.base import Statistic, StatResult
from capmetrics.errors import MetricError
from capmetrics.io.identity import Identity

#: How p-values are computed; ``none`` (written ``none`` in specs, read as None) skips them.
PValueMethod = Literal["auto", "exact", "monte-carlo", "none"] | None
SplitStatistic = Callable[[np.ndarray], np.ndarray]

#: Splits evaluated per batch (bounds the memory of exact tests over many splits).
BATCH = 16_384
#: The largest number of splits an exact p-value enumerates (their masks are kept in memory).
MAX_EXACT = 500_000


class Undefined(Exception):
    """The statistic is undefined for this item; the message says why."""


@lru_cache(maxsize=8)
def all_splits(size: int, n: int) -> np.ndarray:
    """Every split of ``size`` pooled positions into ``n`` candidates and the rest, as masks.

    Row 0 is the observed split (the first ``n`` positions). The array is read-only and cached.
    """
    count = math.comb(size, n)
    chosen = np.fromiter(
        (i for c in combinations(range(size), n) for i in c), dtype=np.intp, count=count * n
    ).reshape(count, n)
    return _masks(chosen, size)


@lru_cache(maxsize=8)
def monte_carlo_splits(size: int, n: int, count: int, seed: int) -> np.ndarray:
    """The observed split then ``count`` uniformly random splits (drawn with replacement), as
    masks; read-only and cached.

    Every item of the same sizes gets the same splits (as in Westfall–Young permutation
    testing): each item's p-value is a valid Monte-Carlo p-value, the run is reproducible
    from ``seed`` alone, and no item pays for drawing its own splits.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed & 0xFFFFFFFF, size, n, count]))
    chosen = np.argpartition(rng.random((count, size)), n - 1, axis=1)[:, :n]
    return _masks(np.concatenate([np.arange(n)[None], chosen]), size)


def _masks(chosen: np.ndarray, size: int) -> np.ndarray:
    """Float 0/1 masks (ready for matrix products) from the chosen positions of each split."""
    masks = np.zeros((len(chosen), size), dtype=np.float64)
    np.put_along_axis(masks, chosen, 1.0, axis=1)
    masks.flags.writeable = False
    return masks


#: Cross indices of read-only split masks, keyed by the very array (held with its entry).
_CROSS_INDEX: dict[Identity, np.ndarray] = {}


def cross_index(masks: np.ndarray, n: int) -> np.ndarray:
    """Flat indices into a ravelled (size × size) matrix of every (candidate-side,
    reference-side) pair of each split: shape (splits, n, size − n), in position order.

    Cached for the read-only, cached split arrays (the same array serves every item).
    """
    hit = _CROSS_INDEX.get(Identity(masks))
    if hit is not None:
        return hit
    size = masks.shape[1]
    order = np.argsort(-masks, axis=1, kind="stable")
    index = order[:, :n, None] * size + order[:, None, n:]
    if not masks.flags.writeable:
        if len(_CROSS_INDEX) >= 8:
            _CROSS_INDEX.clear()
        _CROSS_INDEX[Identity(masks)] = index
    return index


def observed_split(n: int, m: int) -> np.ndarray:
    """The observed split as a ``(1, n + m)`` mask."""
    mask = np.zeros((1, n + m), dtype=np.float64)
    mask[0, :n] = 1.0
    return mask


@dataclass
class NullDistribution:
    """The observed statistic with the values of the permutation null distribution."""

    observed: float
    null: np.ndarray
    method: str
    p_value: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _evaluate(stat: SplitStatistic, masks: np.ndarray) -> np.ndarray:
    return np.concatenate(
        [np.asarray(stat(masks[i : i + BATCH]), dtype=float) for i in range(0, len(masks), BATCH)]
    )


def _at_least(values: np.ndarray, observed: float, rtol: float) -> np.ndarray:
    return values >= observed - rtol * max(1.0, abs(observed))


def choose_method(method: PValueMethod, n: int, m: int, permutations: int) -> str:
    """``auto`` is exact when there are at most ``permutations`` splits, else Monte-Carlo."""
    if method is None:
        return "none"
    if method != "auto":
        return method
    return "exact" if math.comb(n + m, n) <= permutations else "monte-carlo"


#: The most cells (splits × texts, 8 bytes each: 2 GiB) of Monte-Carlo split masks.
MAX_SPLIT_CELLS = 2**28


def permutation_test(
    stat: SplitStatistic,
    n: int,
    m: int,
    method: PValueMethod,
    permutations: int,
    seed: int,
    rtol: float = 0.0,
) -> NullDistribution:
    """Observed statistic, null values and p-value (``p_value`` None for method ``none``).

    Exact: p = #{splits with T ≥ T_obs} / C(n + m, n), observed split included. Monte-Carlo:
    p = (1 + #{null T ≥ T_obs}) / (1 + permutations). ``rtol`` is the relative tolerance of
    the ≥ test (0 for statistics computed exactly).
    """
    chosen = choose_method(method, n, m, permutations)
    if chosen == "none":
        return NullDistribution(
            float(_evaluate(stat, observed_split(n, m))[0]), np.empty(0), chosen
        )
    if chosen == "exact":
        if math.comb(n + m, n) > MAX_EXACT:
            raise MetricError(
                f"an exact p-value for {n} + {m} texts needs {math.comb(n + m, n):,} splits "
                f"(more than {MAX_EXACT:,}); use p_value=monte-carlo"
            )
        values = _evaluate(stat, all_splits(n + m, n))
        observed, null = float(values[0]), values
        p = float(np.count_nonzero(_at_least(values, observed, rtol))) / len(values)
    else:
        if permutations < 1:
            raise MetricError(f"Monte-Carlo p-values need permutations >= 1, got {permutations}")
        if (permutations + 1) * (n + m) > MAX_SPLIT_CELLS:  # the split masks are held in memory
            raise MetricError(
                f"permutations={permutations:,} for {n} + {m} texts needs "
                f"{(permutations + 1) * (n + m) * 8 / 2**30:,.1f} GiB of splits; use at most "
                f"{MAX_SPLIT_CELLS // (n + m) - 1:,}"
            )
        values = _evaluate(stat, monte_carlo_splits(n + m, n, permutations, seed))
        observed, null = float(values[0]), values[1:]
        p = (1.0 + float(np.count_nonzero(_at_least(null, observed, rtol)))) / (1.0 + len(null))
    return NullDistribution(observed, null, chosen, p, {"p_method": chosen, "splits": len(null)})


def undefined(message: str) -> StatResult:
    """The result of an item where the statistic is undefined: NaN with the reason attached."""
    return StatResult(math.nan, None, {"undefined": message})


class PermutationStatistic(Statistic):
    """A statistic computed from an item's pooled matrix, with an exact or Monte-Carlo p-value.

    Subclasses store ``p_value``, ``permutations`` and ``seed``, and implement :meth:`pooled`
    (the item's distance matrix or embeddings, computed once) and :meth:`split_statistic`; they
    may override :meth:`pooled_many` to compute many items' matrices in one batched call.
    Lower values mean closer sets (these are divergences).

    How executors run it (:func:`capmetrics.engine.parallel.compare_items`): with
    :attr:`pooled_in_parent` (the default, for anything that needs a model or a GPU) the pooled
    matrices are built in the calling process in large batches and the workers get only
    :meth:`for_workers` (a copy without the model) and small numpy arrays; otherwise each
    worker builds its items' matrices itself (cheap, model-free distances such as CIDEr-D).
    """

    #: Build the pooled matrices in the calling process (the workers never load a model).
    pooled_in_parent: bool = True
    #: Run the permutation tests in the calling process too (e.g. torch kernels on its GPU).
    tests_in_parent: bool = False

    higher_is_better: ClassVar[bool] = False
    #: Relative tolerance of the p-value's ≥ test.
    rtol: ClassVar[float] = 1e-10
    p_value: PValueMethod
    permutations: int
    seed: int

    def pooled(self, candidates: list[str], references: list[str]) -> np.ndarray:
        """The item's pooled matrix (candidates first, then references)."""
        raise NotImplementedError

    def pooled_many(self, items: Sequence[tuple[list[str], list[str]]]) -> list[np.ndarray]:
        """The pooled matrices of several items; override to batch the work."""
        return [self.pooled(c, r) for c, r in items]

    def split_statistic(self, pooled: np.ndarray, n: int) -> SplitStatistic:
        """The statistic as a function of split masks, from a pooled matrix with ``n`` candidates.

        Raises:
            Undefined: with the reason, when the statistic is undefined for the item.
        """
        raise NotImplementedError

    def for_workers(self) -> PermutationStatistic:
        """What the workers get when the pooled matrices are built in the parent: enough to run
        :meth:`compare_pooled`. The default is the statistic itself; statistics that hold a model
        return a copy without it (see :meth:`without`)."""
        return self

    def without(self, *params: str) -> PermutationStatistic:
        """A shallow copy with the parameters ``params`` set to None and cached state (attributes
        starting with ``_``) dropped: cheap to send to a worker, never loads a model there."""
        clone = copy.copy(self)
        clone.__dict__ = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        for name in params:
            setattr(clone, name, None)
        return clone

    def fit(self, references: Sequence[Sequence[str]]) -> PermutationStatistic:
        """Fit the underlying distance or embedder on the corpus references (no-op by default)."""
        return self

    def signature_extra(self) -> dict[str, str]:
        return {
            "p_value": self.p_value or "none",
            "permutations": str(self.permutations),
            "seed": str(self.seed),
        }

    def _check_sizes(self, n: int, m: int) -> None:
        if n < 2 or m < 2:
            raise Undefined(
                f"{self.name} needs at least 2 candidates and 2 references, got {n} and {m}"
            )

    def _test(
        self,
        pooled: np.ndarray,
        candidates: list[str],
        references: list[str],
        method: PValueMethod | None = None,
    ) -> NullDistribution:
        n, m = len(candidates), len(references)
        stat = self.split_statistic(pooled, n)
        return permutation_test(
            stat, n, m, method or self.p_value, self.permutations, self.seed, self.rtol
        )

    def null_distribution(
        self,
        candidates: Sequence[str],
        references: Sequence[str],
        method: PValueMethod | None = None,
    ) -> NullDistribution:
        """The observed statistic and its permutation null distribution for one item.

        Raises:
            Undefined: when the statistic is undefined for the item.
        """
        candidates, references = list(candidates), list(references)
        self._check_sizes(len(candidates), len(references))
        return self._test(self.pooled(candidates, references), candidates, references, method)

    def compare(self, candidates: Sequence[str], references: Sequence[str]) -> StatResult:
        return self.compare_many([(candidates, references)])[0]

    def compare_many(
        self, items: Sequence[tuple[Sequence[str], Sequence[str]]]
    ) -> list[StatResult]:
        """:meth:`compare` for several items, with their pooled matrices built in one batch."""
        lists = [(list(c), list(r)) for c, r in items]
        return self.compare_pooled(with_pooled(self, lists))

    def compare_pooled(self, tasks: Sequence[PooledItem]) -> list[StatResult]:
        """The results of items whose pooled matrices are given (None for an item whose sizes
        make the statistic undefined); the part of :meth:`compare_many` that workers run."""
        results: list[StatResult] = []
        for c, r, pooled in tasks:
            try:
                self._check_sizes(len(c), len(r))
                if pooled is None:
                    raise MetricError(
                        f"{self.name}: no pooled matrix for an item of {len(c)} + {len(r)} texts"
                    )
                null = self._test(pooled, c, r)
            except Undefined as err:
                results.append(undefined(str(err)))
                continue
            if math.isfinite(null.observed):
                results.append(StatResult(null.observed, null.p_value, null.details))
            else:
                results.append(
                    undefined(f"{self.name} is not finite ({null.observed}) for this item")
                )
        return results


#: An item's candidates, references and pooled matrix (None where its sizes are undefined).
PooledItem = tuple[list[str], list[str], "np.ndarray | None"]


def with_pooled(
    statistic: PermutationStatistic, items: Sequence[tuple[list[str], list[str]]]
) -> list[PooledItem]:
    """``items`` with their pooled matrices, built in one :meth:`~PermutationStatistic.pooled_many`
    call for the items of defined sizes."""
    valid = []
    for i, (c, r) in enumerate(items):
        try:
            statistic._check_sizes(len(c), len(r))
            valid.append(i)
        except Undefined:
            pass
    pooled: list[np.ndarray | None] = [None] * len(items)
    matrices = statistic.pooled_many([items[i] for i in valid]) if valid else []
    if len(matrices) != len(valid):
        raise MetricError(
            f"{statistic.name}: pooled_many returned {len(matrices)} matrices for "
            f"{len(valid)} items"
        )
    for i, matrix in zip(valid, matrices):
        pooled[i] = matrix
    return [(c, r, p) for (c, r), p in zip(items, pooled)]


def require_finite(matrix: np.ndarray, what: str | Callable[[], str]) -> np.ndarray:
    """Raise :class:`Undefined` naming ``what`` (a text, or a function giving it, called only on
    failure) if ``matrix`` has NaN or infinite entries."""
    if np.isfinite(matrix).all():
        return matrix
    bad = ~np.isfinite(matrix)
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    name = what() if callable(what) else what
    raise Undefined(f"{name} has {int(bad.sum())} NaN or infinite value(s), first at {where}")
