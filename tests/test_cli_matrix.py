"""Every bundled distance and statistic through the command line in every output format on the
bundled sample: a written file, strict JSON, no raw traceback. Also: an unexpected exception in a
component becomes one line with the exit status of internal errors, and no output file."""

from __future__ import annotations

import csv
import io
import subprocess
import sys

import numpy as np
import pytest
from capmetrics import Distance, Scores, compose, hookimpl
from capmetrics.cli import EXIT_INTERNAL, app
from capmetrics.io.strict_json import loads_strict
from capmetrics.testing import registered_specs
from typer.testing import CliRunner

from tests.conftest import SAMPLE
from tests.test_conformance import NEEDS_USER_FILES

runner = CliRunner()
SPECS = [
    s
    for s in registered_specs(("distance", "statistic"))
    if s.split("(")[0] not in NEEDS_USER_FILES
]
SPECS += [
    "bleu-4(tokenizer=whitespace)",
    "bleu-4(tokenizer=ptb-jar)",
    "wembsim(embedder=spacy-vectors)",
    "over-candidates(distance=cider-d, reduce=max)",
]


#: Specs whose every run starts a JVM that loads METEOR's paraphrase table (~10 s): json runs in
#: CI; csv and table repeat its path (the writers are the same for every metric, and every other
#: spec runs in all three formats here), so they run only with CAPMETRICS_SLOW=1.
ONE_FORMAT = {"meteor-jar"}
REPEAT = pytest.mark.slow(
    full=True,
    reason=(
        "a JVM run repeating the json run of the same spec; CI runs "
        "test_score_every_metric_in_every_format[meteor-jar-json] and every other spec's csv/table"
    ),
)
FORMATS = ["json", "csv", "table"]
CASES = [
    pytest.param(spec, fmt, marks=[REPEAT] if spec in ONE_FORMAT and fmt != "json" else [])
    for spec in SPECS
    for fmt in FORMATS
]


@pytest.mark.parametrize(("spec", "fmt"), CASES)
def test_score_every_metric_in_every_format(spec, fmt, tmp_path):
    out = tmp_path / f"scores.{fmt}"
    result = runner.invoke(
        app, ["score", str(SAMPLE), "-m", spec, "--out", str(out), "--format", fmt, "-q"]
    )
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = out.read_text(encoding="utf-8")
    per_item = (
        20 if compose(spec).kind == "statistic" else 112
    )  # a statistic has one value per item
    if fmt == "json":
        data = loads_strict(text)
        metric = data["metrics"][0]
        assert metric["spec"] and len(metric["items"]) == 20
        values = [v for item in metric["items"] for v in item["candidates"]]
        assert len(values) == per_item and any(v is not None for v in values)
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert len(rows) == 1 + 20 + per_item and rows[0]["level"] == "corpus"
    else:
        assert "20 items, 112 candidates" in text


class Broken(Distance):
    """Divides by the number of words: a bug on an empty candidate."""

    name = "broken-metric"

    def score(self, candidates, references):
        values = np.array([1 / (len(c.split()) - len(c.split())) for c in candidates])
        return Scores(values, float(values.mean()))


class BrokenPlugin:
    @hookimpl
    def register_distances(self, register):
        register(Broken)


def test_internal_error_is_one_line_with_its_own_exit_status(add_plugin, tmp_path):
    add_plugin(BrokenPlugin(), "broken-test")
    out = tmp_path / "scores.json"
    result = runner.invoke(
        app, ["score", str(SAMPLE), "-m", "broken-metric", "--out", str(out), "-q"]
    )
    assert result.exit_code == EXIT_INTERNAL
    lines = result.output.strip().splitlines()
    assert lines[0] == "Error: internal error in broken-metric: ZeroDivisionError: division by zero"
    assert "--debug" in lines[1] and "Traceback" not in result.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_debug_shows_the_traceback(add_plugin):
    add_plugin(BrokenPlugin(), "broken-test")
    result = runner.invoke(app, ["--debug", "score", str(SAMPLE), "-m", "broken-metric", "-q"])
    assert isinstance(result.exception.__cause__, ZeroDivisionError)


def test_the_script_never_prints_a_raw_traceback(tmp_path):
    """A real process: an unexpected error outside any metric (here an unreadable output path
    that is a directory) is one line, exit status 3 or an input error, never a traceback."""
    (tmp_path / "out.json").mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "capmetrics.cli",
            "score",
            str(SAMPLE),
            "-m",
            "bleu-1",
            "--out",
            str(tmp_path / "out.json"),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (1, EXIT_INTERNAL)
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("Error: ")


def test_meta_json_is_strict_without_bootstrap(tmp_path):
    """``--bootstrap 0`` leaves the intervals undefined: null in JSON, never a NaN token."""
    import json

    data = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:6]]
    judged = tmp_path / "judged.jsonl"
    judged.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"{d['id']}-{k}",
                    "image": d["id"],
                    "references": d["references"],
                    "candidate": c,
                    "rating": (k + i) % 4 + 1,
                }
            )
            + "\n"
            for i, d in enumerate(data)
            for k, c in enumerate(d["candidates"][:3])
        )
    )
    result = runner.invoke(
        app, ["meta", str(judged), "-m", "bleu-1", "--bootstrap", "0", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    row = loads_strict(result.output)[0]
    assert row["kendall_c_low"] is None and isinstance(row["kendall_c"], float)


def test_plugins_json_is_strict():
    result = runner.invoke(app, ["plugins", "--json"])
    rows = loads_strict(result.output)
    assert {r["name"] for r in rows} >= {"bleu-4", "trm", "ptb"}
