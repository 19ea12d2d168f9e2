"""Issue 35, "inputs are bounded" and the battery's leftovers, each row played as the attacker
(or the user) would: the CLI in a subprocess, a one-line named error, exit 1, within seconds.

- data, config and cache files must be regular files: ``/dev/zero``, ``/dev/urandom`` and FIFOs
  are refused before anything reads them; a file over the size limit (``--max-input-size``,
  ``$CAPMETRICS_MAX_INPUT_SIZE``) is refused before it is read;
- ids are strings or integers of a sane length (a 5000-digit id, a ``10**5000`` dict key); dict
  ids ``1`` and ``"1"`` are refused as in files;
- nesting is bounded in every JSON and TOML reader, METEOR's cache manifests included;
- ``--sample-candidates`` keeps the items' images; ``np.str_`` captions are strings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import capmetrics
import numpy as np
import pytest
from capmetrics.data.loaders import load_dataset
from capmetrics.data.model import Dataset, Item
from capmetrics.data.sampling import sample_dataset
from capmetrics.errors import DataError
from capmetrics.io.strict_json import parse_json, parse_size, read_bytes, read_json

from tests.conftest import SAMPLE

CLI = [sys.executable, "-m", "capmetrics.cli"]
ROW = {"references": ["a dog runs on the grass", "a brown dog runs"], "candidates": ["a dog runs"]}


def run_cli(
    *args: object, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, float]:
    """``capmetrics ARGS`` in a subprocess, and the seconds it took."""
    start = time.monotonic()
    proc = subprocess.run(
        [*CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return proc, time.monotonic() - start


def refused(proc: subprocess.CompletedProcess, *words: str, code: int = 1) -> str:
    """The error text of a refused run: exit ``code``, no traceback, naming ``words``."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- devices, FIFOs and folders are not data files ---------------------------------------------
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_data_is_refused_at_once(device: str) -> None:
    proc, seconds = run_cli("score", device, "-m", "bleu-1")
    refused(proc, device, "must be a regular file", "character device")
    assert seconds < 30


@pytest.mark.parametrize("name", ["data.jsonl", "data.json"])
def test_a_fifo_as_data_is_refused_without_opening_it(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes: never here
    proc, seconds = run_cli("score", fifo, "-m", "bleu-1")
    refused(proc, "FIFO", "must be a regular file")
    assert seconds < 30


def test_a_fifo_or_device_as_config_or_results_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    refused(
        run_cli("score", SAMPLE, "--config", fifo)[0], "config file must be a regular file", "FIFO"
    )
    annotations = tmp_path / "gts.json"
    annotations.write_text(json.dumps({"1": ["a dog runs"]}), encoding="utf-8")
    refused(
        run_cli("score", annotations, "--results", "/dev/zero", "-m", "bleu-1")[0],
        "/dev/zero",
        "character device",
    )


def test_a_folder_is_named_as_a_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="must be a regular file; this is a folder"):
        load_dataset(tmp_path)


# -- the size limit ------------------------------------------------------------------------------
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, **ROW} for i in range(100)])
    size = data.stat().st_size
    text = refused(
        run_cli("score", data, "-m", "bleu-1", "--max-input-size", "2K")[0],
        f"{size:,} bytes is over the input size limit of 2,048 bytes",
        "--max-input-size",
        "CAPMETRICS_MAX_INPUT_SIZE",
    )
    assert len(text.strip().splitlines()) == 2  # the header and the one problem
    refused(
        run_cli("score", data, "-m", "bleu-1", env={"CAPMETRICS_MAX_INPUT_SIZE": "1K"})[0],
        "over the input size limit of 1,024 bytes",
    )
    proc, _ = run_cli("score", data, "-m", "bleu-1", "--max-input-size", "1M", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["data"]["items"] == 100


def test_a_streamed_line_over_the_limit_is_refused(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": 0, **ROW}, {"id": 1, "references": ["x" * 5000], "candidates": ["y"]}],
    )
    refused(
        run_cli("score", data, "-m", "bleu-1", "--chunk-size", "1", "--max-input-size", "1K")[0],
        "d.jsonl:2: a line over the input size limit of 1,024 bytes",
    )


def test_a_malformed_size_is_a_usage_error() -> None:
    refused(
        run_cli("score", SAMPLE, "--max-input-size", "lots")[0],
        "--max-input-size must be a size",
        code=2,
    )


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1073741824", 1 << 30),
        ("512M", 512 << 20),
        ("4G", 4 << 30),
        ("2GiB", 2 << 30),
        ("1.5k", 1536),
        ("100 MB", 100 << 20),
    ],
)
def test_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_read_bytes_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"a" * 100)
    assert read_bytes(path, max_bytes=100) == b"a" * 100
    with pytest.raises(DataError, match="100 bytes is over the input size limit of 99 bytes"):
        read_bytes(path, max_bytes=99)


