"""An interrupted run ends at once, even during METEOR's first-use build (capmetrics.engine.prestart
sets ``stop``; METEOR's preparation terminates its children and builds nothing in-process)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest


def test_stop_during_meteors_first_use_ends_its_children(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("pycocoevalcap")
    from capmetrics.plugins.meteor import _child, _resources, native

    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path))
    _resources.load_resources.cache_clear()
    native._lexicon.cache_clear()
    started: list = []
    real_start = _child.start_child

    def start(step: str, root: Path):  # type: ignore[no-untyped-def]
        child = real_start(step, root)
        started.append(child)
        return child

    monkeypatch.setattr(_child, "start_child", start)
    monkeypatch.setattr(_resources, "run_child", lambda s, r: _child.finish(start(s, r)))
    stop = threading.Event()
    errors: list[BaseException] = []

    def prepare() -> None:
        try:
            native.Meteor().prepare([], [], stop)
        except Exception as err:  # noqa: BLE001 - what the prestart thread would swallow
            errors.append(err)

    thread = threading.Thread(target=prepare)
    thread.start()
    deadline = time.monotonic() + 120
    while not any(c is not None and c.poll() is None for c in started):
        assert time.monotonic() < deadline and thread.is_alive(), "no build child started"
        time.sleep(0.05)
    stop.set()
    thread.join(60)
    assert not thread.is_alive(), "the preparation did not stop"
    assert all(c is None or c.poll() is not None for c in started)  # no child left running
    assert not _child._STOPS and all(c.poll() is not None for c in _child._LIVE)
    assert [str(e) for e in errors] in ([], ["METEOR's first-use build was stopped"])
    assert not list((tmp_path / "meteor").glob("*/*/manifest.json"))  # nothing half-built
    _resources.load_resources.cache_clear()
    native._lexicon.cache_clear()
