"""The house is one-way: core and registry import nothing from ``capmetrics.plugins``; the
plugins folder holds family packages; every name of the public API page imports without an
underscore."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

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
    offenders = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in sorted((ROOT / layer).rglob("*.py"))
        for name in imports(p)
        if name.startswith("capmetrics.plugins")
    ]
    assert offenders == []


def test_plugins_folder_holds_families():
    """Every plugin module lives in a family package; private helpers live inside their family."""
    loose = [
        p.name
        for p in (ROOT / "plugins").iterdir()
        if p.suffix == ".py" and p.name != "__init__.py"
    ]
    assert loose == [], "put plugin modules in a family package (plugins/<family>/)"


def test_public_api_page_names_import():
    page = (ROOT / "docs" / "plugins" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(capmetrics[\w.]*)` \| (.+) \|$", page, re.MULTILINE)
    assert len(rows) >= 8
    for module, names in rows:
        mod = importlib.import_module(module)
        for name in re.findall(r"`(\w+)`", names):
            assert not name.startswith("_") and hasattr(mod, name), f"{module}.{name}"


def module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, module)`` of every import that runs when the module is imported: outside function
    bodies and ``if TYPE_CHECKING:`` blocks."""
    found: list[tuple[int, str]] = []

    def walk(nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                walk(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.extend((node.lineno, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.append((node.lineno, node.module))
            walk(list(ast.iter_child_nodes(node)))

    walk(list(tree.body))
    return found


def test_module_level_imports_sees_only_what_runs_at_import() -> None:
    tree = ast.parse(
        "import a\nif TYPE_CHECKING:\n    import b\nelse:\n    import c\n"
        "def f():\n    import d\nclass K:\n    from e import x\n"
    )
    assert module_level_imports(tree) == [(1, "a"), (5, "c"), (9, "e")]


def test_core_does_not_import_the_registry_at_module_level() -> None:
    """core ← registry is one way: core resolves names through the registry only inside the
    functions that compose (the registry loads plugins, which import core)."""
    offenders = [
        f"{p.relative_to(ROOT)}:{line}: {name}"
        for p in sorted((ROOT / "core").rglob("*.py"))
        for line, name in module_level_imports(ast.parse(p.read_text(encoding="utf-8")))
        if name == "capmetrics.registry" or name.startswith("capmetrics.registry.")
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "module",
    [
        "capmetrics.registry",
        "capmetrics",
        "capmetrics.engine.scoring",
        "capmetrics.components.spec",
        "capmetrics.registry.compose",
    ],
)
def test_each_layer_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    """No import order is needed: each of these is the first capmetrics import of a process."""
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_families_import_only_each_others_public_names() -> None:
    """A family uses another family's public names (no ``_name``, no ``_module``): what it shares
    is public in one place."""
    found = set()
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        family = path.relative_to(ROOT / "plugins").parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("capmetrics.plugins.")
            ):
                continue
            parts = node.module.split(".")
            if parts[2] == family:
                continue
            for alias in node.names:
                if any(p.startswith("_") for p in (*parts[3:], alias.name)):
                    found.add((family, f"{node.module}.{alias.name}"))
    assert found == set()


#: Core's folders, lowest first: a module imports (at module level) only from its own folder and
#: the folders before it. ``errors`` is below all of them; the package root, ``cli`` and
#: ``testing`` sit above all of them.
CORE_LAYERS = (
    "errors",
    "runtime",
    "io",
    "data",
    "components",
    "engine",
    "analysis",
    "integrations",
    "cli",
)


def test_core_folders_are_layered_one_way() -> None:
    """The folder names draw the core: runtime → io → data → components → engine → analysis →
    integrations → cli, each importing only what lies below it (imports inside functions are
    the run-time hooks, e.g. a component asking the engine for the run's prepared tokens)."""
    offenders = []
    rank = {name: i for i, name in enumerate(CORE_LAYERS)}
    for path in sorted((ROOT / "core").rglob("*.py")):
        parts = path.relative_to(ROOT / "core").parts
        if len(parts) == 1:  # __init__, _moved, errors, testing: the root's own modules
            if parts[0] != "errors.py":
                continue
            here = "errors"
        else:
            here = parts[0]
        assert here in rank, f"core/{here}/ is not in CORE_LAYERS: place it in the order"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in module_level_imports(tree):
            bits = name.split(".")
            if bits[0] != "capmetrics" or len(bits) < 2 or bits[1] not in rank:
                continue
            if rank[bits[1]] > rank[here]:
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert offenders == []


def test_core_root_holds_only_the_package_its_errors_and_the_kit() -> None:
    loose = sorted(p.name for p in (ROOT / "core").glob("*.py"))
    assert loose == ["__init__.py", "_moved.py", "errors.py", "testing.py"]


def test_architecture_page_describes_every_core_folder_in_layer_order() -> None:
    page = (ROOT / "docs" / "plugins" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Core, by concern", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)(?:/|\.py)` \|", section, re.MULTILINE)
    folders = sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").is_file())
    assert tuple(rows) == CORE_LAYERS
    assert sorted(rows[1:]) == [f for f in folders if f != "sample"]
