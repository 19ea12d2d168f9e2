"""The spec language, kept importable here: it lives in core as
:mod:`capmetrics.components.spec` (a value type core uses at run time; the registry resolves its
names to components)."""

from capmetrics.components.spec import (
    MAX_DEPTH,
    NAME_RE,
    Spec,
    Value,
    format_component,
    format_value,
    normalize_name,
    parse,
)

__all__ = [
    "MAX_DEPTH",
    "NAME_RE",
    "Spec",
    "Value",
    "format_component",
    "format_value",
    "normalize_name",
    "parse",
]
