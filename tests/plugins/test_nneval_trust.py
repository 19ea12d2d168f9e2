"""Issue 35: loading an NNEval model someone sent you runs none of their programs.

Each test plays the attacker: a model folder is built in tmp_path from a shipped model with
one feature (or setting) replaced by a hostile one, and loading it must fail with one named
line, before anything runs.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from capmetrics.errors import MetricError, SpecError
from capmetrics.plugins.nneval.learner import NNEval
from capmetrics.plugins.nneval.model_files import SHIPPED_DIR
from capmetrics.registry import get_registry
from capmetrics.registry.compose import Untrusted, UntrustedSpecError, compose

from tests.conftest import SAMPLE

ROOT = Path(__file__).resolve().parents[2]


def hostile_model(
    tmp_path: Path, feature: str | None = None, **params: object
) -> tuple[Path, Path]:
    """A copy of flickr8k-paper whose first feature is ``feature`` (``{folder}`` filled in),
    plus ``params``; and the marker file that its ``java`` script would create."""
    folder = tmp_path / "model"
    shutil.copytree(SHIPPED_DIR / "flickr8k-paper", folder)
    marker = tmp_path / "pwned"
    script = folder / "java"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    meta = json.loads((folder / "nneval.json").read_text())
    if feature is not None:
        meta["features"][0] = feature.replace("{folder}", str(folder))
    meta["params"].update(params)
    (folder / "nneval.json").write_text(json.dumps(meta))
    return folder, marker


PROGRAMS = [
    ('bleu-1(tokenizer=ptb-jar(java="{folder}/java"))', "java", "ptb-jar"),
    ('bleu-1(tokenizer=ptb-jar(java="java"))', "java", "ptb-jar"),
    ('spice(java="/usr/bin/env")', "java", "spice"),
    ('meteor-jar(java="{folder}/java")', "java", "meteor-jar"),
    ('spice(corenlp="/tmp")', "corenlp", "spice"),
    ('spice(corenlp="lib")', "corenlp", "spice"),
]


@pytest.mark.parametrize(("feature", "param", "component"), PROGRAMS)
def test_a_model_file_may_not_name_a_program(tmp_path, feature, param, component):
    folder, marker = hostile_model(tmp_path, feature)
    with pytest.raises(MetricError) as err:
        NNEval.load(folder)
    message = str(err.value)
    assert "\n" not in message
    assert (
        f"NNEval model {folder}" in message and f"parameter {param!r} of {component}()" in message
    )
    assert feature.replace("{folder}", str(folder)) in message and "names a program" in message
    assert not marker.exists()


OUTSIDE = [
    'clip-score(model=clip-model("/tmp/x.pt"))',  # positional: bound to clip-model's path
    'clip-score(model=clip-model(path="../x.pt"))',
    'clip-score(model="/tmp/x.pt")',  # a text argument that is not declared a path
    'meteor(cache_dir="/tmp/meteor-cache")',
    'nneval(model="~/models/other")',
]


@pytest.mark.parametrize("feature", OUTSIDE)
def test_a_model_file_may_not_reach_outside_its_folder(tmp_path, feature):
    folder, _ = hostile_model(tmp_path, feature)
    with pytest.raises(MetricError, match="outside the model's folder") as err:
        NNEval.load(folder)
    assert "\n" not in str(err.value) and f"NNEval model {folder}" in str(err.value)


def test_the_interaction_embedder_is_confined_too(tmp_path):
    folder, _ = hostile_model(tmp_path, None, interaction='bert(model="/tmp/some-model")')
    with pytest.raises(MetricError, match="parameter 'model' of bert.*outside the model's folder"):
        NNEval.load(folder)


@pytest.mark.parametrize("key", ["cache_dir", "features", "surprise"])
def test_a_model_file_sets_only_the_learners_settings(tmp_path, key):
    folder, _ = hostile_model(tmp_path, None, **{key: "/tmp/elsewhere"})
    with pytest.raises(MetricError, match=f"params may not set '{key}'"):
        NNEval.load(folder)


def test_the_cli_refuses_the_hostile_model_with_one_line_and_runs_nothing(tmp_path):
    folder, marker = hostile_model(tmp_path, 'bleu-1(tokenizer=ptb-jar(java="{folder}/java"))')
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "capmetrics.cli",
            "nneval",
            "score",
            str(data),
            "--model",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: NNEval model "), done.stderr
    assert "parameter 'java' of ptb-jar()" in lines[0] and str(folder) in lines[0]
    assert not marker.exists()


def test_the_users_own_spec_may_name_a_program():
    built = compose('bleu-1(tokenizer=ptb-jar(java="/opt/jdk/bin/java"))')
    assert built.tokenizer.java == "/opt/jdk/bin/java"  # type: ignore[attr-defined]


def test_untrusted_compose_confines_paths_and_keeps_the_rest(tmp_path):
    (tmp_path / "vectors").mkdir()
    (tmp_path / "vectors" / "v.txt").write_text("a 1 2\n")
    untrusted = Untrusted(tmp_path, "a model")
    built = compose('wmd(embedder=glove(path="vectors/v.txt"))', untrusted=untrusted)
    assert built.embedder.path == "vectors/v.txt"  # type: ignore[attr-defined]
    assert compose("bleu-4(tokenizer=ptb)", untrusted=untrusted).spec == "bleu-4"
    assert compose("ptb-jar(java=none)", untrusted=untrusted).java is None  # type: ignore[attr-defined]
    with pytest.raises(UntrustedSpecError, match="a model: parameter 'java' of ptb-jar"):
        compose("ptb-jar(java=java)", untrusted=untrusted)
    assert issubclass(UntrustedSpecError, SpecError)
    outside = tmp_path.parent / "elsewhere.txt"
    outside.write_text("x")
    os.symlink(outside, tmp_path / "link.txt")
    with pytest.raises(UntrustedSpecError, match="'link.txt', outside"):
        compose('glove(path="link.txt")', untrusted=untrusted)


#: Parameter names that choose a program or code in every bundled component that has them.
PROGRAM_WORDS = ("java", "corenlp", "trust_code", "executable", "program", "command")


def test_every_bundled_parameter_that_names_a_program_is_declared():
    registry = get_registry()
    from capmetrics.components.base import KINDS

    undeclared = []
    for kind in KINDS:
        for entry in registry.components(kind):
            cls = entry.cls
            for key in cls.constructor_parameters():
                if any(word in key for word in PROGRAM_WORDS) and key not in cls.program_params:
                    undeclared.append(f"{cls.name}.{key}")
    assert undeclared == []
    assert get_registry().lookup("spice").cls.program_params == ("corenlp", "java")


def test_a_saved_model_leaves_its_trainers_programs_out_and_loads_untrusted(tmp_path):
    import numpy as np
    from capmetrics.plugins.nneval.model_files import without_programs

    assert (
        without_programs('bleu-1(tokenizer=ptb-jar(java="/opt/java"))')
        == "bleu-1(tokenizer=ptb-jar)"
    )
    assert without_programs('spice(corenlp="/x", java="/y", memory="2G")') == 'spice(memory="2G")'
    assert (
        without_programs("bleu-4") == "bleu-4"
        and without_programs("cider-d(df=corpus)") == "cider-d(df=corpus)"
    )
    features = ['bleu-1(tokenizer=ptb-jar(java="/opt/jdk/bin/java"))', "bleu-4"]
    model = NNEval(features=features, hidden=[4], max_epochs=2, patience=0)
    model.features_ = list(features)
    rng = np.random.default_rng(0)
    model.fit_features(rng.random((40, 2)), (rng.random(40) > 0.5).astype(float))
    model.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "nneval.json").read_text())
    assert saved["features"] == ["bleu-1(tokenizer=ptb-jar)", "bleu-4"]
    assert NNEval.load(tmp_path / "m").features_ == ["bleu-1(tokenizer=ptb-jar)", "bleu-4"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[" * 100000 + "]" * 100000, "nested too deeply"),
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_a_malformed_model_file_is_a_named_error(tmp_path, content, words):
    folder, _ = hostile_model(tmp_path)
    (folder / "nneval.json").write_text(content)
    with pytest.raises(MetricError, match=words):
        NNEval.load(folder)
