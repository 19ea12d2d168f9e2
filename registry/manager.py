"""The plugin manager and the component table built from it.

Plugins are found through the entry-point group ``capmetrics``; the bundled plugins are entry
points of the capmetrics distribution itself, so they load exactly like third-party ones.

Environment variables:

``CAPMETRICS_DISABLE_PLUGINS``
    comma-separated entry-point names of plugins not to load (bundled ones included).
``CAPMETRICS_DISABLE_PLUGIN_AUTOLOAD``
    if set to a non-empty value other than ``0``, load only the plugins of capmetrics itself.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import inspect
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy
from capmetrics.components import hookspecs
from capmetrics.components.base import KIND_BASES, KINDS, METRIC_KINDS, Component
from capmetrics.components.spec import normalize_name
from capmetrics.errors import PluginError, UnknownComponentError

GROUP = hookspecs.PROJECT
DISABLE_ENV = "CAPMETRICS_DISABLE_PLUGINS"
AUTOLOAD_ENV = "CAPMETRICS_DISABLE_PLUGIN_AUTOLOAD"

#: hook name → component kind
HOOK_KINDS: dict[str, str] = {f"register_{k.replace('-', '_')}s": k for k in KINDS}


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its entry-point name and the distribution that provides it."""

    name: str
    module: str
    distribution: str
    version: str

    def describe(self) -> str:
        return f"plugin {self.name!r} from {self.distribution} {self.version} ({self.module})"


@dataclass(frozen=True)
class ComponentEntry:
    """One registered component."""

    name: str
    kind: str
    cls: type[Component]
    plugin: PluginInfo
    aliases: tuple[str, ...] = ()

    @property
    def summary_markdown(self) -> str:
        """The first paragraph of the class docstring, with reStructuredText literals
        (````x````) as Markdown code (```x```)."""
        doc = inspect.getdoc(self.cls) or ""
        return re.sub(r"``(.+?)``", r"`\1`", " ".join(doc.split("\n\n")[0].split()))

    @property
    def summary(self) -> str:
        """The first paragraph of the class docstring as plain text (for terminals and JSON)."""
        return self.summary_markdown.replace("`", "")


@dataclass
class Registry:
    """Components of every kind, by canonical name, with the plugin that provides each."""

    plugin_manager: pluggy.PluginManager
    plugins: list[PluginInfo] = field(default_factory=list)
    entries: dict[str, dict[str, ComponentEntry]] = field(
        default_factory=lambda: {k: {} for k in KINDS}
    )

    def names(self, kind: str) -> list[str]:
        """Canonical names of the components of ``kind``, sorted (aliases left out)."""
        return sorted({e.name for e in self.entries[kind].values()})

    def components(self, kind: str | None = None) -> list[ComponentEntry]:
        """Every component (of ``kind``), one entry per component, sorted by kind and name."""
        kinds = [kind] if kind else list(KINDS)
        seen: dict[tuple[str, str], ComponentEntry] = {}
        for k in kinds:
            for entry in self.entries[k].values():
                seen[(k, entry.name)] = entry
        return [seen[key] for key in sorted(seen, key=lambda x: (KINDS.index(x[0]), x[1]))]

    def lookup(
        self, name: str, kinds: Iterable[str] | None = None, context: str = ""
    ) -> ComponentEntry:
        """Find a component by name among ``kinds`` (all kinds if None).

        Raises:
            UnknownComponentError: with close matches and the names of the kinds searched.
        """
        kinds = list(kinds or KINDS)
        key = normalize_name(name)
        found = [self.entries[k][key] for k in kinds if key in self.entries[k]]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            which = ", ".join(f"{e.kind} {e.name!r} ({e.plugin.distribution})" for e in found)
            raise UnknownComponentError(
                f"name {name!r} is ambiguous{context}: it is a {which}; "
                "use it where only one kind is accepted"
            )
        label = " or ".join(kinds) if len(kinds) < len(KINDS) else "component"
        label = "metric" if set(kinds) == set(METRIC_KINDS) else label
        choices = sorted({n for k in kinds for n in self.entries[k]})
        where = "" if normalize_name(context) == normalize_name(f" in spec {name!r}") else context
        best = _closest(key, choices)
        if best:  # one line: the likely fix
            raise UnknownComponentError(
                f"unknown {label} {name!r}{where}; did you mean {best}? "
                "(`capmetrics plugins` lists them all)"
            )
        lines = [f"unknown {label} {name!r}{where}."]
        for k in kinds:
            lines.append(f"Available {k}s: {', '.join(self.names(k)) or '(none)'}")
        lines.append(
            "If it comes from a third-party package, install it; `capmetrics plugins` lists what "
            "is loaded."
        )
        raise UnknownComponentError("\n".join(lines))


def _closest(word: str, choices: list[str]) -> str | None:
    """The name ``word`` most likely meant: the closest of ``choices`` (difflib), and among
    names that extend it (``bleu`` -> ``bleu-4``) the highest-numbered; None if none is close."""
    close = difflib.get_close_matches(word, choices, n=5, cutoff=0.6)
    if not close:
        return None
    extending = [c for c in close if c.startswith(word)]
    return max(extending) if extending else close[0]


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The entry points of group ``capmetrics``, one distribution per name (the first on the
    path, as Python imports it); only those distributions' metadata is read."""
    return list(importlib.metadata.entry_points(group=GROUP))


