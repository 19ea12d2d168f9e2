"""The hook reference documents every hook with its real signature; every bundled component
appears in the metric and component reference."""

from __future__ import annotations

import inspect
import re

import pytest

from capmetrics import hookspecs

from tests.conftest import ROOT

HOOKS_DOC = ROOT / "docs" / "plugins" / "plugin-hooks.md"


def hook_names() -> list[str]:
    return [n for n, f in vars(hookspecs).items()
            if callable(f) and hasattr(f, "capmetrics_spec")]


def test_every_hook_is_in_the_module():
    assert set(hook_names()) == {
        "register_distances", "register_embedders", "register_aggregators", "register_statistics",
        "register_tokenizers", "register_learners", "register_probability_sources", "register_pregen_metrics",
        "register_pregen_tiers", "register_image_text_models",
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
    assert (ROOT / "docs" / "components.md").read_text(encoding="utf-8") == _generator("generate_components").render()


def _generator(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_is_up_to_date():
    """docs/usage/cli.md documents every command and option; regenerate it with
    ``python docs/generate_cli.py``."""
    assert (ROOT / "docs" / "usage" / "cli.md").read_text(encoding="utf-8") == _generator("generate_cli").render()
