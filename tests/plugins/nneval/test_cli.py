"""``capmetrics nneval train`` and ``capmetrics nneval score``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from capmetrics.plugins.nneval import register_commands
from typer.testing import CliRunner

from tests.plugins.nneval.toys import toy_images


def test_nneval_cli_train_and_score(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "train.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": it.id, "references": list(it.references), "candidates": ["x"]}) + "\n"
            for it in toy_images()
        ),
        encoding="utf-8",
    )
    app = typer.Typer()
    register_commands(app)
    run = CliRunner().invoke(
        app,
        [
            "nneval",
            "train",
            str(tmp_path / "m"),
            "--train",
            str(data),
            "-f",
            "test-overlap",
            "-f",
            "test-length",
            "--learner",
            "nneval(hidden=[4], max_epochs=3)",
            "--impostor-pool",
            "3",
            "--cache",
            str(tmp_path / "c"),
        ],
    )
    assert run.exit_code == 0, run.output
    assert json.loads((tmp_path / "m" / "nneval.json").read_text())["training"]["epochs_run"] == 3
    run = CliRunner().invoke(
        app, ["nneval", "score", str(data), "--model", str(tmp_path / "m"), "--format", "json"]
    )
    assert run.exit_code == 0, run.output
    assert '"nneval(model=' in run.output
    bad = CliRunner().invoke(app, ["nneval", "train", str(tmp_path / "m2")])
    assert bad.exit_code == 2 and "--train" in bad.output
