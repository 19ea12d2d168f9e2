"""The suite's own habits (tests/conftest.py): isolated from third-party plugins installed in the
environment, and one switch, ``CAPMETRICS_SLOW``, for the full-data tests."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.conftest import OWN_DISTRIBUTIONS, slow_enabled, third_party_plugins


def _fake_distribution(folder, name: str, plugin: str) -> None:
    info = folder / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[capmetrics]\n{plugin} = {plugin}_module\n")


def test_third_party_plugins_are_named_and_ours_are_not(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, "someone-elses-metrics", "theirs")
    _fake_distribution(tmp_path, "capmetrics-chrf", "chrf-copy")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    importlib.invalidate_caches()
    names = third_party_plugins()
    assert "theirs" in names and "chrf-copy" not in names
    assert not {"ngram", "meteor", "multicandidate"} & set(names)  # capmetrics' own entry points
    assert OWN_DISTRIBUTIONS == {"capmetrics", "capmetrics-chrf"}


@pytest.mark.parametrize(
    ("value", "enabled"), [(None, False), ("", False), ("0", False), ("1", True), ("yes", True)]
)
def test_one_reading_of_capmetrics_slow(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("CAPMETRICS_SLOW", raising=False)
    else:
        monkeypatch.setenv("CAPMETRICS_SLOW", value)
    assert slow_enabled() is enabled
