"""A folder a feature creates (``meteor(cache_dir=...)``) named by an NNEval model file: outside
the model's folder it is refused before anything is created; inside it, it is made a path in
the model's folder whatever the current folder; a saved model leaves its trainer's out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import capmetrics
import pytest
from capmetrics.errors import MetricError
from capmetrics.plugins.nneval.learner import NNEval
from capmetrics.plugins.nneval.model_files import without_programs
from capmetrics.registry import get_registry
from capmetrics.testing import check_component

from tests.plugins.test_nneval_trust import hostile_model

OUTSIDE = [
    'meteor(cache_dir="/tmp/capmetrics-anywhere")',
    'meteor(cache_dir="../x")',
    'meteor(cache_dir="~/x")',
    'meteor(cache_dir="sub/../../x")',
    'meteor(cache_dir="link/cache")',  # a link in the folder that leads out
    'meteor(cache_dir="here")',  # exists in the current folder, not in the model's
    'wmd(embedder=glove(path="v.txt", cache_dir="/tmp/capmetrics-anywhere"))',
]


@pytest.mark.parametrize("feature", OUTSIDE)
def test_a_created_folder_outside_the_model_is_refused_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, feature: str
) -> None:
    folder, _ = hostile_model(tmp_path, feature)
    os.symlink(tmp_path / "out", folder / "link")
    work = tmp_path / "work"
    (work / "here").mkdir(parents=True)
    monkeypatch.chdir(work)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(MetricError, match="parameter 'cache_dir' of .*outside the model's folder"):
        NNEval.load(folder)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert not Path("/tmp/capmetrics-anywhere").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize("value", ["cache", "sub/cache", "."])
def test_a_created_folder_inside_the_model_is_allowed_and_made_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    folder, _ = hostile_model(tmp_path, f'meteor(cache_dir="{value}")')
    monkeypatch.chdir(tmp_path)  # the current folder is not the model's
    model = NNEval.load(folder)
    built = capmetrics.compose(model.features_[0], "distance")
    assert built.cache_dir == str(folder / value)  # type: ignore[attr-defined]
    assert not (tmp_path / "cache").exists() and not (tmp_path / "sub").exists()


def test_a_file_inside_the_model_is_read_from_there_not_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = hostile_model(tmp_path, 'wmd(embedder=glove(path="v.txt"))')
    (folder / "v.txt").write_text("dog 1 0\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "v.txt").write_text("dog 0 1\n")  # a file of the same name where the user runs it
    monkeypatch.chdir(work)
    model = NNEval.load(folder)
    assert model.features_[0] == f'wmd(embedder=glove(path="{folder / "v.txt"}"))'


def test_a_keyword_value_stays_a_keyword_when_the_folder_holds_a_file_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = hostile_model(tmp_path, 'cider-d(df="corpus")')
    (folder / "corpus").write_text("{}")  # cider-d's df="corpus" is not a file's name
    monkeypatch.chdir(tmp_path)
    model = NNEval.load(folder)
    assert capmetrics.compose(model.features_[0], "distance").df == "corpus"  # type: ignore


def test_a_saved_model_leaves_its_trainers_cache_folder_out() -> None:
    assert without_programs('meteor(cache_dir="/home/me/cache", alpha=0.9)') == "meteor(alpha=0.9)"
    assert (
        without_programs('wmd(embedder=glove(path="v.txt", cache_dir="/c"))')
        == "wmd(embedder=glove(path=v.txt))"
    )


def test_the_kit_flags_an_undeclared_created_folder() -> None:
    from capmetrics import Distance
    from capmetrics.testing import CheckFailed

    class Cached(Distance):
        name = "cached-overlap"

        def __init__(self, cache_dir: str | None = None) -> None:
            self.cache_dir = cache_dir

    with pytest.raises(CheckFailed, match="parameter 'cache_dir' takes a file but is not in"):
        check_component(Cached(), checks=["check_path_params_declared"])

    class Declared(Cached):
        path_params = ("cache_dir",)

    assert check_component(Declared(), checks=["check_path_params_declared"]) == [
        "check_path_params_declared"
    ]


def test_every_bundled_created_folder_is_declared() -> None:
    from capmetrics.components.base import KINDS

    undeclared = [
        f"{entry.cls.name}.{key}"
        for kind in KINDS
        for entry in get_registry().components(kind)
        for key in entry.cls.constructor_parameters()
        if key.endswith("_dir") and key not in entry.cls.path_params
    ]
    assert undeclared == []
    assert "cache_dir" in get_registry().lookup("meteor").cls.path_params


def test_json_of_the_loaded_model_is_untouched(tmp_path: Path) -> None:
    folder, _ = hostile_model(tmp_path, 'meteor(cache_dir="cache")')
    before = (folder / "nneval.json").read_text()
    NNEval.load(folder)
    assert (folder / "nneval.json").read_text() == before
    assert json.loads(before)["features"][0] == 'meteor(cache_dir="cache")'