# -- ids of a sane length; 1 and "1" are one id --------------------------------------------------
def test_a_5000_digit_jsonl_id_is_refused_by_name(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(
        '{"id": ' + "9" * 5000 + ', "references": ["a dog"], "candidates": ["a dog"]}\n'
    )
    text = refused(
        run_cli("score", data, "-m", "bleu-1")[0],
        "d.jsonl:1",
        "an integer of 5,000 digits",
        "ids are strings or integers of a sane length",
    )
    assert len(text) < 400


def test_a_huge_dict_key_is_refused_before_scoring() -> None:
    with pytest.raises(DataError, match="item id is an integer of more than 1000 digits") as err:
        capmetrics.score(
            candidates={10**5000: ["a dog"]},
            references={10**5000: ["a dog runs"]},
            metrics=["bleu-1"],
        )
    assert len(err.value.problems) == 1
    with pytest.raises(
        TypeError, match=r"candidates\[an integer of more than 1000 digits\] must be a caption"
    ):
        capmetrics.score(
            candidates={10**5000: 5}, references={10**5000: ["a dog"]}, metrics=["bleu-1"]
        )
    big = 10**999  # 1000 digits: a sane (if odd) id, written to every output
    res = capmetrics.score(
        candidates={big: ["a dog"]}, references={big: ["a dog runs"]}, metrics=["bleu-1"]
    )
    assert str(big) in res.render("csv")


def test_a_long_string_id_is_refused(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "x" * 1001, **ROW}])
    refused(run_cli("score", data, "-m", "bleu-1")[0], "1,001 characters long (at most 1000)")


def test_dict_ids_1_and_text_1_are_refused_as_in_files() -> None:
    with pytest.raises(DataError, match="item ids 1 and '1' are both present"):
        capmetrics.score(
            candidates={1: ["a dog"], "1": ["a cat"]},
            references={1: ["a dog runs"], "1": ["a cat sits"]},
            metrics=["bleu-1"],
        )


def test_numpy_ids_are_the_ints_and_strings_they_hold() -> None:
    res = capmetrics.score(
        candidates={np.int64(3): ["a dog"], np.str_("b"): ["a cat"]},
        references={np.int64(3): ["a dog runs"], np.str_("b"): ["a cat sits"]},
        metrics=["bleu-1"],
    )
    ids = res["bleu-1"].item_ids
    assert ids == [3, "b"] and [type(i) for i in ids] == [int, str]


# -- nesting is bounded in every reader ---------------------------------------------------------
def test_deeply_nested_json_data_is_a_named_error(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_text("[" * 100000 + "]" * 100000)
    refused(run_cli("score", data, "-m", "bleu-1")[0], "JSON nested too deeply")


def test_a_toml_config_with_50000_nested_lists_is_a_named_error(tmp_path: Path) -> None:
    config = tmp_path / "deep.toml"
    config.write_text("[score]\nmetrics = " + "[" * 50000 + "]" * 50000 + "\n")
    refused(
        run_cli("score", SAMPLE, "--config", config)[0], "invalid config", "TOML nested too deeply"
    )
    config.write_text("[score]\nmetrics = " + "[" * 70 + "]" * 70 + "\n")  # parses, and is refused
    refused(run_cli("score", SAMPLE, "--config", config)[0], "TOML nested more than 64 levels deep")


def test_json_readers_refuse_depth_long_integers_and_nan(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nested more than 3 levels"):
        parse_json('{"a": [[[1]]]}', "x", max_depth=3)
    assert parse_json('{"a": [[1]]}', "x", max_depth=3) == {"a": [[1]]}
    with pytest.raises(DataError, match="integer of 1,001 digits"):
        parse_json("1" * 1001, "x")
    assert parse_json("NaN", "x") != parse_json("NaN", "x")  # data files may hold Python's NaN
    path = tmp_path / "m.json"
    path.write_text("NaN")
    with pytest.raises(DataError, match="non-standard JSON token NaN"):
        read_json(path, allow_nan=False)


def test_a_meteor_manifest_nested_100000_deep_is_a_damaged_folder(tmp_path: Path) -> None:
    from capmetrics.plugins.meteor._tables import (
        CorruptFolder,
        check_folder,
        read_folder,
        write_folder,
    )

    folder = tmp_path / "part"
    write_folder(folder, {"a": np.arange(3)}, {"version": 1})
    assert check_folder(folder)["a"].tolist() == [0, 1, 2]
    (folder / "manifest.json").write_text("[" * 100000)
    with pytest.raises(
        CorruptFolder, match="manifest.json is not readable JSON .*nested too deeply"
    ):
        check_folder(folder)
    assert read_folder(folder) is None  # a run moves it aside and rebuilds it
    (folder / "manifest.json").write_text('{"arrays": {"a": ' + "9" * 5000 + "}}")
    with pytest.raises(CorruptFolder, match="integer of 5,000 digits"):
        check_folder(folder)


def test_a_hostile_digest_memo_is_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capmetrics.plugins.meteor import _resources

    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path))
    memo = tmp_path / "meteor" / "digests.json"
    memo.parent.mkdir(parents=True)
    memo.write_text("[" * 100000)
    target = tmp_path / "file.bin"
    target.write_bytes(b"abc")
    assert _resources._known_digest(target) == _resources._digest(target)
    assert str(target) in json.loads(memo.read_text())


