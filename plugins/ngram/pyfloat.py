"""Array arithmetic that rounds as Python's float operations do, for bit-identical numbers.

coco-caption's scorers compute on Python floats: ``x ** y`` and ``pow`` call the C library's
``pow``, ``math.exp`` its ``exp``, and sums run left to right. NumPy's vectorised ``power`` and
``exp`` (SIMD code on most CPUs) and its pairwise summation may round differently in the last
bit, so the n-gram metrics use these helpers wherever coco-caption's arithmetic is Python's.
"""

from __future__ import annotations

import math
from itertools import repeat

import numpy as np

#: Squares whose exact value lies within this fraction of an ulp of a rounding midpoint are
#: left to the C library's ``pow`` (its error bound is 0.52 ulp: it rounds correctly elsewhere).
MIDPOINT_MARGIN = 0.05
_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitter


def py_pow(base: np.ndarray, exponent: float) -> np.ndarray:
    """``base ** exponent`` element by element as Python floats compute it (C ``pow``)."""
    flat = np.asarray(base, dtype=np.float64).ravel()
    out = np.fromiter(map(pow, flat.tolist(), repeat(float(exponent))), np.float64, len(flat))
    return out.reshape(np.shape(base))


def py_exp(x: np.ndarray) -> np.ndarray:
    """``math.exp`` element by element."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    return np.fromiter(map(math.exp, flat.tolist()), np.float64, len(flat)).reshape(np.shape(x))


def py_square(x: np.ndarray) -> np.ndarray:
    """``pow(x, 2)`` element by element as Python computes it, vectorised: ``x * x`` (the
    correctly rounded square) except where the exact square lies next to a rounding midpoint,
    where the C library's ``pow`` may round the other way; those few go through ``pow``."""
    x = np.asarray(x, dtype=np.float64)
    square = x * x
    # the exact rounding error of x * x (Dekker's product), in ulps of the result
    big = _SPLIT * x
    high = big - (big - x)
    low = x - high
    with np.errstate(invalid="ignore", over="ignore"):
        error = ((high * high - square) + 2.0 * high * low) + low * low
        near = np.abs(np.abs(error) / np.spacing(np.abs(square)) - 0.5) < MIDPOINT_MARGIN
    near &= np.isfinite(square) & (square != 0)
    if near.any():
        square[near] = py_pow(x[near], 2.0)
    return square


def sum_left_to_right(values: np.ndarray, axis: int) -> np.ndarray:
    """The sum along ``axis`` added left to right, as a Python loop (``total += v``) adds."""
    values = np.moveaxis(np.asarray(values, dtype=np.float64), axis, 0)
    if len(values) == 0:
        return np.zeros(values.shape[1:])
    total = values[0].copy()
    for row in values[1:]:
        total += row
    return total
