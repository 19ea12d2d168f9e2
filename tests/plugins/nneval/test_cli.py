"""``capmetrics nneval train`` and ``capmetrics nneval score``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from capmetrics.plugins.nneval import register_commands
from typer.testing import CliRunner

from tests.plugins.nneval.toys import toy_images, toy_ratings


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


def test_nneval_cli_train_on_ratings(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = []
    for k, name in enumerate(("a.jsonl", "b.jsonl")):
        judged = toy_ratings(40, seed=k)
        rows = [
            {
                "id": item.id,
                "image": image,
                "candidate": item.candidates[0],
                "references": list(item.references),
                "rating": judged.point_rating[judged.point_item == i].tolist(),
            }
            for i, (item, image) in enumerate(zip(judged.dataset, judged.groups))
        ]
        files += ["--ratings", str(tmp_path / name)]
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    app = typer.Typer()
    register_commands(app)
    common = [
        "-f",
        "test-overlap",
        "-f",
        "test-length",
        "--learner",
        "nneval(hidden=[4], max_epochs=3)",
        "--cache",
        str(tmp_path / "c"),
    ]
    run = CliRunner().invoke(
        app, ["nneval", "train", str(tmp_path / "m"), *files, "--rating-fraction", "0.5", *common]
    )
    assert run.exit_code == 0, run.output
    assert "fitting ratings of 8 judged images, early-stopping on 2" in run.output
    training = json.loads((tmp_path / "m" / "nneval.json").read_text())["training"]
    # 20 images, half used: 8 train (2 candidates each, in both files), 2 early-stop
    assert training["objective"] == "ratings" and training["examples"] == {
        "a.jsonl": 16,
        "b.jsonl": 16,
    }
    assert training["epochs_run"] == 3 and len(training["validation_kendall"]) == 3
    # the shipped model's protocol: fit one set, early-stop on both
    run = CliRunner().invoke(
        app,
        [
            "nneval",
            "train",
            str(tmp_path / "m1"),
            *files[:2],
            "--stop-on",
            files[1],
            "--stop-on",
            files[3],
            "--rating-fraction",
            "0.5",
            *common,
        ],
    )
    assert run.exit_code == 0, run.output
    assert json.loads((tmp_path / "m1" / "nneval.json").read_text())["training"]["examples"] == {
        "a.jsonl": 16
    }
    # the flickr8k-embeddings-spice protocol: one network per --ratings set, interaction inputs
    ensemble = [
        *common[:4],
        "--learner",
        "nneval(hidden=[4], max_epochs=3, ensemble=per-set, interaction=test-word-counts)",
        *common[6:],
    ]
    run = CliRunner().invoke(
        app,
        ["nneval", "train", str(tmp_path / "m3"), *files, "--rating-fraction", "0.5", *ensemble],
    )
    assert run.exit_code == 0, run.output
    assert "(networks: epoch " in run.output and run.output.count(" of 3") == 2
    members = json.loads((tmp_path / "m3" / "nneval.json").read_text())["training"]["members"]
    assert [m["examples"] for m in members] == ["a.jsonl", "b.jsonl"]
    both = CliRunner().invoke(
        app, ["nneval", "train", str(tmp_path / "m2"), *files, "--train", files[1], *common]
    )
    assert both.exit_code == 2 and "--ratings trains on judged images" in both.output
