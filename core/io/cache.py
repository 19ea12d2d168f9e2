"""One cache root for every component: ``$CAPMETRICS_CACHE_DIR``, else
``$XDG_CACHE_HOME/capmetrics``, else ``~/.cache/capmetrics``. Components keep their own
sub-folder under it (``meteor/``, ``spice/``, ``vectors/``...)."""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable that overrides the cache root of every component.
CACHE_ENV = "CAPMETRICS_CACHE_DIR"


def cache_root() -> Path:
    """The cache root shared by every component (not created here)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "capmetrics"


def component_cache(name: str) -> Path:
    """The cache folder of one component family, e.g. ``component_cache("spice")``."""
    return cache_root() / name


#: The values that turn a cache's switch variable off.
OFF_VALUES = ("0", "off", "false", "no")


def switched_on(variable: str) -> bool:
    """Whether the cache switched by the environment variable ``variable`` is on: unset or any
    value but ``0``/``off``/``false``/``no`` (case and spaces ignored)."""
    return os.environ.get(variable, "1").strip().lower() not in OFF_VALUES
