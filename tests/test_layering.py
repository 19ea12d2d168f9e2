"""The house is one-way: core and registry import nothing from ``capmetrics.plugins``; the
plugins folder holds family packages; every name of the public API page imports without an
underscore."""

from __future__ import annotations

import ast
import importlib
import re

import pytest

from tests.conftest import ROOT


def imports(path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


@pytest.mark.parametrize("layer", ["core", "registry"])
def test_core_and_registry_import_no_plugin(layer):
    offenders = [f"{p.relative_to(ROOT)}: {name}" for p in sorted((ROOT / layer).rglob("*.py"))
                 for name in imports(p) if name.startswith("capmetrics.plugins")]
    assert offenders == []


def test_plugins_folder_holds_families():
    """Every plugin module lives in a family package; private helpers live inside their family."""
    loose = [p.name for p in (ROOT / "plugins").iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    assert loose == [], "put plugin modules in a family package (plugins/<family>/)"


def test_public_api_page_names_import():
    page = (ROOT / "docs" / "plugins" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(capmetrics[\w.]*)` \| (.+) \|$", page, re.MULTILINE)
    assert len(rows) >= 8
    for module, names in rows:
        mod = importlib.import_module(module)
        for name in re.findall(r"`(\w+)`", names):
            assert not name.startswith("_") and hasattr(mod, name), f"{module}.{name}"
