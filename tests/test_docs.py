"""The hook reference documents every hook with its real signature; every bundled component
appears in the metric and component reference."""

from __future__ import annotations

import inspect
import re

import pytest
from capmetrics.components import hookspecs

from tests.conftest import ROOT

HOOKS_DOC = ROOT / "docs" / "plugins" / "plugin-hooks.md"


def hook_names() -> list[str]:
    return [n for n, f in vars(hookspecs).items() if callable(f) and hasattr(f, "capmetrics_spec")]


def test_every_hook_is_in_the_module():
    assert set(hook_names()) == {
        "register_distances",
        "register_embedders",
        "register_aggregators",
        "register_statistics",
        "register_tokenizers",
        "register_learners",
        "register_probability_sources",
        "register_pregen_metrics",
        "register_pregen_tiers",
        "register_image_text_models",
        "register_image_text_metrics",
        "register_commands",
    }


@pytest.mark.parametrize("hook", hook_names())
def test_hook_documented_with_its_signature(hook):
    headings = re.findall(r"^## (\w+)\((.*)\)$", HOOKS_DOC.read_text(), re.MULTILINE)
    documented = dict(headings)
    assert hook in documented, f"{hook} has no section in {HOOKS_DOC}"
    params = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    assert documented[hook] == ", ".join(params)
    assert f"(plugin-hooks-{hook.replace('_', '-')})=" in HOOKS_DOC.read_text()


def test_no_documented_hook_is_missing_from_the_code():
    headings = re.findall(r"^## (\w+)\(", HOOKS_DOC.read_text(), re.MULTILINE)
    assert sorted(headings) == sorted(hook_names())


def test_components_page_is_up_to_date():
    """docs/components.md lists every bundled component; regenerate it with
    ``python docs/generate_components.py``."""
    assert (ROOT / "docs" / "components.md").read_text(encoding="utf-8") == _generator(
        "generate_components"
    ).render()


def _generator(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_is_up_to_date():
    """docs/usage/cli.md documents every command and option; regenerate it with
    ``python docs/generate_cli.py``."""
    assert (ROOT / "docs" / "usage" / "cli.md").read_text(encoding="utf-8") == _generator(
        "generate_cli"
    ).render()


def test_architecture_page_lists_every_family_with_the_components_it_registers():
    """docs/plugins/architecture.md has one row per plugin family package (the bundled entry
    points and ``java``), naming in backticks exactly the components that family registers."""
    import tomllib
    from capmetrics import KINDS
    from capmetrics.registry import get_registry

    page = (ROOT / "docs" / "plugins" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## The families\n", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\| `(\w+)` \| (.+?) \| .+ \|$", section, re.MULTILINE))
    packages = {p.parent.name for p in (ROOT / "plugins").glob("*/__init__.py")}
    assert sorted(table) == sorted(packages)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entry_points = pyproject["project"]["entry-points"]["capmetrics"]
    assert {name: f"capmetrics.plugins.{name}" for name in entry_points} == entry_points
    assert set(entry_points) <= packages
    registered: dict[str, set[str]] = {}
    for kind in KINDS:
        for entry in get_registry().components(kind):
            registered.setdefault(entry.plugin.name, set()).add(entry.name)
    for family, cell in table.items():
        named = {n for n in re.findall(r"`([^`]+)`", cell) if not n.startswith("capmetrics ")}
        assert sorted(named) == sorted(registered.get(family, set())), f"the {family} row"
        if family not in entry_points:
            assert cell.startswith("(none"), f"the {family} row: no entry point, no components"