def _blocked() -> set[str]:
    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


def _autoload_disabled() -> bool:
    return os.environ.get(AUTOLOAD_ENV, "") not in ("", "0")


def make_plugin_manager() -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """Build the plugin manager and load every entry point of group ``capmetrics``."""
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    blocked = _blocked()
    for name in blocked:
        pm.set_blocked(name)
    infos: list[PluginInfo] = []
    own_only = _autoload_disabled()
    for ep in _entry_points():
        dist_name, dist_version = (
            (ep.dist.metadata["Name"], ep.dist.version) if ep.dist else ("(unknown)", "")
        )
        if (own_only and dist_name.lower() != "capmetrics") or ep.name in blocked:
            continue
        source = f"{dist_name} {dist_version}"
        if pm.get_plugin(ep.name) is not None:
            other = next(i for i in infos if i.name == ep.name)
            raise PluginError(
                f"plugin name {ep.name!r} is used twice:\n"
                f"  {other.describe()}\n  entry point {ep.value} from {source}\n"
                f"Uninstall one, or block one with {DISABLE_ENV}={ep.name}."
            )
        try:
            plugin = ep.load()
        except Exception as err:
            raise PluginError(
                f"could not import plugin {ep.name!r} (entry point {ep.value}) from "
                f"{source}:\n{type(err).__name__}: {err}"
            ) from err
        try:
            pm.register(plugin, name=ep.name)
        except pluggy.PluginValidationError as err:
            raise PluginError(f"invalid plugin {ep.name!r} from {source}:\n{err}") from err
        infos.append(PluginInfo(ep.name, ep.value, dist_name, dist_version))
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as err:
        raise PluginError(str(err)) from err
    return pm, infos


def collect_components(pm: pluggy.PluginManager, infos: list[PluginInfo]) -> Registry:
    """Call every plugin's ``register_*`` hooks, one plugin at a time, and build the table.

    Raises:
        PluginError: a name registered twice within one kind (naming both packages), or a
            registered object that is not a component class of that kind.
    """
    registry = Registry(pm, list(infos))
    by_name = {i.name: i for i in infos}
    for pname, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked
            continue
        info = by_name.get(pname) or PluginInfo(
            pname, getattr(plugin, "__name__", repr(plugin)), "(registered in code)", ""
        )
        if pname not in by_name:
            registry.plugins.append(info)
        for hook_name, kind in HOOK_KINDS.items():
            caller = getattr(pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    impl.function(register=_registrar(registry, kind, info))
    return registry


def _registrar(registry: Registry, kind: str, info: PluginInfo) -> Callable[..., None]:
    base = KIND_BASES[kind]

    def register(cls: type[Component], aliases: Iterable[str] = ()) -> None:
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise PluginError(
                f"{info.describe()} registered {cls!r} as a {kind}, "
                f"but it is not a subclass of capmetrics.{base.__name__}"
            )
        if not cls.name:
            raise PluginError(
                f"{info.describe()} registered {cls.__name__} without a class attribute 'name'"
            )
        cls.constructor_parameters()  # refuses *args/**kwargs early, naming the class
        entry = ComponentEntry(normalize_name(cls.name), kind, cls, info, tuple(aliases))
        for key in (entry.name, *map(normalize_name, aliases)):
            old = registry.entries[kind].get(key)
            if old is not None:
                raise PluginError(
                    f"{kind} name {key!r} is registered twice:\n"
                    f"  {old.plugin.describe()}\n  {info.describe()}\n"
                    f"Uninstall one, or block one with {DISABLE_ENV}={old.plugin.name} "
                    f"or {DISABLE_ENV}={info.name}."
                )
            registry.entries[kind][key] = entry

    return register


_lock = threading.Lock()
_registry: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, built on first use."""
    global _registry
    with _lock:
        if _registry is None:
            pm, infos = make_plugin_manager()
            _registry = collect_components(pm, infos)
        return _registry


def reset_registry(registry: Registry | None = None) -> None:
    """Forget the process-wide registry (or replace it); the next use rebuilds it."""
    global _registry
    with _lock:
        _registry = registry


def register_plugin(plugin: Any, name: str) -> Registry:
    """Register a plugin object in code (tests, notebooks) and rebuild the component table."""
    reg = get_registry()
    taken = reg.plugin_manager.get_plugin(name)
    if taken is not None or reg.plugin_manager.is_registered(plugin):
        where = (
            f"the name {name!r} is taken (by {getattr(taken, '__name__', type(taken).__name__)})"
            if taken is not None
            else f"{getattr(plugin, '__name__', plugin)!r} is registered already "
            f"as {reg.plugin_manager.get_name(plugin)!r}"
        )
        raise PluginError(
            f"cannot register plugin {name!r}: {where}; an installed package is loaded by its "
            "entry point already (unregister_plugin(name) first, or use another name)"
        )
    reg.plugin_manager.register(plugin, name=name)
    new = collect_components(
        reg.plugin_manager, [p for p in reg.plugins if p.distribution != "(registered in code)"]
    )
    reset_registry(new)
    return new


def unregister_plugin(name: str) -> Registry:
    """Undo :func:`register_plugin`."""
    reg = get_registry()
    reg.plugin_manager.unregister(name=name)
    new = collect_components(
        reg.plugin_manager, [p for p in reg.plugins if p.distribution != "(registered in code)"]
    )
    reset_registry(new)
    return new
