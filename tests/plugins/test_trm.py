"""TRM: the paper's equations 3–4 by brute force, the tiny check of ALGORITHMS.md Part A §2,
exact and Monte-Carlo p-values, undefined items."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from capmetrics import Distance, Scores, compose
from capmetrics.plugins.multicandidate.trm import TRM


class TableDistance(Distance):
    """Distances read from a matrix: texts are the row/column numbers."""

    name = "table-test"
    higher_is_better = False

    def __init__(self, matrix: list | None = None) -> None:
        self.matrix = matrix

    def pairwise(self, a, b):
        m = np.asarray(self.matrix, dtype=float)
        return m[np.ix_([int(x) for x in a], [int(y) for y in b])]


class LineDistance(Distance):
    """|a − b| on the real line, through the generic pairwise."""

    name = "line-test"
    higher_is_better = False

    def score(self, candidates, references):
        v = np.array([abs(float(c) - float(r[0])) for c, r in zip(candidates, references)])
        return Scores(v, float(v.mean()) if len(v) else 0.0)


def brute_q(d, cands: list[int], refs: list[int]) -> Fraction:
    """Eqs. 3–4 literally: every directed triangle, both kinds, ≤ as printed."""
    sums = [0, 0, 0]
    for one, two in ((cands, refs), (refs, cands)):
        for x in one:
            for b1 in two:
                for b2 in two:
                    if b1 == b2:
                        continue
                    inner, e0, e1 = d[b1][b2], d[x][b1], d[x][b2]
                    sums[0] += inner <= e0 and inner <= e1
                    sums[1] += (e0 <= inner <= e1) or (e1 <= inner <= e0)
                    sums[2] += e0 <= inner and e1 <= inner
    total = sum(sums)
    return sum(abs(Fraction(s, total) - Fraction(1, 3)) for s in sums)


def brute_p(d, n: int, size: int) -> Fraction:
    observed = brute_q(d, list(range(n)), list(range(n, size)))
    splits = list(combinations(range(size), n))
    hits = sum(
        brute_q(d, list(c), [i for i in range(size) if i not in c]) >= observed for c in splits
    )
    return Fraction(hits, len(splits))


def texts(k: int, start: int = 0) -> list[str]:
    return [str(i) for i in range(start, start + k)]


def test_tiny_check_of_part_a():
    trm = TRM(LineDistance())
    res = trm.compare(["0", "1", "5"], ["2", "3", "10"])
    assert res.value == pytest.approx(2 / 21, abs=1e-15)
    assert res.p_value == 0.8
    assert res.details == {"p_method": "exact", "splits": 20}


@pytest.mark.parametrize("seed", range(12))
def test_equals_brute_force_with_ties_and_asymmetry(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    size = n + m
    d = rng.integers(0, 4, size=(size, size)).astype(float)  # few values: many ties; asymmetric
    np.fill_diagonal(d, 0.0)
    res = TRM(TableDistance(d.tolist()), p_value="exact").compare(texts(n), texts(m, n))
    exact_q = brute_q(d.tolist(), list(range(n)), list(range(n, size)))
    assert res.value == float(exact_q)
    assert res.p_value == float(brute_p(d.tolist(), n, size))
    assert res.details["splits"] == math.comb(size, n)


def test_continuous_random_instance_matches_brute_force():
    rng = np.random.default_rng(99)
    d = rng.random((9, 9))
    np.fill_diagonal(d, 0.0)
    res = TRM(TableDistance(d.tolist()), p_value="none").compare(texts(4), texts(5, 4))
    assert res.value == pytest.approx(
        float(brute_q(d.tolist(), [0, 1, 2, 3], [4, 5, 6, 7, 8])), abs=1e-15
    )
    assert res.p_value is None


def test_distance_matrix_is_computed_once_per_item():
    calls = []

    class Counting(LineDistance):
        def pairwise(self, a, b):
            calls.append((len(a), len(b)))
            return super().pairwise(a, b)

    TRM(Counting()).compare(["0", "1", "5"], ["2", "3", "10"])
    assert calls == [(6, 6)]


def test_monte_carlo_is_seeded_and_recorded():
    rng = np.random.default_rng(5)
    cands = [str(x) for x in rng.normal(0, 1, 10)]
    refs = [str(x) for x in rng.normal(0.5, 1, 10)]
    trm = TRM(LineDistance(), permutations=200, seed=7)
    first, again = trm.compare(cands, refs), trm.compare(cands, refs)
    assert first.details == {"p_method": "monte-carlo", "splits": 200}  # auto: C(20,10) > 200
    assert first == again
    assert (first.p_value * 201) == pytest.approx(round(first.p_value * 201))
    others = [
        TRM(LineDistance(), permutations=200, seed=s).compare(cands, refs) for s in range(8, 12)
    ]
    assert all(o.value == first.value for o in others)
    assert len({o.p_value for o in others} | {first.p_value}) > 1
    exact = TRM(LineDistance(), p_value="exact").compare(cands[:4], refs[:4])
    assert exact.details["splits"] == 70
    sig = trm.signature()
    assert (sig["p_value"], sig["permutations"], sig["seed"]) == ("auto", "200", "7")


def test_exact_p_value_refuses_too_many_splits():
    from capmetrics import MetricError

    with pytest.raises(MetricError, match="155,117,520 splits"):
        TRM(LineDistance(), p_value="exact").compare(texts(15), texts(15, 15))


def test_identical_candidates_give_zero_and_p_one():
    res = TRM(LineDistance()).compare(["1", "1", "1"], ["1", "1"])
    assert res.value == 0.0 and res.p_value == 1.0


@pytest.mark.parametrize("n, m", [(1, 3), (3, 1), (0, 2)])
def test_too_few_points_is_undefined_with_a_message(n, m):
    res = TRM(LineDistance()).compare(texts(n), texts(m, 10))
    assert math.isnan(res.value) and res.p_value is None
    assert "at least 2 candidates and 2 references" in res.details["undefined"]


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_distances_are_reported(bad):
    d = np.ones((4, 4))
    d[1, 2] = bad
    res = TRM(TableDistance(d.tolist())).compare(["0", "1"], ["2", "3"])
    assert math.isnan(res.value)
    assert "NaN or infinite" in res.details["undefined"] and "(1, 2)" in res.details["undefined"]


def test_registered_and_composable(add_plugin):
    from tests.registry.test_registry import plugin_module

    add_plugin(plugin_module("trm_test_distance", LineDistance), "trm-test-distance")
    trm = compose("trm(line-test, p_value=monte-carlo, permutations=50, seed=3)")
    assert (
        isinstance(trm, TRM)
        and trm.spec == "trm(distance=line-test, p_value=monte-carlo, permutations=50, seed=3)"
    )
    assert trm.compare(["0", "1", "5"], ["2", "3", "10"]).details["p_method"] == "monte-carlo"
