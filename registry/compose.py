"""Build components from specs. A parameter's annotation decides how its value is read:
a bare word given to a parameter annotated with a component kind (``distance: Distance``) is
looked up among that kind, the same word given to a ``str`` or ``Literal`` parameter stays text.
"""

from __future__ import annotations

import enum
import os
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from capmetrics.components.base import KIND_BASES, METRIC_KINDS, Component, init_hints, union_args
from capmetrics.components.spec import MAX_DEPTH, Spec, format_value, normalize_name, parse
from capmetrics.errors import SpecError, UnknownComponentError, did_you_mean
from capmetrics.registry.manager import Registry, get_registry

__all__ = ["METRIC_KINDS", "Untrusted", "compose", "init_hints", "parameter_help", "union_args"]


@dataclass(frozen=True)
class Untrusted:
    """Where a spec comes from when the user did not write it (an NNEval model's
    ``nneval.json``): composed with ``untrusted=``, it may not set a component's
    ``program_params`` (``java``, ``corenlp``, ``trust_code``, ...), its ``path_params`` must
    name files inside ``folder`` (relative, no ``..``, no link leading out), and no other text
    argument may be an absolute, ``~`` or ``..`` path, nor a relative one that names an existing
    file or folder outside ``folder`` (it would be opened from the current folder). ``declared``:
    file names the model declares (they may be passed by the user in place of the folder's
    copy)."""

    folder: Path
    label: str
    declared: frozenset[str] = frozenset()

    def check(self, cls: type[Component], key: str, value: Any, where: str) -> None:
        """Raise :class:`UntrustedSpecError` if ``value`` for ``key`` of ``cls`` is refused."""
        at = f"{self.label}: parameter {key!r} of {cls.name}() in spec {where!r}"
        if key in cls.program_params and value is not None and value is not False:
            raise UntrustedSpecError(
                f"{at} names a program or code to run ({format_value(value)}); a model file may "
                f"not choose what runs: give {key}= in your own spec, config or command line"
            )
        paths = list(_texts(value, bare=key in cls.path_params))
        for text in paths:
            if key in cls.path_params:
                inside = (
                    within(self.folder, text)
                    if text in self.declared
                    else inside_folder(self.folder, text)
                )
            else:  # undeclared: no path syntax, and no existing file outside the folder
                inside = not _looks_like_path(text) and not existing_outside(self.folder, text)
            if not inside:
                raise UntrustedSpecError(
                    f"{at} names {text!r}, outside the model's folder; a model file may name only "
                    "files inside its own folder"
                )


class UntrustedSpecError(SpecError):
    """A spec from a file the user did not write sets what such a spec may not set."""


