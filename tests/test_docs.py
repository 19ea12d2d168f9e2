"""The hook reference documents every hook with its real signature; every bundled component
appears in the metric and component reference."""

from __future__ import annotations

import inspect
import re

import pytest

from capmetrics import hookspecs
from capmetrics.registry import get_registry

from tests.conftest import ROOT

HOOKS_DOC = ROOT / "docs" / "plugins" / "plugin-hooks.md"


def hook_names() -> list[str]:
    return [n for n, f in vars(hookspecs).items()
            if callable(f) and hasattr(f, "capmetrics_spec")]


def test_every_hook_is_in_the_module():
    assert set(hook_names()) == {
        "register_distances", "register_embedders", "register_aggregators", "register_statistics",
        "register_tokenizers", "register_learners", "register_probability_sources", "register_commands",
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


def test_components_page_is_up_to_date(monkeypatch):
    """docs/components.md lists every bundled component; regenerate it with
    ``python docs/generate_components.py``."""
    import importlib.util

    monkeypatch.setenv("CAPMETRICS_DISABLE_PLUGIN_AUTOLOAD", "1")
    spec = importlib.util.spec_from_file_location("generate_components", ROOT / "docs" / "generate_components.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "components.md").read_text(encoding="utf-8") == module.render()
