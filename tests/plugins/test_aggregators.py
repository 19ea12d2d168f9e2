"""The bundled reductions: values, empty input, and vectorised groups equal to the loop."""

from __future__ import annotations

import capmetrics
import numpy as np
import pytest


@pytest.mark.parametrize(
    ("name", "values", "expected"),
    [
        ("sum", [1, 2, 6], 9.0),
        ("mean", [1, 2, 6], 3.0),
        ("median", [1, 2, 6, 7], 4.0),
        ("geomean", [2, 8], 4.0),
        ("geomean", [0, np.inf, 3], 0.0),
        ("max", [1, 2, 6], 6.0),
        ("min", [1, 2, 6], 1.0),
        ("hmp(method=simple)", [0.01, 0.5, 1.0], 3 / (100 + 2 + 1)),
    ],
)
def test_values(name, values, expected):
    assert capmetrics.compose(name, "aggregator")(values) == pytest.approx(expected, rel=1e-12)


def test_empty_and_invalid_input():
    assert capmetrics.compose("sum")([]) == 0.0
    with pytest.raises(ValueError, match="mean of an empty list is undefined"):
        capmetrics.compose("mean")([])
    with pytest.raises(ValueError, match="geomean of negative values"):
        capmetrics.compose("geomean")([1, -1])


@pytest.mark.parametrize("name", ["sum", "mean", "median", "geomean", "max", "min"])
def test_groups_equal_the_loop(name):
    rng = np.random.default_rng(0)
    values = rng.random(40)
    offsets = np.array([0, 3, 4, 10, 25, 40])
    agg = capmetrics.compose(name, "aggregator")
    expected = [agg(values[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    np.testing.assert_allclose(agg.reduce_groups(values, offsets), expected, rtol=1e-12)
