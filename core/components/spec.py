"""The spec language: parse ``name(key=value, ...)`` strings and print components back.

Grammar (a small recursive-descent parser; no ``eval``, no ``ast``: ``cider-d`` would be a
subtraction in Python)::

    spec   := NAME [ "(" [ arg { "," arg } ] ")" ]
    arg    := [ NAME "=" ] value          # one positional at most, bound to the first parameter
    value  := spec | NUMBER | STRING | "true" | "false" | "none" | "[" [ value { "," value } ] "]"
    NAME   := [A-Za-z_][A-Za-z0-9_.-]*    # "_" and "-" compare equal in component names
    STRING := '"' ... '"' | "'" ... "'"   # backslash escapes \\ \" \' \n \t

A bare word is kept as a :class:`Spec` without arguments; whether it names a component or is a
plain string is decided by the annotation of the parameter it is given to.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from capmetrics.errors import SpecSyntaxError

if TYPE_CHECKING:
    from capmetrics.components.base import Component

Value = Union[int, float, str, bool, None, list["Value"], "Spec"]

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_KEYWORDS = {"true": True, "false": False, "none": None}
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
#: How deep specs and lists may nest (real specs need 3 or 4 levels; the bound keeps a
#: crafted spec from exhausting Python's recursion limit).
MAX_DEPTH = 32


def normalize_name(name: str) -> str:
    """Canonical form of a component name: lower case, ``_`` written as ``-``."""
    return name.lower().replace("_", "-")


@dataclass(frozen=True)
class Spec:
    """A parsed spec: a name, its arguments (key ``None`` for the positional one), and
    whether it was written with parentheses."""

    name: str
    args: tuple[tuple[str | None, Value], ...] = ()
    called: bool = False

    @property
    def key(self) -> str:
        """The name in canonical form, used for registry look-ups."""
        return normalize_name(self.name)

    @property
    def is_bare(self) -> bool:
        """True for a plain word such as ``mean`` (no parentheses, no arguments)."""
        return not self.called and not self.args

    def __str__(self) -> str:
        if not self.args:
            return self.name
        parts = [format_value(v) if k is None else f"{k}={format_value(v)}" for k, v in self.args]
        return f"{self.name}({', '.join(parts)})"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def enter(self) -> None:
        """One level deeper (a spec's arguments or a list); past :data:`MAX_DEPTH` an error."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"specs nest at most {MAX_DEPTH} levels deep")

    def error(self, message: str, pos: int | None = None) -> SpecSyntaxError:
        at = self.pos if pos is None else pos
        return SpecSyntaxError(
            f"{message} at column {at + 1} in spec\n  {self.text}\n  {' ' * at}^"
        )

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "end of spec"
            raise self.error(f"expected {char!r}, found {found}")
        self.pos += 1

    def name(self) -> str:
        self.skip_ws()
        m = NAME_RE.match(self.text, self.pos)
        if not m:
            found = repr(self.peek()) if self.peek() else "end of spec"
            raise self.error(f"expected a name, found {found}")
        self.pos = m.end()
        return m.group()

    def spec(self) -> Spec:
        name = self.name()
        if self.peek() != "(":
            return Spec(name)
        self.enter()
        self.pos += 1
        args: list[tuple[str | None, Value]] = []
        seen: set[str] = set()
        if self.peek() != ")":
            while True:
                self.skip_ws()
                start = self.pos
                key, value = self.arg()
                if key is None and args:
                    raise self.error("a positional argument must come first", start)
                if key is not None:
                    if key in seen:
                        raise self.error(f"parameter {key!r} given twice", start)
                    seen.add(key)
                args.append((key, value))
                if self.peek() == ",":
                    self.pos += 1
                    continue
                break
        self.expect(")")
        self.depth -= 1
        return Spec(name, tuple(args), called=True)

    def arg(self) -> tuple[str | None, Value]:
        self.skip_ws()
        m = NAME_RE.match(self.text, self.pos)
        if m:
            after = m.end()
            while after < len(self.text) and self.text[after].isspace():
                after += 1
            if after < len(self.text) and self.text[after] == "=":
                self.pos = after + 1
                return m.group().replace("-", "_"), self.value()
        return None, self.value()

    def value(self) -> Value:
        c = self.peek()
        if c == "":
            raise self.error("expected a value, found end of spec")
        if c in "\"'":
            return self.string()
        if c == "[":
            self.enter()
            self.pos += 1
            items: list[Value] = []
            if self.peek() != "]":
                while True:
                    items.append(self.value())
                    if self.peek() == ",":
                        self.pos += 1
                        continue
                    break
            self.expect("]")
            self.depth -= 1
            return items
        m = _NUMBER_RE.match(self.text, self.pos)
        if m and not NAME_RE.match(self.text, m.end()):
            self.pos = m.end()
            text = m.group()
            return float(text) if any(ch in text for ch in ".eE") else int(text)
        if NAME_RE.match(self.text, self.pos):
            start = self.pos
            spec = self.spec()
            if spec.is_bare and spec.name.lower() in _KEYWORDS:
                return _KEYWORDS[spec.name.lower()]
            if spec.is_bare and spec.name.lower() in ("inf", "nan"):
                raise self.error("write infinite or NaN values as strings", start)
            return spec
        raise self.error(f"unexpected {c!r}")

    def string(self) -> str:
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                out.append(_ESCAPES.get(nxt, "\\" + nxt))
                self.pos += 2
                continue
            if ch == quote:
                self.pos += 1
                return "".join(out)
            out.append(ch)
            self.pos += 1
        raise self.error("unterminated string", start)


def parse(text: str) -> Spec:
    """Parse a spec string.

    Raises:
        SpecSyntaxError: with the column and a caret under the problem.
    """
    if not isinstance(text, str):
        raise SpecSyntaxError(f"a spec must be a string, got {type(text).__name__}")
    parser = _Parser(text)
    spec = parser.spec()
    if parser.peek():
        raise parser.error(f"unexpected {parser.peek()!r} after the spec")
    return spec


def format_value(value: Any, portable: bool = False) -> str:
    """Print one value in spec syntax; an object that specs cannot express (a model or a
    vocabulary passed in Python) prints as ``<TypeName>``."""
    from capmetrics.components.base import Component

    if isinstance(value, Component):
        return value.portable_spec() if portable else value.spec
    if isinstance(value, Spec):
        return str(value)
    if value is None or isinstance(value, bool):
        return {None: "none", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return f'"{value}"'
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v, portable) for v in value) + "]"
    if not isinstance(value, (str, os.PathLike)):
        return f"<{type(value).__name__}>"
    text = str(value)
    if (
        NAME_RE.fullmatch(text)
        and text.lower() not in _KEYWORDS
        and text.lower() not in ("inf", "nan")
    ):
        return text
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    )
    return f'"{escaped}"'


def format_component(component: Component, portable: bool = False) -> str:
    """The canonical spec of ``component``: parameters equal to their default are left out.

    ``portable``: parameters that name local files (the class's ``path_params``) print as
    ``<local>``, so that the same files at another path give the same text; the files'
    checksums are in the component's signature instead.
    """
    parts = []
    local = type(component).path_params if portable else ()
    for key, param in type(component).constructor_parameters().items():
        value = getattr(component, key)
        if param.default is not param.empty and _same(value, param.default):
            continue
        parts.append(
            f"{key}=<local>"
            if key in local and value is not None
            else f"{key}={format_value(value, portable)}"
        )
    name = type(component).name or type(component).__name__.lower()
    return f"{name}({', '.join(parts)})" if parts else name


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(type(a) is type(b) and a == b) or (a is None and b is None)
    except Exception:  # arrays and other objects without a plain truth value
        return False
