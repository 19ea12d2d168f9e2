"""Plugin loading, the component table, and the spec language."""

from capmetrics.components.spec import Spec, format_value, parse
from capmetrics.registry.compose import METRIC_KINDS, compose, parameter_help
from capmetrics.registry.manager import (
    ComponentEntry,
    PluginInfo,
    Registry,
    get_registry,
    make_plugin_manager,
    register_plugin,
    reset_registry,
    unregister_plugin,
)

__all__ = [
    "METRIC_KINDS",
    "ComponentEntry",
    "PluginInfo",
    "Registry",
    "Spec",
    "compose",
    "format_value",
    "get_registry",
    "make_plugin_manager",
    "parameter_help",
    "parse",
    "register_plugin",
    "reset_registry",
    "unregister_plugin",
]
