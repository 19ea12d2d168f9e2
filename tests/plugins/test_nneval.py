"""NNEval: the MLP, the training-data builder, fit/save/load, the distance, bad input, CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import typer
from capmetrics import Distance, Scores, compose, hookimpl
from capmetrics.data.judgments import Judgments
from capmetrics.data.model import Dataset, Item
from capmetrics.errors import DataError, MetricError, NotFittedError
from capmetrics.plugins._nneval_data import (
    TrainingSet,
    build_training_set,
    feature_matrix,
    load_flickr8k_split,
)
from capmetrics.plugins._nneval_model import MLP, MinMaxScaler, train
from capmetrics.plugins.nneval import NNEval
from typer.testing import CliRunner

from tests.conftest import FLICKR8K

needs_flickr8k = pytest.mark.skipif(
    not (FLICKR8K / "Flickr8k.token.txt").is_file(), reason="Flickr8k not found"
)


class Overlap(Distance):
    """Test feature: share of candidate words found in the references; counts its calls."""

    name = "test-overlap"
    calls = 0

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        type(self).calls += 1
        v = np.array(
            [
                sum(w in {x for r in refs for x in r.split()} for w in c.split())
                / max(len(c.split()), 1)
                for c, refs in zip(candidates, references)
            ]
        )
        return Scores(v, float(v.mean()))


class Length(Distance):
    """Test feature: candidate length; NaN for the candidate "nan" (a non-finite feature)."""

    name = "test-length"

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        v = np.array([np.nan if c == "nan" else float(len(c.split())) for c in candidates])
        return Scores(v, 0.0)


class Features:
    @hookimpl
    def register_distances(self, register):  # type: ignore[no-untyped-def]
        register(Overlap)
        register(Length)


@pytest.fixture
def plugins(add_plugin):  # type: ignore[no-untyped-def]
    add_plugin(Features(), "nneval-test-features")


FEATURES = ["test-overlap", "test-length"]


def toy_training(n: int = 200, seed: int = 0) -> TrainingSet:
    """Human candidates share words with the references; machine ones mostly do not."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    cands, refs, labels = [], [], []
    for i in range(n):
        ref = " ".join(rng.choice(words, 6))
        human = i % 2 == 0
        pool = ref.split() if human else words
        cands.append(" ".join(rng.choice(pool, int(rng.integers(3, 8)))))
        refs.append((ref,))
        labels.append(int(human))
    return TrainingSet(cands, refs, np.array(labels), [str(i) for i in range(n)])


def toy_judgments(training: TrainingSet) -> Judgments:
    items = [
        Item(str(i), r, (c,))
        for i, (c, r) in enumerate(zip(training.candidates, training.references))
    ]
    ratings = np.column_stack([training.labels * 3 + 1, training.labels * 2 + 1])
    return Judgments.from_ratings(Dataset(items), ratings)


# -- the network ---------------------------------------------------------------------------------
def test_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(0)
    mlp = MLP.create([3, 5, 4, 2], "he-normal", rng)
    x, y = rng.normal(size=(7, 3)), rng.integers(0, 2, 7)
    _, grads = mlp.gradients(x, y, l2=0.1)
    for param, grad in zip(mlp.params, grads):
        idx = tuple(rng.integers(0, s) for s in param.shape)
        old = param[idx]
        param[idx] = old + 1e-6
        up = mlp.gradients(x, y, 0.1)[0]
        param[idx] = old - 1e-6
        down = mlp.gradients(x, y, 0.1)[0]
        param[idx] = old
        assert grad[idx] == pytest.approx((up - down) / 2e-6, rel=1e-4, abs=1e-8)


def test_scaler_and_early_stopping_keep_the_best_epoch() -> None:
    scaler = MinMaxScaler.fit(np.array([[0.0, 5.0], [2.0, 5.0]]))
    assert scaler.transform(np.array([[1.0, 5.0], [3.0, 7.0]])).tolist() == [[0.0, 0.0], [2.0, 0.0]]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    y = (x[:, 0] > 0).astype(int)
    mlp = MLP.create([2, 8, 2], "glorot-uniform", rng)
    scores = iter([0.1, 0.5, 0.3, 0.2, 0.4, 0.9])
    settings = {"lr": 0.01, "batch_size": 30, "l2": 0.0, "max_epochs": 10, "patience": 3, "lr_decay": 1.0,
                "decay_every": 0}
    log = train(mlp, x, y, rng=rng, validate=lambda m: next(scores), **settings)
    assert log.best_epoch == 1 and len(log.loss) == 5  # stopped 3 epochs after the best (0.5)
    assert ((mlp.predict(x) > 0.5) == y).mean() > 0.8


