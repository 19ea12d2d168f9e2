"""Issue 35: loading a shared file runs no code, and images are untrusted input.

Every test plays the attacker: the hostile checkpoint, pickle, model folder or image is built
here, in tmp_path, and the test checks that it ends in one named input error (exit 1 on the
command line) and that its payload did not run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import capmetrics
import pytest
from capmetrics.data.images import (
    ImageLimits,
    image_limits,
    image_problem,
    open_image,
    path_problem,
    use_image_limits,
)
from capmetrics.data.model import Dataset, Item
from capmetrics.errors import DataError, MetricError

from tests.conftest import DATA

pytest.importorskip("PIL")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "capmetrics.cli"]
GOOD_IMAGE = DATA / "clip" / "images" / "rocket.jpg"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=240, cwd=ROOT)


# ------------------------------------------------------------------------------------------
# hostile images
# ------------------------------------------------------------------------------------------
def png(path: Path, width: int, height: int, bit_depth: int = 8) -> Path:
    """A valid greyscale PNG of zeros, written row block by row block (a bomb stays small)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    row = b"\0" * (1 + (width * bit_depth + 7) // 8)  # filter byte + pixels
    packer = zlib.compressobj(9)
    block = row * max(1, min(height, (1 << 22) // len(row)))
    rows_per_block = len(block) // len(row)
    data = []
    for start in range(0, height, rows_per_block):
        data.append(
            packer.compress(block if start + rows_per_block <= height else row * (height - start))
        )
    data.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", b"".join(data))
        + chunk(b"IEND", b"")
    )
    return path


EPS = (
    b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n%%EndComments\n"
    b"newpath 0 0 moveto showpage\n%%EOF\n"
)


@pytest.fixture
def hostile_images(tmp_path: Path) -> dict[str, str]:
    bomb = png(tmp_path / "bomb.png", 30000, 30000, bit_depth=1)
    thin = png(tmp_path / "thin.png", 1, 100000)
    eps = tmp_path / "photo.jpg"
    eps.write_bytes(EPS)
    fifo = tmp_path / "fifo.jpg"
    os.mkfifo(fifo)
    long = "/" + "/".join(["a" * 200] * 25)  # 5025 characters
    return {"bomb": str(bomb), "thin": str(thin), "eps": str(eps), "fifo": str(fifo), "long": long}


def test_the_hostile_images_are_what_they_claim(hostile_images):
    from PIL import Image

    assert (
        os.path.getsize(hostile_images["bomb"]) < 200_000
        and os.path.getsize(hostile_images["thin"]) < 1000
    )
    with Image.open(hostile_images["thin"]) as thin:
        assert thin.size == (1, 100000)
    with Image.open(hostile_images["eps"]) as eps:  # unrestricted Pillow takes the .jpg for EPS
        assert eps.format == "EPS"
    assert len(hostile_images["long"]) == 5025


def test_a_decompression_bomb_is_refused_from_its_header(hostile_images):
    why = image_problem(hostile_images["bomb"])
    assert why is not None and "900,000,000 pixels" in why and "--max-image-pixels" in why
    with pytest.raises(MetricError, match="900,000,000 pixels, more than the limit of 89,478,485"):
        open_image(hostile_images["bomb"])


def test_a_one_pixel_wide_strip_is_refused_by_its_aspect_ratio(hostile_images):
    why = image_problem(hostile_images["thin"])
    assert why == (
        f"image {hostile_images['thin']!r} is 1 × 100000, an aspect ratio over the limit of 50:1 "
        "(raise it with --max-image-aspect or CAPMETRICS_MAX_IMAGE_ASPECT)"
    )
    with pytest.raises(MetricError, match="aspect ratio over the limit"):
        open_image(hostile_images["thin"])


def test_an_eps_file_named_jpg_is_refused_without_starting_ghostscript(hostile_images, monkeypatch):
    def no_programs(*args, **kwargs):
        raise AssertionError(f"a program was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", no_programs)
    monkeypatch.setattr(subprocess, "check_call", no_programs)
    why = image_problem(hostile_images["eps"])
    assert (
        why is not None
        and "is not an image file in an accepted format (JPEG, PNG, WEBP, BMP, TIFF, GIF)" in why
    )
    with pytest.raises(MetricError, match="accepted format"):
        open_image(hostile_images["eps"])


def test_paths_are_checked_for_length_and_kind(hostile_images, tmp_path):
    why = path_problem(hostile_images["long"])
    assert (
        why is not None and "is too long (5025 characters; at most 4096" in why and len(why) < 400
    )
    assert (
        image_problem(hostile_images["fifo"])
        == f"image {hostile_images['fifo']!r} is not a file (a pipe)"
    )
    assert image_problem(str(tmp_path)) == f"image {str(tmp_path)!r} is not a file (a folder)"
    assert image_problem("/dev/zero") == "image '/dev/zero' is not a file (a device)"
    assert image_problem(str(tmp_path / "gone.jpg")).endswith("does not exist")  # type: ignore[union-attr]
    assert image_problem("x\0y.jpg") == "image path 'x\\x00y.jpg' contains a NUL character"
    assert image_problem(str(GOOD_IMAGE)) is None


def test_every_hostile_image_is_reported_at_once_before_any_model_loads(hostile_images, tmp_path):
    items = [Item(name, ("a ref",), ("a caption",), path) for name, path in hostile_images.items()]
    items.append(Item("good", ("a ref",), ("a caption",), str(GOOD_IMAGE)))
    model = tmp_path / "never-read.pt"  # does not exist: loading it would be a different error
    with pytest.raises(DataError) as err:
        capmetrics.score(Dataset(items, "d.jsonl"), [f'clip-score(model="{model}")'])
    text = str(err.value)
    assert "5 problem(s)" in text and "'good'" not in text
    for name, words in [
        ("bomb", "900,000,000 pixels"),
        ("thin", "aspect ratio"),
        ("eps", "accepted format"),
        ("fifo", "a pipe"),
        ("long", "too long"),
    ]:
        assert f"item {name!r}:" in text and words in text
    assert all(len(line) < 400 for line in text.splitlines())


def test_the_cli_names_every_hostile_image_with_exit_1(hostile_images, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": k, "references": ["a ref"], "candidates": ["a caption"], "image": v})
            + "\n"
            for k, v in hostile_images.items()
        ),
        encoding="utf-8",
    )
    done = run_cli("score", str(data), "-m", f'clip-score(model="{tmp_path / "x.pt"}")', "-q")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "5 problem(s)" in done.stderr
    assert all(f"item {k!r}" in done.stderr for k in hostile_images)


def test_the_limits_can_be_raised(hostile_images, monkeypatch):
    assert image_limits() == ImageLimits()
    with use_image_limits(max_aspect=100000):
        assert image_problem(hostile_images["thin"]) is None
        with use_image_limits(max_pixels=10**9):  # nests: the aspect limit stays raised
            assert image_limits() == ImageLimits(10**9, 100000.0)
            # above Pillow's own guard (2 x PIL.Image.MAX_IMAGE_PIXELS) Pillow refuses it, named
            assert "Pillow's own limit" in image_problem(hostile_images["bomb"])  # type: ignore[operator]
    assert image_problem(hostile_images["thin"]) is not None
    monkeypatch.setenv("CAPMETRICS_MAX_IMAGE_ASPECT", "200000")
    assert image_problem(hostile_images["thin"]) is None
    monkeypatch.setenv("CAPMETRICS_MAX_IMAGE_ASPECT", "many")
    with pytest.raises(MetricError, match=r"\$CAPMETRICS_MAX_IMAGE_ASPECT must be a number"):
        image_limits()


# ------------------------------------------------------------------------------------------
# hostile checkpoints
# ------------------------------------------------------------------------------------------
torch = pytest.importorskip("torch")

EVIL_MODULE = """
import torch

class Evil(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x

    @torch.jit.export
    def __getstate__(self):
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]):
        hit = torch.from_file(VICTIM, True, SIZE, dtype=torch.uint8).fill_(88)
        self.w = state[0] + hit.sum().float() * 0
        self.training = state[1]
"""


@pytest.fixture
def evil_torchscript(tmp_path: Path) -> tuple[Path, Path]:
    """A TorchScript .pt whose scripted ``__setstate__`` overwrites ``victim`` with 'X's."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious data\n")
    source = tmp_path / "evil_module.py"
    source.write_text(
        EVIL_MODULE.replace("VICTIM", repr(str(victim))).replace("SIZE", str(victim.stat().st_size))
    )
    spec = importlib.util.spec_from_file_location("evil_module", source)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    path = tmp_path / "evil.pt"
    torch.jit.script(module.Evil()).save(str(path))
    return path, victim


def test_a_hostile_torchscript_checkpoint_runs_nothing(evil_torchscript, monkeypatch):
    from capmetrics.plugins.clip_score._checkpoints import load_checkpoint
    from capmetrics.plugins.clip_score.model import ClipModel

    path, victim = evil_torchscript

    def no_torch_loading(*args, **kwargs):
        raise AssertionError("torch was asked to load the archive")

    with monkeypatch.context() as patch:  # the kind is decided from the zip's entries, before torch
        patch.setattr(torch.jit, "load", no_torch_loading)
        patch.setattr(torch, "load", no_torch_loading)
        with pytest.raises(MetricError) as err:
            load_checkpoint(str(path))
        with pytest.raises(MetricError, match="is a TorchScript archive"):
            ClipModel(str(path)).embed_texts(["a cat"])
    message = str(err.value)
    assert "\n" not in message and "trust_code=true" in message and "--trust-code" in message
    assert f'torch.save(torch.jit.load({str(path)!r}, map_location="cpu").state_dict()' in message
    assert victim.read_bytes() == b"precious data\n"
    with pytest.raises(
        MetricError, match="not a CLIP checkpoint"
    ):  # trusted: it loads, and its code runs
        load_checkpoint(str(path), trust_code=True)
    assert victim.read_bytes() == b"X" * 14


def test_the_cli_refuses_the_torchscript_checkpoint_and_trust_code_lets_it_load(
    evil_torchscript, tmp_path
):
    path, victim = evil_torchscript
    data = tmp_path / "d.jsonl"
    data.write_text(
        json.dumps({"id": "a", "references": ["r"], "candidates": ["c"], "image": str(GOOD_IMAGE)})
        + "\n",
        encoding="utf-8",
    )
    done = run_cli("score", str(data), "-m", f'clip-score(model="{path}")', "-q")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "is a TorchScript archive" in done.stderr and victim.read_bytes() == b"precious data\n"
    done = run_cli("score", str(data), "-m", f'clip-score(model="{path}")', "-q", "--trust-code")
    assert done.returncode == 1 and "not a CLIP checkpoint" in done.stderr, done.stderr
    assert victim.read_bytes() == b"X" * 14  # the flag reached the loader (and the file's code ran)


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_hostile_pickle_checkpoint_is_a_named_error(tmp_path):
    from capmetrics.plugins.clip_score._checkpoints import load_checkpoint

    marker = tmp_path / "pwned"
    for name, _obj in [("legacy.pt", None), ("zipped.pt", None)]:
        path = tmp_path / name
        if name == "legacy.pt":
            path.write_bytes(pickle.dumps({"w": Payload(marker)}, protocol=2))
        else:
            torch.save({"w": Payload(marker)}, str(path))
        with pytest.raises(MetricError) as err:
            load_checkpoint(str(path))
        message = str(err.value)
        assert (
            "\n" not in message
            and "holds more than tensors" in message
            and "weights_only=True" in message
        )
        assert "weights_only set to False" not in message
    assert not marker.exists()


def test_a_hugging_face_folder_with_a_hostile_pickle_is_a_named_error_exit_1(tmp_path):
    pytest.importorskip("transformers")
    from transformers import CLIPConfig

    folder = tmp_path / "hf"
    config = CLIPConfig(
        text_config=dict(
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=2,
            vocab_size=100,
            max_position_embeddings=16,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=32,
            patch_size=16,
        ),
        projection_dim=16,
    )
    config.save_pretrained(str(folder))
    marker = tmp_path / "pwned"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": Payload(marker)}, protocol=2))
    from capmetrics.plugins.clip_score._checkpoints import load_checkpoint

    with pytest.raises(
        MetricError, match="its weights are a pickle that holds more than tensors"
    ) as err:
        load_checkpoint(str(folder))
    assert "\n" not in str(err.value)
    data = tmp_path / "d.jsonl"
    data.write_text(
        json.dumps({"id": "a", "references": ["r"], "candidates": ["c"], "image": str(GOOD_IMAGE)})
        + "\n",
        encoding="utf-8",
    )
    done = run_cli("score", str(data), "-m", f'clip-score(model="{folder}")', "-q")
    assert done.returncode == 1 and "holds more than tensors" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_checkpoint_that_is_a_pipe_or_a_device_is_refused_at_once(tmp_path, kind):
    path = "/dev/zero"
    if kind == "fifo":
        path = str(tmp_path / "model.pt")
        os.mkfifo(path)
    code = (
        "from capmetrics.plugins.clip_score._checkpoints import load_checkpoint\n"
        f"try:\n    load_checkpoint({path!r})\n"
        "except Exception as e:\n    print(type(e).__name__, e)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.stdout.startswith("MetricError") and "is not a regular file" in done.stdout, (
        done.stdout
    )


def test_a_model_file_cannot_turn_trust_code_on(tmp_path):
    import shutil

    from capmetrics.plugins.nneval.learner import NNEval
    from capmetrics.plugins.nneval.model_files import SHIPPED_DIR

    folder = tmp_path / "model"
    shutil.copytree(SHIPPED_DIR / "flickr8k-paper", folder)
    meta = json.loads((folder / "nneval.json").read_text())
    meta["features"][0] = 'clip-score(model=clip-model(path="evil.pt", trust_code=true))'
    (folder / "nneval.json").write_text(json.dumps(meta))
    with pytest.raises(
        MetricError, match="parameter 'trust_code' of clip-model.*names a program or code to run"
    ):
        NNEval.load(folder)


def test_any_loader_refusing_a_pickle_is_an_input_error_not_an_internal_one():
    from capmetrics.errors import component_errors

    refusal = pickle.UnpicklingError(
        "Weights only load failed. Re-running `torch.load` with `weights_only` set to "
        "False will likely succeed\nWeightsUnpickler error: \n\nUnsupported operand 149"
    )
    with pytest.raises(MetricError) as err, component_errors("bert(model=shared)"):
        raise refusal
    assert str(err.value).startswith(
        "bert(model=shared): a weights file it read is a pickle that holds more than "
        "tensors (Unsupported operand 149)"
    )
    assert "\n" not in str(err.value) and "set to False" not in str(err.value)


def test_archives_are_told_apart_by_their_entries_not_their_names(evil_torchscript, tmp_path):
    from capmetrics.plugins.clip_score._checkpoints import is_torchscript

    plain = (
        tmp_path / "code.pt"
    )  # torch.save names the archive's root folder after the file: code/data.pkl
    torch.save({"w": torch.zeros(2)}, str(plain))
    scripted = (
        tmp_path / "scripted" / "code.pt"
    )  # a TorchScript archive of the same name: code/code/...
    scripted.parent.mkdir()
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(scripted))
    not_zip = tmp_path / "legacy.pt"
    not_zip.write_bytes(pickle.dumps({"w": 1}))
    checked = [is_torchscript(p) for p in (plain, scripted, evil_torchscript[0], not_zip)]
    assert checked == [False, True, True, False]


def test_the_clip_text_embedder_refuses_torchscript_too(evil_torchscript):
    path, victim = evil_torchscript
    embedder = capmetrics.compose(f'clip(model="{path}")', "embedder")
    with pytest.raises(MetricError, match="is a TorchScript archive"):
        embedder.embed_texts(["a cat"])
    assert victim.read_bytes() == b"precious data\n"
    from capmetrics.io.trust import use_trust_code

    with use_trust_code(True), pytest.raises(MetricError, match="not a CLIP checkpoint"):
        capmetrics.compose(f'clip(model="{path}")', "embedder").embed_texts(["a cat"])
    assert victim.read_bytes() == b"X" * 14  # the run's --trust-code reached the loader
