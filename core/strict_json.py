"""Strict JSON for everything capmetrics writes.

Every JSON the project writes goes through :func:`dumps`: numpy scalars and arrays become
numbers and lists, tuples and sets become lists, paths become strings, and NaN/±inf become
``null`` (RFC 8259 has no NaN; ``jq`` and JavaScript reject Python's ``NaN`` tokens). A value
that has no JSON form is an error naming the key path where it sits, not a silent ``str()``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import numpy as np

from capmetrics.errors import CapmetricsError


def jsonable(value: Any, path: str = "$") -> Any:
    """``value`` as plain JSON types (dict, list, str, int, float, bool, None), recursively;
    non-finite floats become None."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biu":  # tolist() gives Python ints and bools
            return value.tolist()
        if value.dtype.kind == "f":  # whole-array: non-finite floats become None
            finite = np.isfinite(value)
            if finite.all():
                return value.tolist()
            out = value.astype(object)
            out[~finite] = None
            return out.tolist()
        return [jsonable(v, f"{path}[{i}]") for i, v in enumerate(value.tolist())]
    if isinstance(value, Mapping):
        return {_key(k, path): jsonable(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, f"{path}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, complex) or isinstance(value, np.complexfloating):
        raise CapmetricsError(f"cannot write {path} as JSON: complex number {value!r}")
    raise CapmetricsError(f"cannot write {path} as JSON: {type(value).__name__} has no JSON form")


def _key(key: Any, path: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (int, float, bool, np.integer, np.floating)) or key is None:
        return json.dumps(jsonable(key))
    raise CapmetricsError(f"cannot write {path} as JSON: key {key!r} is a {type(key).__name__}")


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``value`` (see :func:`jsonable`), UTF-8 characters kept."""
    return json.dumps(jsonable(value), indent=indent, ensure_ascii=False, allow_nan=False)


def loads_strict(text: str) -> Any:
    """Parse JSON and refuse the non-standard ``NaN``/``Infinity`` tokens Python accepts."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)
