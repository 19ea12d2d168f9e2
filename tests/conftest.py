"""Shared fixtures. Real data comes from ../shared/data (next to the project root).

Two habits of the suite live here:

- **Isolated from installed plugins.** The tests see capmetrics' own plugins and the contrib
  chrF package (tests/test_contrib.py installs it), never a third-party plugin that happens to
  be installed in the environment: their entry-point names go into ``CAPMETRICS_DISABLE_PLUGINS``
  before any registry is built, so subprocesses (the CLI tests) inherit the block too.
- **One way to mark slow tests**: ``@pytest.mark.slow`` for a slow test that runs by default
  (``-m "not slow"`` leaves it out), ``@pytest.mark.slow(full=True, reason=...)`` for a
  full-data run of minutes that runs only with ``CAPMETRICS_SLOW=1`` (read here, nowhere else).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest
from capmetrics.registry import register_plugin, unregister_plugin

#: Distributions whose plugins the tests may load: capmetrics itself and the contrib example.
OWN_DISTRIBUTIONS = frozenset({"capmetrics", "capmetrics-chrf"})
#: ``CAPMETRICS_SLOW=1`` (any value but empty or 0) runs the full-data tests.
SLOW_ENV = "CAPMETRICS_SLOW"


def third_party_plugins() -> list[str]:
    """Entry-point names of group ``capmetrics`` from distributions other than ours."""
    names = []
    for ep in importlib.metadata.entry_points(group="capmetrics"):
        dist = (ep.dist.metadata["Name"] or "") if ep.dist else ""
        if dist.lower().replace("_", "-") not in OWN_DISTRIBUTIONS:
            names.append(ep.name)
    return sorted(set(names))


def _block_third_party_plugins() -> None:
    blocked = [
        n.strip() for n in os.environ.get("CAPMETRICS_DISABLE_PLUGINS", "").split(",") if n.strip()
    ]
    extra = [n for n in third_party_plugins() if n not in blocked]
    if extra:
        os.environ["CAPMETRICS_DISABLE_PLUGINS"] = ",".join(blocked + extra)


_block_third_party_plugins()


def slow_enabled() -> bool:
    """Whether ``CAPMETRICS_SLOW`` asks for the full-data tests."""
    return os.environ.get(SLOW_ENV, "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow(full=False, reason=None): a slow test; with full=True a full-data "
        "run of minutes, skipped unless CAPMETRICS_SLOW=1",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if slow_enabled():
        return
    for item in items:
        full = [m for m in item.iter_markers("slow") if m.kwargs.get("full")]
        if full:
            why = full[0].kwargs.get("reason") or "a full-data run"
            item.add_marker(pytest.mark.skip(reason=f"{why}; set {SLOW_ENV}=1"))


ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SHARED = ROOT.parent / "shared"
FLICKR8K = SHARED / "data" / "flickr8k"
SAMPLE = ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"


@pytest.fixture(scope="session")
def meteor_jvm():
    """One METEOR 1.5 jar JVM for the jar's test modules (test_meteor.py, then
    test_meteor_native.py, whose ``pair`` closes it): each start loads the paraphrase table
    (~10 s, 1 GB). A ``MeteorJar`` borrows it as ``jar.__dict__["_jvms"] = {0: meteor_jvm}``
    (its command line does not depend on the tokenizer or ``max_tokens``)."""
    from capmetrics.plugins.meteor import MeteorJar

    owner = MeteorJar()
    yield owner._process()
    owner.close()


@pytest.fixture
def add_plugin():
    """Register plugin objects for one test; they are unregistered afterwards."""
    names: list[str] = []

    def add(plugin: object, name: str) -> None:
        register_plugin(plugin, name)
        names.append(name)

    yield add
    for name in reversed(names):
        unregister_plugin(name)
