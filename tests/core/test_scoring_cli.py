"""Scoring, results output (JSON/CSV/table, atomic) and the command line."""

from __future__ import annotations

import json
import os

import capmetrics
import numpy as np
import pytest
from capmetrics import hookimpl
from capmetrics.cli import app
from capmetrics.data import load_dataset
from capmetrics.engine.results import Results
from typer.testing import CliRunner

from tests.conftest import DATA, SAMPLE
from tests.registry.test_registry import Overlap

runner = CliRunner()


class OverlapPlugin:
    @hookimpl
    def register_distances(self, register):
        register(Overlap)


@pytest.fixture
def overlap(add_plugin):
    add_plugin(OverlapPlugin(), "overlap-test")


def test_score_distance_and_statistic_on_sample(overlap):
    ds = load_dataset(SAMPLE)
    res = capmetrics.score(ds, ["overlap", "over-candidates(distance=overlap, reduce=max)"])
    plain, best = res["overlap"], res["over-candidates(distance=overlap, reduce=max)"]
    first = ds[0]
    ref_words = {w for r in first.references for w in r.split()}
    expected = [len(set(c.split()) & ref_words) / len(c.split()) for c in first.candidates]
    assert plain.candidate_values[0].tolist() == pytest.approx(expected)
    assert plain.item_values[0] == pytest.approx(np.mean(expected))
    assert best.item_values[0] == pytest.approx(max(expected))
    assert (
        plain.signature["nrefs"] == "5" and plain.signature["capmetrics"] == capmetrics.__version__
    )
    assert plain.signature_string.startswith("overlap|nrefs:5|capmetrics:")


def test_json_output_of_array_details(overlap):
    res = capmetrics.score(load_dataset(SAMPLE), ["overlap"])
    res["overlap"].details.update(
        per={"f": np.array([0.5, np.nan]), "n": np.int64(3)}, flag=np.bool_(True)
    )
    details = json.loads(res.to_json())["metrics"][0]["details"]
    assert details["per"] == {"f": [0.5, None], "n": 3} and details["flag"] is True


def test_json_and_csv_output(overlap, tmp_path):
    res = capmetrics.score(load_dataset(SAMPLE), ["overlap"])
    data = json.loads(res.to_json())
    assert data["schema"] == "capmetrics.engine.results/1"
    assert data["data"] == {
        "source": str(SAMPLE),
        "items": 20,
        "candidates": 112,
        "skipped": [],
        "empty_candidates": [],
    }
    metric = data["metrics"][0]
    assert metric["name"] == "overlap" and metric["corpus"] == pytest.approx(res["overlap"].corpus)
    assert len(metric["items"]) == 20 and len(metric["items"][0]["candidates"]) == len(
        load_dataset(SAMPLE)[0].candidates
    )
    rows = res.to_csv().splitlines()
    assert rows[0] == "metric,level,item,candidate,value,p_value,signature"
    assert rows[1].startswith(f"overlap,corpus,,,{res['overlap'].corpus!r},,overlap|nrefs:5")
    assert len(rows) == 1 + 1 + 20 + 112


def test_csv_fields_are_quoted_as_the_csv_module_does(overlap):
    import csv
    import io

    from capmetrics.data import Dataset, Item

    ids = ["plain", "with,comma", 'with "quotes"', "line\nbreak", " spaced ", "3"]
    data = Dataset([Item(i, ("a dog is running",), ("a dog runs", "a cat")) for i in ids])
    res = capmetrics.score(data, ["overlap"])
    res["overlap"].item_values[1] = np.nan
    text = res.to_csv()
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\n")
    writer.writerows(list(csv.reader(io.StringIO(text))))
    assert text == expected.getvalue()  # the csv module writes the same bytes back
    rows = list(csv.reader(io.StringIO(text)))
    assert [r[2] for r in rows if r[1] == "item"] == ids
    assert [r[4] for r in rows if r[1] == "item"][1] == "nan"
    assert [r[3] for r in rows if r[1] == "candidate"][:2] == ["0", "1"]
    first = [r for r in rows if r[1] == "candidate" and r[2] == "plain"]
    assert first[0][4] == repr(float(res["overlap"].candidate_values[0][0]))


