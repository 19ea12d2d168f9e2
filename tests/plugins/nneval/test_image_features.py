"""NNEval with image metrics as features: a tiny random CLIP (tests/data/clip/tiny_clip.py) on
the real photographs of tests/data/clip, features computed with each candidate's image in
training and scoring, the checkpoint kept out of the model file, and items without images named."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("PIL")

import capmetrics  # noqa: E402
from capmetrics.data.judgments import Judgments  # noqa: E402
from capmetrics.data.model import Dataset, Item  # noqa: E402
from capmetrics.errors import DataError, MetricError  # noqa: E402
from capmetrics.plugins.nneval import NNEval  # noqa: E402
from capmetrics.plugins.nneval.training_data import (  # noqa: E402
    build_training_set,
    load_flickr8k_split,
)

from tests.conftest import FLICKR8K  # noqa: E402
from tests.plugins.nneval.toys import needs_flickr8k  # noqa: E402
from tests.plugins.test_clip_score import CLIP_DATA, ITEMS, checkpoints  # noqa: E402, F401

pytestmark = [
    pytest.mark.filterwarnings("ignore:clip-score"),
    pytest.mark.filterwarnings("ignore:1 empty candidate"),
]


def rated() -> Judgments:
    """Every candidate of tests/data/clip/items.jsonl as one rated item with its photo: the
    first candidate of an image (it describes it) rated 3 to 5, the others (another scene) 1."""
    items, ratings = [], []
    for it in ITEMS:
        for k, cand in enumerate(it["candidates"]):
            items.append(
                Item(
                    f"{it['id']}#{k}",
                    tuple(it["references"]),
                    (cand,),
                    str(CLIP_DATA / it["image"]),
                )
            )
            ratings.append([1.0, 1.0] if k else [3.0 + len(cand) % 3, 4.0])
    return Judgments.from_ratings(
        Dataset(items, "clip-rated"), np.array(ratings), groups=[i.id.split("#")[0] for i in items]
    )


def features(ckpt: str) -> list[str]:
    return ["bleu-4", f'clip-score(model="{ckpt}")']


def direct(judged: Judgments, ckpt: str) -> np.ndarray:
    """The features as `capmetrics score` computes them, one column per feature."""
    res = capmetrics.score(judged.dataset, features(ckpt))
    return np.column_stack([np.concatenate(m.candidate_values) for m in res.metrics])


@pytest.fixture(scope="module")
def fitted(checkpoints):  # noqa: F811
    judged = rated()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = NNEval(
            features=features(checkpoints["clip"]), hidden=[4], max_epochs=5, batch_size=4
        )
        model.fit_ratings([judged], [judged])
    return model, judged


def test_image_features_equal_score_and_predictions_round_trip(fitted, checkpoints, tmp_path):  # noqa: F811
    model, judged = fitted
    expected = direct(judged, checkpoints["clip"])
    assert (
        expected[:, 1].std() > 0 and (expected[:, 1] >= 0).all()
    )  # real CLIP-S values, not constant
    raw = model.dataset_features(judged.dataset)
    np.testing.assert_allclose(raw, expected, rtol=0, atol=1e-12)
    cands, refs, _ = judged.dataset.flat_pairs()
    predicted = model.predict(cands, refs, judged.dataset.flat_images())
    np.testing.assert_allclose(predicted, model.predict_features(expected), rtol=0, atol=1e-12)

    folder = model.save(tmp_path / "model")
    meta = json.loads((folder / "nneval.json").read_text(encoding="utf-8"))
    assert meta["features"] == ["bleu-4", "clip-score(model=tiny.pt)"]  # no path outside the folder
    assert set(meta["feature_files"]) == {"tiny.pt"}
    with pytest.raises(MetricError, match=r"needs the file 'tiny.pt'.*files="):
        NNEval.load(folder)
    loaded = NNEval.load(folder, files=[checkpoints["clip"]])
    np.testing.assert_allclose(
        loaded.predict(cands, refs, judged.dataset.flat_images()), predicted, rtol=0, atol=1e-12
    )

    metric = f'nneval(model="{folder}", files=["{checkpoints["clip"]}"])'
    res = capmetrics.score(judged.dataset, [metric])
    np.testing.assert_allclose(
        np.concatenate(res.metrics[0].candidate_values), predicted, rtol=0, atol=1e-12
    )
    assert checkpoints["folder"] not in json.dumps(res.metrics[0].signature)

    shutil.copy(
        checkpoints["clip"], folder / "tiny.pt"
    )  # the checkpoint inside the folder needs no files=
    np.testing.assert_allclose(
        NNEval.load(folder).predict(cands, refs, judged.dataset.flat_images()),
        predicted,
        rtol=0,
        atol=1e-12,
    )


def test_a_different_checkpoint_under_the_same_name_is_refused(
    fitted,
    checkpoints,  # noqa: F811 (the fixture imported above)
    tmp_path,
    monkeypatch,
):
    model, judged = fitted
    folder = model.save(tmp_path / "model")
    monkeypatch.chdir(
        checkpoints["folder"]
    )  # a tiny.pt in the current folder is not the model's file
    with pytest.raises(MetricError, match="needs the file 'tiny.pt'"):
        NNEval.load(folder)
    cands, refs, _ = judged.dataset.flat_pairs()
    np.testing.assert_allclose(
        NNEval.load(folder, files=["tiny.pt"]).predict(cands, refs, judged.dataset.flat_images()),
        model.predict(cands, refs, judged.dataset.flat_images()),
        rtol=0,
        atol=1e-12,
    )
    meta = json.loads((folder / "nneval.json").read_text(encoding="utf-8"))
    for escape in (
        "../tiny.pt",
        checkpoints["clip"],
    ):  # a model file may not declare files outside its folder
        bad = tmp_path / "bad" / escape.replace("/", "_")
        bad.mkdir(parents=True)
        shutil.copy(folder / "weights.npz", bad / "weights.npz")
        (bad / "nneval.json").write_text(
            json.dumps(
                {
                    **meta,
                    "feature_files": {escape: meta["feature_files"]["tiny.pt"]},
                    "features": ["bleu-4", f'clip-score(model="{escape}")'],
                }
            )
        )
        with pytest.raises(MetricError, match="not inside the model's folder"):
            NNEval.load(bad)
    other = tmp_path / "elsewhere" / "tiny.pt"
    other.parent.mkdir()
    shutil.copy(checkpoints["pac"], other)
    with pytest.raises(MetricError, match="not the file 'tiny.pt' the model was trained with"):
        NNEval.load(folder, files=[str(other)])
    with pytest.raises(MetricError, match="no file named 'tiny_pacs.pth'"):
        NNEval.load(folder, files=[checkpoints["pac"]])


def test_items_without_images_name_the_feature_and_the_items(fitted, checkpoints, tmp_path):  # noqa: F811
    model, judged = fitted
    cands, refs, _ = judged.dataset.flat_pairs()
    with pytest.raises(
        MetricError,
        match=r"feature 'clip-score\(.*\)' needs an image for every candidate; "
        r"\d+ without a usable one: candidate 0 has no image",
    ):
        model.predict(cands, refs)
    broken = {2: None, 5: str(CLIP_DATA / "items.jsonl")}  # no image; a file that is no image
    no_image = Dataset(
        [
            Item(i.id, i.references, i.candidates, broken.get(k, i.image))
            for k, i in enumerate(judged.dataset.items)
        ],
        "half",
    )
    with pytest.raises(
        MetricError,
        match=r"2 without a usable one: item 'astronaut_strip#0' has no image.*; "
        r"item 'chelsea#0' image '.*items.jsonl' is not an image file",
    ):
        NNEval(features=features(checkpoints["clip"])).fit_ratings(
            [Judgments.from_ratings(no_image, np.ones(len(no_image)))]
        )
    with pytest.raises(
        DataError, match="needs an image for every item"
    ):  # as scoring any image metric
        capmetrics.score(
            no_image,
            [f'nneval(model="{model.save(tmp_path / "m")}", files=["{checkpoints["clip"]}"])'],
        )


def test_impostors_keep_the_image_they_are_scored_for(checkpoints):  # noqa: F811
    dataset = Dataset(
        [Item(it["id"], tuple(it["references"]), (), str(CLIP_DATA / it["image"])) for it in ITEMS]
    )
    training = build_training_set(dataset, n_human=1, n_machine=2, n_refs=1, seed=0)
    image_of = {it.id: it.image for it in dataset.items}
    own = {it.id: set(it.references) for it in dataset.items}
    assert training.item_images == [image_of[i] for i in training.images]
    machine = [k for k, lab in enumerate(training.labels) if lab == 0]
    assert machine and all(training.candidates[k] not in own[training.images[k]] for k in machine)
    model = NNEval(features=features(checkpoints["clip"]), hidden=[4], max_epochs=3).fit(training)
    raw = model.raw_features(training.candidates, training.references, training.item_images)
    # an impostor's CLIP-S is its caption against *this* image, as capmetrics.score computes it
    items = Dataset(
        [
            Item(str(k), r, (c,), im)
            for k, (c, r, im) in enumerate(
                zip(training.candidates, training.references, training.item_images)
            )
        ]
    )
    np.testing.assert_allclose(
        raw,
        direct(Judgments.from_ratings(items, np.ones(len(items))), checkpoints["clip"]),
        rtol=0,
        atol=1e-12,
    )


def test_cli_trains_on_rated_photos_and_scores_with_the_checkpoint_passed(checkpoints, tmp_path):  # noqa: F811
    import typer
    from capmetrics.plugins.nneval import register_commands
    from typer.testing import CliRunner

    judged = rated()
    bench: dict[str, dict[str, object]] = {}  # the CLIPScore benchmark layout (flickr8k.json)
    for k, item in enumerate(judged.dataset.items):
        if not item.candidates[0]:
            continue  # the benchmark files have no empty captions
        image = Path(item.image).name
        entry = bench.setdefault(
            image,
            {"image_path": image, "ground_truth": list(item.references), "human_judgement": []},
        )
        for rating in judged.point_rating[judged.point_item == k]:
            entry["human_judgement"].append(
                {
                    "image_id": image,
                    "image_path": image,  # type: ignore[union-attr]
                    "caption": item.candidates[0],
                    "rating": float(rating),
                }
            )
    (tmp_path / "rated.json").write_text(json.dumps(bench), encoding="utf-8")
    app = typer.Typer()
    register_commands(app)
    images = str(CLIP_DATA / "images")
    args = [
        "nneval",
        "train",
        str(tmp_path / "m"),
        "--ratings",
        str(tmp_path / "rated.json"),
        "--images",
        images,
        "-f",
        "bleu-4",
        "-f",
        f'clip-score(model="{checkpoints["clip"]}")',
        "--learner",
        "nneval(hidden=[4], max_epochs=3)",
        "--cache",
        str(tmp_path / "cache"),
    ]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert (
        len(list((tmp_path / "cache").glob("*.npz"))) == 4
    )  # two features × fit and early-stopping sets
    without = CliRunner().invoke(
        app, args[:5] + args[7:]
    )  # no --images: the feature and the items are named
    assert (
        without.exit_code == 1
        and "clip-score" in without.output
        and "chelsea.jpg' does not exist" in without.output
    )

    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": i.id,
                    "image": Path(i.image).name,
                    "references": list(i.references),
                    "candidates": list(i.candidates),
                }
            )
            + "\n"
            for i in judged.dataset.items
        )
    )
    score = [
        "nneval",
        "score",
        str(data),
        "--model",
        str(tmp_path / "m"),
        "--images",
        images,
        "--format",
        "json",
    ]
    run = CliRunner().invoke(app, [*score, "--file", checkpoints["clip"]])
    assert run.exit_code == 0, run.output
    values = [
        v for item in json.loads(run.output)["metrics"][0]["items"] for v in item["candidates"]
    ]
    loaded = NNEval.load(tmp_path / "m", files=[checkpoints["clip"]])
    raw = loaded.dataset_features(judged.dataset)
    assert raw.shape == (len(judged.dataset), 2)
    np.testing.assert_allclose(values, loaded.predict_features(raw), rtol=0, atol=1e-12)
    missing = CliRunner().invoke(app, score)
    assert missing.exit_code == 1 and "needs the file 'tiny.pt'" in missing.output


@needs_flickr8k
def test_flickr8k_split_items_get_their_jpg_with_images(tmp_path):
    names = (FLICKR8K / "Flickr_8k.devImages.txt").read_text(encoding="utf-8").split()
    with_images = load_flickr8k_split(FLICKR8K, "dev", images=tmp_path)
    assert [it.image for it in with_images] == [str(tmp_path / n) for n in names]
    assert [it.id for it in with_images] == [n.split(".")[0] for n in names]
    assert all(it.image is None for it in load_flickr8k_split(FLICKR8K, "dev"))


def test_two_feature_files_of_one_name_are_refused_at_save(checkpoints, tmp_path):  # noqa: F811
    from capmetrics.plugins.nneval.model_files import detach_feature_files

    other = tmp_path / "b" / "tiny.pt"
    other.parent.mkdir()
    shutil.copy(checkpoints["pac"], other)
    specs = [f'clip-score(model="{checkpoints["clip"]}")', f'ref-clip-score(model="{other}")']
    with pytest.raises(MetricError, match="two different feature files are named 'tiny.pt'"):
        detach_feature_files(specs, tmp_path / "m")
    same, files = detach_feature_files(
        [specs[0], f'ref-clip-score(model="{checkpoints["clip"]}")'], tmp_path / "m"
    )
    assert same == ["clip-score(model=tiny.pt)", "ref-clip-score(model=tiny.pt)"] and list(
        files
    ) == ["tiny.pt"]