# -- learner, save/load, distance ------------------------------------------------------------------
def test_fit_save_load_and_score_as_a_metric(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    training = toy_training()
    learner = compose(
        "nneval(hidden=[16, 16], lr=0.01, batch_size=20, max_epochs=30, patience=10)",
        "learner",
        features=FEATURES,
        cache_dir=str(tmp_path / "cache"),
    )
    learner.fit(training, toy_judgments(toy_training(60, seed=1)))
    p = learner.predict(training.candidates, training.references)
    assert p.shape == (200,) and ((p > 0.5) == training.labels).mean() > 0.9
    assert max(learner.log_.validation) > 0.5
    learner.save(tmp_path / "model")
    meta = json.loads((tmp_path / "model" / "nneval.json").read_text())
    assert meta["features"] == FEATURES and meta["scaler"]["lo"][0] == pytest.approx(0.0)
    assert meta["training"]["examples"] == {"human": 100, "machine": 100}
    metric = compose(f'nneval(model="{tmp_path / "model"}")', "distance")
    np.testing.assert_allclose(metric.score(training.candidates, training.references).values, p)
    assert NNEval.load(tmp_path / "model" / "nneval.json").predict(
        training.candidates[:3], training.references[:3]
    ) == pytest.approx(p[:3])
    assert "model_sha256" in metric.signature()


def test_features_are_cached(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    t = toy_training(20)
    Overlap.calls = 0
    first = feature_matrix([Overlap()], t.candidates, t.references, tmp_path)
    second = feature_matrix([Overlap()], t.candidates, t.references, tmp_path)
    assert Overlap.calls == 1 and np.array_equal(first, second)
    feature_matrix([Overlap()], t.candidates[:5], t.references[:5], tmp_path)
    assert Overlap.calls == 2  # other data, other key


def test_model_naming_a_missing_plugin(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    learner = NNEval(features=FEATURES, hidden=[4], max_epochs=2).fit(toy_training(40))
    learner.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "nneval.json").read_text())
    meta["features"] = ["test-overlap", "spice-from-mars"]
    (tmp_path / "m" / "nneval.json").write_text(json.dumps(meta))
    with pytest.raises(MetricError, match="'spice-from-mars', which no installed plugin provides"):
        NNEval.load(tmp_path / "m")
    with pytest.raises(MetricError, match="not an NNEval model"):
        NNEval.load(tmp_path)
    with pytest.raises(NotFittedError):
        NNEval(features=FEATURES).predict(["a"], [["b"]])


def test_nonfinite_features_policy(plugins) -> None:  # type: ignore[no-untyped-def]
    t = toy_training(40)
    t.candidates[3] = "nan"
    learner = NNEval(features=FEATURES, hidden=[4], max_epochs=2).fit(t)
    assert learner.nonfinite_counts_ == {"test-overlap": 0, "test-length": 1}
    # replaced by the worst (lowest, a similarity) finite training value, so it scores like it
    worst = learner.fill_[1]
    assert worst == min(len(c.split()) for c in t.candidates if c != "nan")
    row = learner.raw_features(["nan"], [["w1"]])
    assert learner.predict_features(row) == pytest.approx(
        learner.predict_features(np.array([[row[0, 0], worst]]))
    )
    with pytest.raises(MetricError, match="1 non-finite feature value"):
        NNEval(features=FEATURES, hidden=[4], max_epochs=2, nonfinite="raise").fit(t)


# -- training data -----------------------------------------------------------------------------
def _images(n: int = 12) -> Dataset:
    topics = ["dog", "cat", "man", "girl", "car", "boat"]
    actions = ["runs fast", "sits down", "plays outside", "looks happy", "jumps high"]
    return Dataset(
        [
            Item(f"img{i}", tuple(f"a {topics[i % 6]} {a} id{i}" for a in actions), ())
            for i in range(n)
        ]
    )


def test_training_set_from_impostors() -> None:
    images = _images()
    t = build_training_set(images, n_human=3, n_machine=3, n_refs=4, impostor_pool=4, seed=0)
    assert len(t) == 72 and t.labels.sum() == 36
    for cand, refs, label, image in zip(t.candidates, t.references, t.labels, t.images):
        own = next(it.references for it in images if it.id == image)
        assert len(refs) == 4 and set(refs) <= set(own)
        assert (cand in own) == bool(label) and cand not in refs
    # the nearest impostors share the topic word (TF-IDF picks the same-topic image)
    assert all(
        c.split()[1] == "dog"
        for c, lab, im in zip(t.candidates, t.labels, t.images)
        if im == "img0" and not lab
    )
    again = build_training_set(images, impostor_pool=4, seed=0)
    assert again.candidates == t.candidates


def test_training_set_from_system_output_and_bad_input() -> None:
    images = _images(3)
    t = build_training_set(
        images, system_output={"img1": ["a machine caption", "another one"]}, seed=0
    )
    assert (t.labels == 0).sum() == 2 and t.labels.sum() == 9
    with pytest.raises(DataError, match="unknown image id"):
        build_training_set(images, system_output={"img9": ["x"]})
    with pytest.raises(DataError, match="needs at least 2 references"):
        build_training_set(Dataset([Item("a", ("only one",), ())]))


@needs_flickr8k
def test_flickr8k_train_split_is_disjoint_from_the_judged_images() -> None:
    from capmetrics.meta import load_preset

    train_images = load_flickr8k_split(FLICKR8K, "train")
    expert, _ = load_preset("flickr8k-expert", FLICKR8K)
    assert len(train_images) == 6000 and all(len(it.references) == 5 for it in train_images)
    assert not {str(it.id) for it in train_images} & set(expert.groups)


# -- CLI ---------------------------------------------------------------------------------------
def test_nneval_cli_train_and_score(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.cli.nneval import register

    data = tmp_path / "train.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": it.id, "references": list(it.references), "candidates": ["x"]}) + "\n"
            for it in _images()
        ),
        encoding="utf-8",
    )
    app = typer.Typer()
    register(app)
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


def test_impostor_rank_sampling() -> None:
    from capmetrics.plugins._nneval_data import sample_ranks

    rng = np.random.default_rng(0)
    ranks = np.concatenate([sample_ranks(3, 5000, "log-rank", rng) for _ in range(2000)])
    assert ranks.min() >= 0 and ranks.max() < 5000
    decades = np.histogram(ranks, bins=[0, 9, 99, 999])[0]
    assert decades[1] == pytest.approx(decades[2], rel=0.15)  # as many in 10-100 as in 100-1000
    assert sorted(sample_ranks(3, 3, "log-rank", rng)) == [0, 1, 2]
    assert len(set(sample_ranks(4, 10, "uniform", rng))) == 4
    with pytest.raises(DataError, match="unknown sampling"):
        sample_ranks(1, 10, "nearest", rng)