# -- sampling keeps images; numpy strings are strings -------------------------------------------
def test_sampling_keeps_each_items_image(tmp_path: Path) -> None:
    items = [
        Item(i, ("a dog runs", "a dog"), ("a dog", "a cat", "a cow"), image=tmp_path / f"{i}.jpg")
        for i in range(5)
    ]
    sampled = sample_dataset(Dataset(items, "<mem>"), candidates=1, references=1, seed=3)
    assert [item.image for item in sampled] == [item.image for item in items]
    assert all(len(item.candidates) == 1 and len(item.references) == 1 for item in sampled)
    for before, after in zip(items, sampled):
        assert set(after.candidates) <= set(before.candidates)


def test_sampling_through_the_loader_keeps_resolved_images(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    for i in range(3):
        (tmp_path / "img" / f"{i}.jpg").write_bytes(b"")
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "references": ["a dog"], "candidates": ["a", "b"]} for i in range(3)],
    )
    dataset = load_dataset(data, images=tmp_path / "img")
    assert all(item.image is not None for item in dataset)
    sampled = sample_dataset(dataset, candidates=1)
    assert [item.image for item in sampled] == [item.image for item in dataset]


@pytest.mark.parametrize("metric", ["bleu-4", "cider-d", "rouge-l", "bleu-2(tokenizer=whitespace)"])
def test_numpy_strings_score_as_strings(metric: str) -> None:
    cands = ["a dog runs on the grass", "a man rides a bike"]
    refs = [
        ["a dog is running on the grass", "a brown dog runs"],
        ["a man is riding a bicycle", "a cyclist"],
    ]
    as_numpy = list(np.array(cands)), [list(np.array(r)) for r in refs]
    assert all(type(c) is np.str_ for c in as_numpy[0])
    plain = capmetrics.score(candidates=cands, references=refs, metrics=[metric])[metric]
    numpy = capmetrics.score(candidates=as_numpy[0], references=as_numpy[1], metrics=[metric])[
        metric
    ]
    assert numpy.corpus == plain.corpus and np.array_equal(numpy.item_values, plain.item_values)
    component = capmetrics.compose(metric)
    assert component.score(*as_numpy).corpus == component.score(cands, refs).corpus == plain.corpus


def test_str_subclass_captions_are_stored_as_str() -> None:
    class Caption(str):
        pass

    res = capmetrics.score(
        candidates=[Caption("a dog runs")],
        references=[[Caption("a dog is running")]],
        metrics=["bleu-1"],
    )
    assert (
        res["bleu-1"].corpus
        == capmetrics.score(
            candidates=["a dog runs"], references=[["a dog is running"]], metrics=["bleu-1"]
        )["bleu-1"].corpus
    )


# -- the other readers of user files go through the same bounds ---------------------------------
def test_judgments_and_probability_files_are_bounded(tmp_path: Path) -> None:
    from capmetrics.data.judgments import load_judgments
    from capmetrics.plugins.pregen.sources import read_probs

    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": 1}\n' + "[" * 100000 + "\n")
    with pytest.raises(DataError, match=r"deep.jsonl:2: JSON nested too deeply"):
        load_judgments(deep)
    with pytest.raises(DataError, match=r"deep.jsonl:2: JSON nested too deeply"):
        read_probs(deep)
    fifo = tmp_path / "probs.json"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="must be a regular file; this is a FIFO"):
        read_probs(fifo)


def test_plotting_a_hostile_results_file_is_a_named_error(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    results.write_text("[" * 100000)
    proc, _ = run_cli("plot", "p-values", results, "--out", tmp_path / "out.png")
    refused(proc, "not a capmetrics results JSON", "nested too deeply")


def test_an_nneval_model_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    from capmetrics.plugins.nneval.model_files import read_model_json

    fifo = tmp_path / "nneval.json"
    os.mkfifo(fifo)
    with pytest.raises(
        DataError, match="an NNEval model file must be a regular file; this is a FIFO"
    ):
        read_model_json(fifo)