def test_atomic_write_leaves_no_partial_file(overlap, tmp_path, monkeypatch):
    res = capmetrics.score(load_dataset(SAMPLE), ["overlap"])
    out = tmp_path / "out.json"
    out.write_text("previous run\n")

    def boom(self, handle):  # interrupted half way through writing, piece by piece
        handle.write('{"schema": ')
        raise KeyboardInterrupt

    monkeypatch.setattr(Results, "write_json", boom)
    with pytest.raises(KeyboardInterrupt):
        res.write(out)
    assert out.read_text() == "previous run\n"
    assert os.listdir(tmp_path) == ["out.json"]


def test_cli_version_and_plugins():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"capmetrics {capmetrics.__version__}\n"
    result = runner.invoke(app, ["plugins", "--kind", "aggregator", "--json"])
    rows = json.loads(result.output)
    assert {
        "kind": "aggregator",
        "name": "mean",
        "aliases": [],
        "plugin": "aggregators",
        "package": "capmetrics",
        "version": capmetrics.__version__,
        "summary": "Arithmetic mean.",
        "ready": True,
        "readied_by": None,
    } in rows
    result = runner.invoke(app, ["plugins", "--kind", "aggregatr"])
    assert result.exit_code == 2 and "Did you mean 'aggregator'?" in result.output