def _texts(value: Any, bare: bool) -> Iterator[str]:
    """The text values in ``value`` (a string, a list of them; bare words too if ``bare``)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (os.PathLike)):
        yield os.fspath(value)
    elif bare and isinstance(value, Spec) and value.is_bare:
        yield value.name
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v, bare)


def _looks_like_path(text: str) -> bool:
    path = Path(text)
    return path.is_absolute() or text.startswith("~") or ".." in path.parts or os.path.isabs(text)


def existing_outside(folder: str | Path, value: str) -> bool:
    """Whether ``value``, read as a path from the current folder (as a component would open
    it), names an existing file, folder or link that lies outside ``folder``."""
    try:
        if not value or not os.path.lexists(value):
            return False
        resolved = os.path.realpath(value)
    except (OSError, ValueError):  # too long, an embedded NUL: no file
        return False
    root = os.path.realpath(folder)
    return os.path.commonpath([root, resolved]) != root


def within(folder: str | Path, value: str) -> bool:
    """Whether ``value`` is a relative path without ``..`` that stays inside ``folder`` once
    links are resolved."""
    path = Path(value).expanduser()
    if not value or path.is_absolute() or value.startswith("~") or ".." in path.parts:
        return False
    root = os.path.realpath(folder)
    resolved = os.path.realpath(os.path.join(root, path))
    return os.path.commonpath([root, resolved]) == root


def inside_folder(folder: str | Path, value: str) -> bool:
    """Whether the file ``value`` names is inside ``folder``: a relative path without ``..``
    that stays inside once links are resolved; or a name that is no file at all (a model hub
    name such as ``sentence-transformers/all-MiniLM-L6-v2``)."""
    if not within(folder, value):
        return False
    return os.path.exists(os.path.join(os.path.realpath(folder), value)) or not os.path.lexists(
        value
    )


def compose(
    spec: str | Spec | Component,
    kind: str | tuple[str, ...] | None = None,
    *,
    definitions: Mapping[str, Spec] | None = None,
    registry: Registry | None = None,
    untrusted: Untrusted | None = None,
    **params: Any,
) -> Component:
    """Build the component that ``spec`` names.

    Args:
        spec: a spec string (``"trm(distance=meteor)"``), a parsed :class:`Spec` or a component.
        kind: restrict the look-up to one kind or a tuple of kinds.
        definitions: named specs (from a config file) usable as component names.
        registry: the registry to use (default: the process-wide one).
        untrusted: the spec comes from a file the user did not write (see :class:`Untrusted`);
            ``None``: the user's own spec, config or command line.
        **params: extra parameters; values may be specs, plain values or components.

    Raises:
        SpecSyntaxError, SpecError, UnknownComponentError.
    """
    if isinstance(spec, Component):
        if params:
            raise SpecError("parameters cannot be added to an already built component")
        return spec
    text = spec if isinstance(spec, str) else str(spec)
    parsed = parse(spec) if isinstance(spec, str) else spec
    if params:
        parsed = Spec(parsed.name, parsed.args + tuple(params.items()), called=True)
    kinds = (kind,) if isinstance(kind, str) else kind
    builder = _Builder(registry or get_registry(), definitions or {}, text, untrusted)
    return builder.build(parsed, kinds)


def parameter_help(cls: type[Component]) -> str:
    """``name accepts: a (type, required), b (type, default x)``."""
    hints = init_hints(cls)
    parts = []
    for key, p in cls.constructor_parameters().items():
        typ = _type_name(hints.get(key, Any))
        default = "required" if p.default is p.empty else f"default {format_value(p.default)}"
        parts.append(f"{key} ({typ}, {default})")
    return f"{cls.name} accepts: " + (", ".join(parts) if parts else "no parameters")


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "").replace("capmetrics.components.base.", "")


class _Builder:
    def __init__(
        self,
        registry: Registry,
        definitions: Mapping[str, Spec],
        text: str,
        untrusted: Untrusted | None = None,
    ) -> None:
        self.registry = registry
        self.untrusted = untrusted
        self.definitions = {normalize_name(k): v for k, v in definitions.items()}
        self.text = text
        self._expanding: list[str] = []
        self._depth = 0

    @property
    def context(self) -> str:
        return f" in spec {self.text!r}"

    def build(self, spec: Spec, kinds: tuple[str, ...] | None) -> Component:
        if (
            self._depth >= MAX_DEPTH
        ):  # Spec objects and config definitions can nest without the parser
            raise SpecError(f"components nest at most {MAX_DEPTH} levels deep{self.context}")
        self._depth += 1
        try:
            return self._build(spec, kinds)
        finally:
            self._depth -= 1

    def _build(self, spec: Spec, kinds: tuple[str, ...] | None) -> Component:
        definition = self.definitions.get(spec.key)
        if definition is not None:
            if spec.key in self._expanding:
                raise SpecError(f"definition {spec.name!r} refers to itself{self.context}")
            self._expanding.append(spec.key)
            try:
                merged = Spec(definition.name, definition.args + spec.args, called=True)
                return self.build(merged, kinds)
            finally:
                self._expanding.pop()
        entry = self.registry.lookup(spec.name, kinds, self.context)
        cls = entry.cls
        params = cls.constructor_parameters()
        hints = init_hints(cls)
        kwargs: dict[str, Any] = {}
        for key, value in spec.args:
            if key is None:
                if not params:
                    raise SpecError(
                        f"{cls.name}() takes no parameters{self.context}\n{parameter_help(cls)}"
                    )
                key = next(iter(params))
            if key not in params:
                raise SpecError(
                    f"{cls.name}() got an unexpected parameter {key!r}{self.context}."
                    f"{did_you_mean(key, params)}\n{parameter_help(cls)}"
                )
            if self.untrusted is not None:
                self.untrusted.check(cls, key, value, self.text)
            kwargs[key] = self.convert(value, hints.get(key, Any), cls, key)
        missing = [k for k, p in params.items() if p.default is p.empty and k not in kwargs]
        if missing:
            raise SpecError(
                f"{cls.name}() is missing the required parameter(s) {', '.join(map(repr, missing))}"
                f"{self.context}\n{parameter_help(cls)}"
            )
        try:
            return cls(**kwargs)
        except (SpecError, UnknownComponentError):
            raise
        except (TypeError, ValueError) as err:
            raise SpecError(f"{cls.name}(): {err}{self.context}\n{parameter_help(cls)}") from err

    def convert(self, value: Any, tp: Any, cls: type[Component], key: str) -> Any:
        where = f"parameter {key!r} of {cls.name}(){self.context}"
        options = union_args(tp)
        if value is None:
            if type(None) in options or tp is Any:
                return None
            raise SpecError(f"{where} cannot be none; expected {_type_name(tp)}")
        kinds = tuple(
            kind
            for o in options
            for kind, base in KIND_BASES.items()
            if isinstance(o, type) and issubclass(o, base)
        )
        if kinds:
            if isinstance(value, Component):
                return value
            if isinstance(value, str) and str in options:  # a quoted value (a path) stays text
                return value
            if isinstance(value, str):
                value = parse(value)
            if (
                isinstance(value, Spec) and value.is_bare and str in options
            ):  # a word: a component, else text
                try:
                    return self.build(value, kinds)
                except UnknownComponentError:
                    return value.name
            if isinstance(value, Spec):
                return self.build(value, kinds)
            raise SpecError(f"{where} must name a {' or '.join(kinds)}, got {format_value(value)}")
        errors = []
        for option in options:
            try:
                return self._convert_plain(value, option, where)
            except SpecError as err:
                errors.append(err)
        raise errors[0]

    def _convert_plain(self, value: Any, tp: Any, where: str) -> Any:
        if isinstance(value, Spec) and not value.is_bare:
            raise SpecError(f"{where} takes a plain value, not the spec {value}")
        word = value.name if isinstance(value, Spec) else None
        origin = typing.get_origin(tp)
        if tp is Any:
            return word if word is not None else value
        if tp is type(None):  # none itself was taken by convert(); any other value is wrong here
            raise SpecError(f"{where} must be none, got {format_value(word or value)}")
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return _enum_member(tp, word if word is not None else value, where)
        if origin is Literal:
            allowed = typing.get_args(tp)
            candidate = word if word is not None else value
            if candidate in allowed:
                return candidate
            names = [str(a) for a in allowed]
            raise SpecError(
                f"{where} must be one of {', '.join(names)}, got {format_value(candidate)}."
                f"{did_you_mean(str(candidate), names)}"
            )
        if origin in (list, tuple) or tp in (list, tuple):
            if not isinstance(value, list):
                raise SpecError(f"{where} must be a list, got {format_value(value)}")
            inner = typing.get_args(tp)[:1] or (Any,)
            return [self._convert_plain(v, inner[0], where) for v in value]
        if tp is bool:
            if isinstance(value, bool):
                return value
        elif tp is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        elif tp is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        elif tp in (str, Path):
            if word is not None:
                return word
            if isinstance(value, str):
                return value
        else:
            return word if word is not None else value
        raise SpecError(f"{where} must be {_type_name(tp)}, got {format_value(word or value)}")


def _enum_member(tp: type[enum.Enum], value: Any, where: str) -> enum.Enum:
    """The member of ``tp`` that ``value`` is, or whose value or name it is."""
    if isinstance(value, tp):
        return value
    for member in tp:
        if value == member.value or (isinstance(value, str) and value == member.name):
            return member
    names = [str(m.value) for m in tp]
    raise SpecError(
        f"{where} must be one of {', '.join(names)}, got {format_value(value)}."
        f"{did_you_mean(str(value), names)}"
    )
