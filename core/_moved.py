"""Former module paths, kept working: ``capmetrics.scoring`` is :mod:`capmetrics.engine.scoring`.

Core is laid out by concern (``runtime``, ``io``, ``data``, ``components``, ``engine``,
``analysis``, ``integrations``, ``cli``). Every module that lived at the top level before keeps
its old import path as an alias: importing it gives the very module object at its new place
(``import``, ``from ... import``, ``mock.patch`` targets and pickles that name the old path all
reach the same objects). The finder imports nothing until an old path is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

#: Former path (under ``capmetrics.``) -> present path (under ``capmetrics.``).
MOVED: dict[str, str] = {
    "component": "components.base",
    "hookspecs": "components.hookspecs",
    "spec": "components.spec",
    "protocols": "components.protocols",
    "language": "components.language",
    "scoring": "engine.scoring",
    "streaming": "engine.streaming",
    "parallel": "engine.parallel",
    "prestart": "engine.prestart",
    "progress": "engine.progress",
    "prepared": "engine.prepared",
    "identity": "io.identity",
    "device": "runtime.device",
    "collector": "runtime.collector",
    "allocator": "runtime.allocator",
    "interrupts": "runtime.interrupts",
    "notices": "engine.notices",
    "results": "engine.results",
    "atomic": "io.atomic",
    "config": "engine.config",
    "cache": "io.cache",
    "strict_json": "io.strict_json",
    "embedding_cache": "io.embedding_cache",
    "trust": "io.trust",
    "meta": "analysis.meta",
    "compare": "analysis.compare",
    "permutation": "components.permutation",
    "pvalues": "components.pvalues",
    "plots": "analysis.plots",
    "sampling": "data.sampling",
    # the integrations' earlier homes
    "hf": "integrations.hf",
    "rewards": "integrations.rewards",
    "torchmetrics": "integrations.torchmetrics",
    "compat": "integrations",
    "compat.cider": "integrations.cider",
    "compat.pycocoevalcap": "integrations.pycocoevalcap",
}

_PREFIX = "capmetrics."


class _Alias(importlib.abc.Loader):
    """Loads a former path as the module at its present path (no second copy)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias's spec on the module: give it back its own
        module.__spec__ = self._spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds former paths ahead of the path finders (which would load a second copy)."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_PREFIX):
            return None
        present = MOVED.get(fullname[len(_PREFIX) :])
        if present is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(_PREFIX + present))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
