"""Strict JSON: numpy arrays converted whole give what element-by-element conversion gives."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from capmetrics.errors import CapmetricsError
from capmetrics.io.strict_json import dumps, jsonable


def _one_by_one(value: object) -> object:
    """The element-by-element reading of an array (what jsonable did before its whole-array
    paths)."""
    if isinstance(value, np.ndarray):
        return [_one_by_one(v) for v in value.tolist()]
    if isinstance(value, list):
        return [_one_by_one(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


@pytest.mark.parametrize(
    "array",
    [
        np.array([0.1, -0.0, 1e308, 5e-324, 3.0]),
        np.array([0.5, np.nan, np.inf, -np.inf, 2.0]),
        np.array([[1.0, np.nan], [np.inf, -2.5]]),
        np.array([0.1, np.nan], dtype=np.float32),
        np.array([1, -2, 2**62], dtype=np.int64),
        np.array([3, 4], dtype=np.uint8),
        np.array([True, False]),
        np.zeros(0),
        np.array(["a", "b"]),
    ],
)
def test_arrays_convert_as_element_by_element(array: np.ndarray) -> None:
    got = jsonable({"x": array})["x"]
    assert got == _one_by_one(array)
    assert json.dumps(got, allow_nan=False) == json.dumps(_one_by_one(array), allow_nan=False)
    assert all(
        type(v) in (float, int, bool, str, type(None), list)
        for v in np.ravel(np.array(got, dtype=object))
    )


def test_non_finite_become_null_and_complex_is_an_error() -> None:
    assert dumps({"v": np.array([1.0, np.nan])}, indent=None) == '{"v": [1.0, null]}'
    with pytest.raises(CapmetricsError, match=r"\$\.v\[0\] as JSON: complex"):
        jsonable({"v": np.array([1, 2j])})
