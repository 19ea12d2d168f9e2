"""``capmetrics verify``: the stored reference values, the table and exit codes, a changed number
failing, a metric without its extra skipped with the command that readies it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from capmetrics.cli import app
from capmetrics.cli import verify as v
from capmetrics.errors import CapmetricsError
from typer.testing import CliRunner

runner = CliRunner()
FAST = ["bleu-4", "rouge-l", "cider-d"]


def _args(metrics: list[str]) -> list[str]:
    return ["verify", *(a for m in metrics for a in ("-m", m))]


def test_the_stored_values_cover_every_bundled_text_metric_of_this_sample() -> None:
    stored = json.loads(v.REFERENCE.read_text(encoding="utf-8"))
    assert stored["format"] == v.FORMAT and stored["sample_sha256"] == v.sample_digest()
    assert list(stored["metrics"]) == list(v.METRICS)
    for spec, entry in stored["metrics"].items():
        assert len(entry["values"]) == 112 and entry["tolerance"] == v.METRICS[spec], spec


def test_verify_prints_the_table_and_exits_0() -> None:
    result = runner.invoke(app, _args(FAST))
    assert result.exit_code == 0, result.output
    for spec in FAST:
        assert spec in result.output
    assert result.output.count("OK (bit-identical)") == len(FAST)
    stored = json.loads(v.REFERENCE.read_text(encoding="utf-8"))["metrics"]["bleu-4"]["corpus"]
    assert f"{stored:.10g}" in result.output


def test_a_changed_number_fails_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = json.loads(v.REFERENCE.read_text(encoding="utf-8"))
    stored["metrics"]["cider-d"]["values"][7] += 1e-9  # one candidate, far above the tolerance
    changed = tmp_path / "reference.json"
    changed.write_text(json.dumps(stored))
    checks = {c.metric: c for c in v.verify(["bleu-4", "cider-d"], reference=changed)}
    assert checks["bleu-4"].status == "OK" and checks["cider-d"].status == "FAIL"
    assert checks["cider-d"].max_diff == pytest.approx(1e-9, rel=1e-3)
    monkeypatch.setattr(v, "REFERENCE", changed)
    result = runner.invoke(app, _args(["cider-d"]))
    assert result.exit_code == 1 and "FAIL (> 1e-12)" in result.output


def test_a_metric_without_its_extra_is_skipped_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ready = v._not_ready
    monkeypatch.setattr(
        v,
        "_not_ready",
        lambda spec: "pip install 'capmetrics[torch]'" if spec == "bertscore" else ready(spec),
    )
    result = runner.invoke(app, [*_args(["bleu-4", "bertscore"]), "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["metric"]: row for row in json.loads(result.output)}
    assert rows["bleu-4"]["status"] == "OK"
    assert (
        rows["bertscore"]["status"] == "SKIP" and "capmetrics[torch]" in rows["bertscore"]["reason"]
    )
    assert runner.invoke(app, [*_args(["bertscore"]), "--strict"]).exit_code == 1


def test_a_metric_with_no_stored_value_is_skipped() -> None:
    (check,) = v.verify(["bleu-4(tokenizer=whitespace)"])
    assert check.status == "SKIP" and "no stored reference" in check.reason


def test_record_writes_what_verify_reads(tmp_path: Path) -> None:
    path = tmp_path / "reference.json"
    assert v.record(path, ["rouge-l"]) == []
    (check,) = v.verify(["rouge-l"], reference=path)
    assert check.status == "OK" and check.reason == "bit-identical"
    other = json.loads(path.read_text())
    other["sample_sha256"] = "0" * 64
    path.write_text(json.dumps(other))
    with pytest.raises(CapmetricsError, match="not the reference of this sample"):
        v.verify(["rouge-l"], reference=path)
