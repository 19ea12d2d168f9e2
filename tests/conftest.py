"""Shared fixtures. Real data comes from ../shared/data (next to the project root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capmetrics.registry import register_plugin, unregister_plugin

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SHARED = ROOT.parent / "shared"
FLICKR8K = SHARED / "data" / "flickr8k"
SAMPLE = ROOT / "core" / "sample" / "flickr8k_expert_sample.jsonl"


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