def test_cli_score_writes_json_and_table(overlap, tmp_path):
    out = tmp_path / "res.json"
    result = runner.invoke(app, ["score", str(SAMPLE), "-m", "overlap", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["metrics"][0]["spec"] == "overlap"
    result = runner.invoke(app, ["score", str(SAMPLE), "-m", "overlap", "-q"])
    assert result.exit_code == 0
    assert (
        "same for all: nrefs:5|capmetrics:" in result.output
        and "20 items, 112 candidates" in result.output
    )
    result = runner.invoke(app, ["score", str(SAMPLE), "-m", "overlap", "-q", "--signatures"])
    assert "overlap: overlap|nrefs:5|capmetrics:" in result.output


def test_cli_errors_are_one_message_and_no_output_file(overlap, tmp_path):
    out = tmp_path / "res.json"
    result = runner.invoke(app, ["score", str(SAMPLE), "-m", "overlapp", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output == (
        "Error: unknown metric 'overlapp'; did you mean overlap? "
        "(`capmetrics plugins` lists them all)\n"
    )
    assert "Traceback" not in result.output
    result = runner.invoke(
        app, ["score", str(DATA / "bad" / "problems.jsonl"), "-m", "overlap", "--out", str(out)]
    )
    assert (
        result.exit_code == 1
        and "6 problem(s)" in result.output
        and "duplicate id" in result.output
    )
    assert not out.exists() and os.listdir(tmp_path) == []


def test_cli_skip_invalid_lists_skipped_items(overlap, tmp_path):
    out = tmp_path / "res.json"
    args = [
        "score",
        str(DATA / "bad" / "gts.json"),
        "--results",
        str(DATA / "bad" / "res.json"),
        "-m",
        "overlap",
        "--skip-invalid",
        "--out",
        str(out),
        "-q",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [i["id"] for i in data["metrics"][0]["items"]] == ["1", "3"]
    assert [s["item"] for s in data["data"]["skipped"]] == ["4", "2"]


def test_config_file_names_components(overlap, tmp_path):
    cfg = tmp_path / "capmetrics.toml"
    cfg.write_text(
        '[score]\nmetrics = ["overlap", "best"]\nformat = "csv"\n\n'
        '[components.best]\ncomponent = "over-candidates"\ndistance = "overlap"\nreduce = "max"\n'
    )
    result = runner.invoke(app, ["score", str(SAMPLE), "--config", str(cfg), "-q"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(
        line.startswith("best,corpus,,,")
        and "over-candidates(distance=overlap, reduce=max)|" in line
        for line in lines
    )
    cfg.write_text('[components.bad]\ndistance = "x"\n[scores]\n')
    result = runner.invoke(app, ["score", str(SAMPLE), "--config", str(cfg), "-q"])
    assert result.exit_code == 1
    assert "unknown table [scores]" in result.output
    assert "[components.bad]: needs a key component" in result.output


def test_debug_shows_traceback(overlap):
    try:
        result = runner.invoke(app, ["--debug", "score", str(SAMPLE), "-m", "overlapp"])
        assert result.exit_code != 0 and isinstance(
            result.exception, capmetrics.UnknownComponentError
        )
    finally:
        runner.invoke(
            app, ["plugins", "--kind", "learner"]
        )  # resets the debug flag for later tests


def test_table_shows_the_combined_p_value_of_statistics():
    res = capmetrics.score(load_dataset(SAMPLE), ["trm(distance=bleu-4)", "bleu-4"])
    trm = res["trm(distance=bleu-4)"]
    assert trm.p_values is not None and len(trm.p_values) == 20
    hmp = capmetrics.compose("hmp")(trm.p_values)
    assert trm.details["hmp"] == pytest.approx(hmp)
    lines = res.to_table().splitlines()
    assert "p (HMP)" in lines[2]
    assert f"{hmp:.4f}" in next(line for line in lines if line.startswith("│ trm(distance=bleu-4)"))


def test_item_means_equal_numpy_means_bit_for_bit():
    from capmetrics.engine.scoring import item_means

    rng = np.random.default_rng(0)
    for _ in range(100):
        counts = rng.integers(1, 40, size=rng.integers(1, 60))
        offsets = np.r_[0, np.cumsum(counts)]
        values = rng.random(offsets[-1]) * rng.choice([1.0, 1e-3, 1e6])
        expected = [values[offsets[i] : offsets[i + 1]].mean() for i in range(len(counts))]
        assert item_means(values, offsets).tolist() == expected
    assert np.isnan(item_means(np.ones(2), [0, 2, 2])[1])  # an item without candidates has no mean


def test_streamed_json_is_byte_identical_to_the_json_encoder():
    import io

    from capmetrics.engine.results import MetricResult, Results

    ids = ["a", 'quote " and \\ back', "caf\u00e9 \u6f22\u5b57 \U0001f600", 7, "line\nbreak"]
    with_p = MetricResult(
        "trm(distance=cider-d)",
        "trm(distance=cider-d)",
        "statistic",
        True,
        0.5,
        ids,
        np.array([0.1, np.nan, 1e-300, -0.0, 3.0]),
        [np.zeros(0)] * 5,
        {"spec": "trm"},
        p_values=np.array([0.04, 1.0, np.nan, 0.5, 1e-5]),
        details={"hmp": 0.01},
    )
    plain = MetricResult(
        "bleu-4",
        "bleu-4",
        "distance",
        True,
        float("nan"),
        ids,
        np.array([0.25, 0.5, 0.0, 1.0, 0.75]),
        [
            np.array([0.25]),
            np.array([0.5, np.inf]),
            np.array([0.0, 0.1, 0.2]),
            np.array([1.0]),
            np.array([0.75, 1 / 3]),
        ],
        {"spec": "bleu-4", "tokenizer": "ptb"},
    )
    empty = MetricResult(
        "rouge-l", "rouge-l", "distance", True, 0.0, [], np.zeros(0), [], {"spec": "rouge-l"}
    )
    res = Results("data.jsonl", 5, 9, [plain, with_p, empty], [], "0.1.0")
    streamed = io.StringIO()
    res.write_json(streamed)
    assert streamed.getvalue() == res.to_json()
    data = json.loads(streamed.getvalue())
    assert data["metrics"][0]["items"][1] == {
        "id": 'quote " and \\ back',
        "value": 0.5,
        "candidates": [0.5, None],
    }
    assert data["metrics"][1]["items"][2]["p_value"] is None and data["metrics"][2]["items"] == []
