"""The NNEval models shipped with capmetrics: loading, scoring without training, model choice,
signatures, missing extras, and their documented agreement with Flickr8k judgments."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from capmetrics import compose
from capmetrics.data.loaders import load_dataset
from capmetrics.engine.scoring import score
from capmetrics.errors import MetricError
from capmetrics.plugins.nneval import NNEval, learner, network
from capmetrics.plugins.nneval.model_files import (
    DEFAULT_MODEL,
    SHIPPED_DIR,
    SHIPPED_MODELS,
    model_digest,
)

from tests.conftest import FLICKR8K, ROOT, SAMPLE
from tests.plugins.nneval.toys import needs_flickr8k

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="METEOR needs java")
slow_enabled = pytest.mark.slow(
    full=True, reason="scores all of Flickr8k-Expert and -CF with METEOR"
)


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything trains."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a shipped model must not train")

    monkeypatch.setattr(network, "train", refuse)
    monkeypatch.setattr(learner.NNEval, "fit_features", refuse)


def test_shipped_model_files_describe_their_training() -> None:
    for name in SHIPPED_MODELS:
        meta = json.loads((SHIPPED_DIR / name / "nneval.json").read_text(encoding="utf-8"))
        assert meta["provenance"]["model"] == name and meta["provenance"]["seed"] == 0
        assert meta["provenance"]["versions"]["numpy"] and meta["params"]["hidden"] == [72, 72]
        interaction = 2 * 384 if meta["params"].get("interaction") == "bert" else 0  # MiniLM: 384-d
        with np.load(SHIPPED_DIR / name / "weights.npz") as w:
            for prefix in [
                "",
                *(f"m{k}_" for k in range(1, len(meta["training"].get("members", [0])))),
            ]:
                assert [w[f"{prefix}w{i}"].shape[1] for i in range(3)] == [72, 72, 2]
                assert w[f"{prefix}w0"].shape[0] == len(meta["features"]) + interaction
    paper = json.loads((SHIPPED_DIR / DEFAULT_MODEL / "nneval.json").read_text())
    assert sorted(paper["features"]) == sorted(
        ["cider-d", "bleu-1", "bleu-2", "bleu-3", "bleu-4", "meteor", "wmd"]
    )
    # the paper's protocol: human vs impostor captions of the Flickr8k train split
    assert (
        paper["training"]["examples"] == {"human": 18000, "machine": 18000}
        and "objective" not in paper["training"]
    )
    # fitted to the Expert ratings of 375 of the 500 seen images, early-stopped on Expert and CF
    rich = json.loads((SHIPPED_DIR / "flickr8k-embeddings" / "nneval.json").read_text())
    assert rich["training"]["objective"] == "ratings" and rich["training"]["examples"] == {
        "ExpertAnnotations.txt": 2125
    }
    assert rich["params"]["kendall"] == ["c", "b"] and rich["params"]["validation_rating"] == "all"
    assert "375 judged images" in rich["provenance"]["training_set"]
    # two networks, fitted to the Expert and to the CF ratings of the same 375 images; MiniLM inputs
    both = json.loads((SHIPPED_DIR / "flickr8k-embeddings-spice" / "nneval.json").read_text())
    assert both["params"]["ensemble"] == "per-set" and both["params"]["interaction"] == "bert"
    assert both["features"] == [
        *rich["features"],
        "spice",
        "spice(part=p)",
        "spice(part=r)",
        "spice(category=object)",
        "spice(category=object, part=p)",
        "spice(category=object, part=r)",
        "spice(category=attribute)",
        "spice(category=relation)",
    ]
    assert both["training"]["examples"] == {
        "ExpertAnnotations.txt": 2125,
        "CrowdFlowerAnnotations.txt": 18170,
    }
    assert [m["examples"] for m in both["training"]["members"]] == list(
        both["training"]["examples"]
    )
    assert (
        "Flickr8k-Expert and Flickr8k-CF items of 375 judged images"
        in both["provenance"]["training_set"]
    )


@pytest.mark.slow  # starts METEOR's JVM and loads MiniLM and GloVe: 20-100 s on 2 shared cores
@needs_java
def test_shipped_models_score_the_sample_without_training(no_training: None) -> None:
    dataset = load_dataset(SAMPLE)
    cands, refs, _ = dataset.flat_pairs()
    rich = compose("nneval(model=flickr8k-embeddings)", "distance")
    results = score(dataset, ["nneval", rich])
    assert results["nneval"].signature["nneval_model"] == DEFAULT_MODEL
    # the rich model's features include the paper model's: compute them once, predict with both
    learner = rich.learner()
    features = learner.raw_features(cands, refs)
    # the training task: a held-out reference against its image's other references (human) and
    # against the next image's references (not)
    held_out = [item.references[0] for item in dataset]
    own = [item.references[1:] for item in dataset]
    task = learner.raw_features(held_out * 2, own + own[1:] + own[:1])
    for spec, name in (("nneval", DEFAULT_MODEL), (rich.spec, "flickr8k-embeddings")):
        model = NNEval.load(SHIPPED_DIR / name)
        columns = [learner.features_.index(f) for f in model.features_]
        values = np.concatenate(results[spec].candidate_values)
        np.testing.assert_allclose(values, model.predict_features(features[:, columns]), rtol=1e-12)
        assert values.size == len(cands) and np.all((values > 0) & (values < 1))
        human = model.predict_features(task[:, columns])
        n = len(dataset)
        assert (human[:n] > 0.5).mean() >= 0.8 and (human[n:] < 0.5).mean() >= 0.9, name


def _spice_ready() -> bool:
    from capmetrics.plugins.spice import Spice

    try:
        Spice().check_resources()
    except MetricError:
        return False
    return True


def test_spice_model_has_the_papers_features_and_protocol() -> None:
    meta = json.loads(
        (SHIPPED_DIR / "flickr8k-paper-spice" / "nneval.json").read_text(encoding="utf-8")
    )
    assert meta["features"] == [
        "cider-d",
        "bleu-1",
        "bleu-2",
        "bleu-3",
        "bleu-4",
        "meteor",
        "wmd",
        "spice",
    ]
    assert (
        meta["training"]["examples"] == {"human": 18000, "machine": 18000}
        and "objective" not in meta["training"]
    )


@pytest.mark.slow  # SPICE parses the sample's captions not yet cached (a CoreNLP JVM, 1-2 min once)
@needs_java
@pytest.mark.skipif(not _spice_ready(), reason="SPICE needs `capmetrics setup spice`")
def test_spice_models_score_the_sample_without_training(
    no_training: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        learner.NNEval, "fit_rating_features", lambda *a, **k: pytest.fail("trained")
    )
    dataset = load_dataset(SAMPLE)
    both = "nneval(model=flickr8k-embeddings-spice)"
    results = score(
        dataset, ["nneval(model=flickr8k-paper-spice)", "spice", "nneval", both, "embedding-cosine"]
    )
    values = results["nneval(model=flickr8k-paper-spice)"].item_values
    assert (
        results["nneval(model=flickr8k-paper-spice)"].signature["nneval_model"]
        == "flickr8k-paper-spice"
    )
    assert (
        np.all((values > 0) & (values < 1))
        and np.corrcoef(values, results["nneval"].item_values)[0, 1] > 0.5
    )
    # the ratings model: the logistic of its two networks' mean log-odds, close to the sentence
    # cosine
    rated = results[both].item_values
    assert results[both].signature["nneval_model"] == "flickr8k-embeddings-spice"
    assert (
        np.all((rated > 0) & (rated < 1))
        and np.corrcoef(rated, results["embedding-cosine"].item_values)[0, 1] > 0.7
    )
    model = compose(both, "distance").learner()
    raw = model.raw_features(*dataset.flat_pairs()[:2])
    metrics, embedder = model.__dict__["_feature_metrics"][
        1:
    ]  # MiniLM loads once: embedding-cosine's embedder
    assert any(getattr(m, "embedder", None) is embedder for m in metrics)
    logits = [mlp.log_odds(model._inputs(raw)) for mlp, _ in model.members_]
    np.testing.assert_allclose(
        np.concatenate(results[both].candidate_values),
        1 / (1 + np.exp(-np.mean(logits, axis=0))),
        rtol=1e-5,
    )  # float32 MiniLM batches


def test_model_argument_takes_a_name_or_a_path(tmp_path: Path) -> None:
    default = compose("nneval", "distance")
    sig = default.signature()
    assert sig["nneval_model"] == DEFAULT_MODEL and sig["model_sha256"] == model_digest(
        SHIPPED_DIR / DEFAULT_MODEL
    )
    assert str(SHIPPED_DIR) not in json.dumps(sig)
    other = compose("nneval(model=flickr8k-embeddings)", "distance")
    assert other.signature()["nneval_model"] == "flickr8k-embeddings"
    assert other.signature()["model_sha256"] != sig["model_sha256"]
    mine = tmp_path / "my-model"
    shutil.copytree(SHIPPED_DIR / DEFAULT_MODEL, mine)
    user = compose(f"nneval(model={json.dumps(str(mine))})", "distance")
    assert user.signature()["nneval_model"] == "my-model"
    assert user.signature()["model_sha256"] == sig["model_sha256"]
    assert user.learner().features_ == default.learner().features_
    with pytest.raises(MetricError, match="neither a shipped model .*flickr8k-paper"):
        compose("nneval(model=flickr8k-papers)", "distance").learner()


def test_missing_extra_of_a_feature_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentence_transformers" else real(name, *a),
    )
    needs = r"'embedding-cosine' needs capmetrics\[torch\].*pip install 'capmetrics\[torch\]'"
    with pytest.raises(MetricError, match=needs):
        compose("nneval(model=flickr8k-embeddings)", "distance").learner()
    with pytest.raises(MetricError, match=needs):
        compose("nneval(model=flickr8k-embeddings-spice)", "distance").learner()
    from capmetrics.plugins.nneval.features import build_interaction

    with pytest.raises(MetricError, match=r"interaction embedder 'bert' needs capmetrics\[torch\]"):
        build_interaction("bert", "NNEval")


def test_a_spice_model_without_spice_set_up_fails_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from capmetrics.plugins.spice import Spice

    def missing(self: Spice) -> None:
        raise MetricError("spice needs Stanford CoreNLP 3.6.0; fix: run `capmetrics setup spice`")

    monkeypatch.setattr(Spice, "check_resources", missing)
    for name in ("flickr8k-paper-spice", "flickr8k-embeddings-spice"):
        with pytest.raises(
            MetricError,
            match=f"NNEval model .*{name}: feature 'spice': spice needs Stanford CoreNLP",
        ):
            compose(f"nneval(model={name})", "distance").learner()  # before any feature is computed
    assert (
        compose("nneval(model=flickr8k-embeddings)", "distance").learner().features_[-1]
        == "bertscore(part=r, floor=zero)"
    )


def documented_taus() -> dict[tuple[str, str], float]:
    """(metric, 'expert'|'cf') -> tau x100 from the table in docs/metrics/nneval.md."""
    text = (ROOT / "docs" / "metrics" / "nneval.md").read_text(encoding="utf-8")
    out = {}
    row = r"^\| \**`([^`]+)`\** \| \**([\d.]+)\** \[[^]]+\] \| \**([\d.]+)\** \["
    for metric, expert, cf in re.findall(row, text, re.M):
        out[(metric, "expert")], out[(metric, "cf")] = float(expert), float(cf)
    return out


@slow_enabled
@needs_flickr8k
@needs_java
def test_shipped_models_reach_the_documented_tau_on_the_unseen_halves() -> None:
    from capmetrics.analysis.meta import correlate, load_preset, metric_scores

    documented = documented_taus()
    expert, _ = load_preset("flickr8k-expert", FLICKR8K)
    cf, _ = load_preset("flickr8k-cf", FLICKR8K)
    val, test = expert.split_by_group(0.5, seed=0)
    seen = {g for g, m in zip(expert.groups, val) if m}
    cf_test = np.array([g not in seen for g in cf.groups])
    for name in SHIPPED_MODELS:
        spec = f"nneval(model={name})"
        for key, judged, mask, stat in (
            ("expert", expert, test, "kendall_c"),
            ("cf", cf, cf_test, "kendall_b"),
        ):
            values = metric_scores(spec, judged.dataset)[mask]
            tau = correlate(values, judged.subset(mask), n_boot=0)[stat].value
            # the table rounds to 2 decimals
            assert 100 * tau == pytest.approx(documented[(spec, key)], abs=0.0051), (spec, key)
