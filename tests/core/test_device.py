"""Device resolution in one place; GPU out-of-memory halves the batch (faked on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.cli import app
from capmetrics.runtime.device import (
    DeviceError,
    check_device,
    device_signature,
    in_halving_batches,
    resolve_device,
    run_device,
    use_device,
)
from typer.testing import CliRunner

from tests.conftest import SAMPLE

torch = pytest.importorskip("torch")
NO_GPU = not torch.cuda.is_available()


def test_devices_are_checked_and_resolved():
    for good in ("auto", "cpu", "cuda", "cuda:3"):
        assert check_device(good) == good
    for bad in ("gpu", "cuda:", "CUDA", "cuda:x", ""):
        with pytest.raises(DeviceError, match="unknown device"):
            check_device(bad)
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cpu" if NO_GPU else "cuda:0")
    assert run_device() == "auto"
    with use_device("cpu"):
        assert run_device() == "cpu" and resolve_device(None) == "cpu"
    assert device_signature("cpu") == {} and device_signature("cuda:1") == {"device": "cuda:1"}


@pytest.mark.skipif(not NO_GPU, reason="torch sees a GPU here")
def test_cuda_without_a_gpu_names_what_torch_sees():
    with pytest.raises(
        DeviceError, match=r"device 'cuda:1' is not available: torch .* sees no CUDA device"
    ):
        resolve_device("cuda:1")
    result = CliRunner().invoke(app, ["score", str(SAMPLE), "-m", "bleu-4", "--device", "cuda"])
    assert result.exit_code == 2
    assert (
        "Error: device 'cuda' is not available: torch" in result.output
        and "sees no CUDA device" in result.output
    )


def test_bad_device_option_is_a_usage_error():
    result = CliRunner().invoke(app, ["score", str(SAMPLE), "-m", "bleu-4", "--device", "gpu"])
    assert (
        result.exit_code == 2
        and "unknown device 'gpu'; use auto, cpu, cuda or cuda:N" in result.output
    )


def fake_model(limit: int, calls: list[int]):
    def run(texts, batch_size):
        calls.append(batch_size)
        if batch_size > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return np.array([[len(t), batch_size] for t in texts], dtype=float)[:, :1]

    return run


def test_out_of_memory_halves_the_batch_with_a_warning():
    calls: list[int] = []
    with pytest.warns(ResourceWarning) as caught:
        out = in_halving_batches(fake_model(2, calls), ["a", "bb", "ccc"], 16, "bert")
    assert calls == [16, 8, 4, 2] and out.ravel().tolist() == [1, 2, 3]
    assert [str(w.message) for w in caught] == [
        f"bert: out of GPU memory; retrying with batch_size={n}" for n in (8, 4, 2)
    ]
    with pytest.warns(ResourceWarning), pytest.raises(torch.cuda.OutOfMemoryError):
        in_halving_batches(fake_model(0, []), ["a"], 4, "bert")  # even one text does not fit
    with pytest.raises(ValueError, match="not memory"):
        in_halving_batches(
            lambda texts, size: (_ for _ in ()).throw(ValueError("not memory")), ["a"], 4, "x"
        )


def test_the_sentence_embedder_retries_on_out_of_memory(monkeypatch):
    pytest.importorskip("sentence_transformers")
    from capmetrics.plugins.embeddings import sentence
    from capmetrics.plugins.embeddings.sentence import SentenceTransformerEmbedder

    # a model whose pooling is not a plain mean runs through sentence-transformers itself (a
    # mean-pooling model is pooled from the shared token encoder)
    monkeypatch.setattr(sentence, "mean_pooling_layout", lambda path: None)

    class Encoder:
        sizes: list[int] = []

        def encode(self, texts, batch_size, **kwargs):
            self.sizes.append(batch_size)
            if batch_size > 16:
                raise RuntimeError("CUDA out of memory.")
            return np.ones((len(texts), 3), dtype=np.float32) * batch_size

    embedder = SentenceTransformerEmbedder(batch_size=64)
    embedder._encoder = Encoder()
    with pytest.warns(
        ResourceWarning, match="bert: out of GPU memory; retrying with batch_size=16"
    ):
        out = embedder.embed_texts(["x", "y", "x"])
    assert Encoder.sizes == [64, 32, 16] and out.shape == (3, 3) and (out == 16).all()
