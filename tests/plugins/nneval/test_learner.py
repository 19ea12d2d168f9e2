"""The NNEval learner: fit, save/load, the distance over a saved model, caching, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from capmetrics import compose
from capmetrics.data.judgments import Judgments
from capmetrics.errors import MetricError, NotFittedError
from capmetrics.plugins.nneval import NNEval
from capmetrics.plugins.nneval.features import feature_matrix

from tests.plugins.nneval.toys import FEATURES, Overlap, toy_judgments, toy_ratings, toy_training


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


def test_saved_files_are_reproducible(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.plugins.nneval.model_files import model_digest

    for folder in ("a", "b"):
        NNEval(features=FEATURES, hidden=[4], max_epochs=2).fit(toy_training(40)).save(
            tmp_path / folder, {"seed": 0}
        )
    assert (tmp_path / "a" / "weights.npz").read_bytes() == (
        tmp_path / "b" / "weights.npz"
    ).read_bytes()
    assert model_digest(tmp_path / "a") == model_digest(tmp_path / "b" / "nneval.json")
    assert json.loads((tmp_path / "a" / "nneval.json").read_text())["provenance"] == {"seed": 0}
    np.testing.assert_array_equal(
        NNEval.load(tmp_path / "a").mlp_.weights[0], NNEval.load(tmp_path / "b").mlp_.weights[0]
    )


def test_rating_targets_and_image_splits() -> None:
    from capmetrics.plugins.nneval.rating_targets import of_images, rating_targets, split_images

    judged = toy_ratings(20)
    expected = (judged.item_rating("mean") - judged.point_rating.min()) / np.ptp(
        judged.point_rating
    )
    np.testing.assert_allclose(rating_targets(judged), expected)
    expert_like = Judgments.from_ratings(toy_ratings(3).dataset, [[1, 1, 4], [4, 4, 4], [2, 3, 1]])
    np.testing.assert_allclose(rating_targets(expert_like), [1 / 3, 1, 1 / 3])
    other = toy_ratings(20, seed=1, scale=1.0)  # the same 10 images, other candidates and scale
    images = split_images([judged, other], 0.5, seed=3)
    first, _ = judged.split_by_group(0.5, seed=3)
    assert len(images) == 5 and np.array_equal(of_images(judged, images), first)
    assert np.array_equal(of_images(other, images), other.split_by_group(0.5, seed=3)[0])
    flat = Judgments.from_ratings(judged.dataset, np.full(20, 2.0))
    with pytest.raises(MetricError, match="toy.jsonl: every rating is 2.0"):
        rating_targets(flat)


def test_fit_ratings(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.analysis.meta import correlations

    train, stop, test = (
        toy_ratings(300, seed=0),
        toy_ratings(100, seed=1, source="cf.txt", scale=1.0),
        toy_ratings(100, seed=2),
    )
    learner = NNEval(
        features=FEATURES,
        hidden=[8],
        lr=0.01,
        batch_size=20,
        max_epochs=40,
        patience=10,
        validation_rating="all",
        kendall="c",
        seed=0,
    )
    learner.fit_ratings(
        [train, stop.subset(np.arange(100) < 50)], [stop.subset(np.arange(100) >= 50)]
    )
    assert learner.n_train_ == {"toy.jsonl": 300, "cf.txt": 50}
    p = learner.predict(*test.dataset.flat_pairs()[:2])
    assert correlations(p[test.point_item], test.point_rating)["kendall_c"] > 0.6
    assert learner.log_.validation[learner.log_.best_epoch] == max(learner.log_.validation)
    learner.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "nneval.json").read_text())
    assert meta["training"]["objective"] == "ratings" and meta["params"]["kendall"] == "c"
    np.testing.assert_allclose(
        NNEval.load(tmp_path / "m").predict(*test.dataset.flat_pairs()[:2]), p
    )
    with pytest.raises(MetricError, match="at least one set of training judgments"):
        NNEval(features=FEATURES).fit_ratings([])
    with pytest.raises(
        MetricError,
        match=r"kendall=\['c'\] must be b, c or a list of them, one per validation set \(2\)",
    ):
        NNEval(features=FEATURES, kendall=["c"]).fit_ratings([train], [test, test])


def test_interaction_inputs_and_per_set_ensemble(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from capmetrics.analysis.meta import correlations
    from capmetrics.plugins.nneval.features import interaction_inputs

    from tests.plugins.nneval.toys import WordCounts

    # [c * r, |c - r|]: c the candidate's unit vector, r the unit mean of its references' unit
    # vectors
    inputs = interaction_inputs(WordCounts(), ["w1 w1", "w2 x"], [["w1", "w1 w2"], ["w3"]])
    c = np.array([1.0, 0.0, 0.0])
    r = np.array([1.0, 0.0, 0.0]) + np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    r /= np.linalg.norm(r)
    np.testing.assert_allclose(inputs[0, [1, 2, 3]], c * r)
    np.testing.assert_allclose(inputs[0, 31 + np.array([1, 2, 3])], np.abs(c - r))
    assert inputs.shape == (2, 62) and inputs[1, 31 + 30] == pytest.approx(1 / np.sqrt(2))
    assert interaction_inputs(WordCounts(), [], []).shape == (0, 62)

    expert, cf = toy_ratings(300, seed=0), toy_ratings(300, seed=1, source="cf.txt", scale=1.0)
    stop, test = toy_ratings(100, seed=2), toy_ratings(100, seed=3)
    learner = NNEval(
        features=FEATURES,
        hidden=[8],
        lr=0.01,
        batch_size=20,
        max_epochs=40,
        patience=10,
        validation_rating="all",
        kendall="c",
        interaction="test-word-counts",
        ensemble="per-set",
        seed=0,
        cache_dir=str(tmp_path / "cache"),
    )
    learner.fit_ratings([expert, cf], [stop])
    assert len(learner.members_) == 2 and learner.n_train_ == {"toy.jsonl": 300, "cf.txt": 300}
    cands, refs, _ = test.dataset.flat_pairs()
    raw = learner.raw_features(cands, refs)
    assert raw.shape == (100, 2 + 62)
    # the score is the logistic of the mean of the two networks' log-odds
    x = learner._inputs(raw)
    for mlp, _ in learner.members_:
        np.testing.assert_allclose(1 / (1 + np.exp(-mlp.log_odds(x))), mlp.predict(x), rtol=1e-12)
    mean = np.mean([mlp.log_odds(x) for mlp, _ in learner.members_], axis=0)
    p = learner.predict(cands, refs)
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-mean)), rtol=1e-12)
    assert not np.allclose(p, learner.members_[0][0].predict(x))
    assert (
        correlations(p[test.point_item], test.point_rating)["kendall_c"] > 0.5
    )  # 0.59 (0.6+ without the toy inputs)

    learner.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "nneval.json").read_text())
    assert (
        meta["params"]["interaction"] == "test-word-counts"
        and meta["params"]["ensemble"] == "per-set"
    )
    assert [m["examples"] for m in meta["training"]["members"]] == ["toy.jsonl", "cf.txt"]
    assert meta["interaction_signature"]["spec"] == "test-word-counts"
    with np.load(tmp_path / "m" / "weights.npz") as w:
        assert sorted(w.files) == sorted(
            [f"{p}{k}{i}" for p in ("", "m1_") for k in "wb" for i in range(2)]
        )
    loaded = NNEval.load(tmp_path / "m")
    np.testing.assert_allclose(loaded.predict(cands, refs), p, rtol=1e-12)
    np.testing.assert_allclose(
        compose(f"nneval(model={json.dumps(str(tmp_path / 'm'))})", "distance")
        .score(cands, refs)
        .values,
        p,
        rtol=1e-12,
    )
    assert compose(f"nneval(model={json.dumps(str(tmp_path / 'm'))})", "distance").score(
        [], []
    ).values.shape == (0,)

    # one training set: one network, and a file without the new settings when they are the defaults
    single = NNEval(features=FEATURES, hidden=[8], max_epochs=3, ensemble="per-set").fit_ratings(
        [expert]
    )
    assert len(single.members_) == 1
    NNEval(features=FEATURES, hidden=[8], max_epochs=3).fit_ratings([expert]).save(
        tmp_path / "plain"
    )
    params = json.loads((tmp_path / "plain" / "nneval.json").read_text())["params"]
    assert "interaction" not in params and "ensemble" not in params
    with pytest.raises(MetricError, match="ensemble must be none or per-set, got 'mean'"):
        NNEval(ensemble="mean")  # type: ignore[arg-type]
    with pytest.raises(MetricError, match="needs the embedder 'no-such-embedder'"):
        NNEval(features=FEATURES, interaction="no-such-embedder").fit_ratings([expert])


def test_a_version_1_model_keeps_the_cider_it_was_trained_with(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before version 2, ``cider`` named the original CIDEr; such a file loads it as
    ``cider-original`` (not today's ``cider`` = CIDEr-D)."""
    learner = NNEval(features=["cider-original", "test-overlap"], hidden=[4], max_epochs=2).fit(
        toy_training(40)
    )
    learner.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "nneval.json").read_text())
    assert meta["version"] == 2
    meta.update(version=1, features=["CIDEr", "test-overlap"])
    (tmp_path / "m" / "nneval.json").write_text(json.dumps(meta))
    old = NNEval.load(tmp_path / "m")
    assert old.features_ == ["cider-original", "test-overlap"]
    t = toy_training(10, seed=3)
    assert old.predict(t.candidates, t.references) == pytest.approx(
        learner.predict(t.candidates, t.references)
    )
    meta["version"] = 3
    (tmp_path / "m" / "nneval.json").write_text(json.dumps(meta))
    with pytest.raises(MetricError, match="version 3 was written by a newer capmetrics"):
        NNEval.load(tmp_path / "m")


def test_renames_reach_nested_specs() -> None:
    from capmetrics.plugins.nneval.model_files import upgrade_model_specs

    meta = {"version": 1, "features": ["trm(distance=CIDEr, p_value=exact)", "cider-d", "bleu-4"]}
    upgrade_model_specs(meta, "m.json")
    assert meta["features"] == ["trm(distance=cider-original, p_value=exact)", "cider-d", "bleu-4"]
    current = {"version": 2, "features": ["cider"]}
    upgrade_model_specs(current, "m.json")
    assert current["features"] == ["cider"]
