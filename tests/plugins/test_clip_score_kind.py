"""Image-text metrics as their own kind, and the one CLIP loader.

- ``clip-score`` and kin are ``ImageTextMetric``s (kind ``image-text-metric``): what the registry,
  ``capmetrics score``, streaming and the conformance kit do with that kind, a third-party one
  registered through ``register_image_text_metrics``;
- the ``clip`` embedder runs on ``clip-model`` for every format: its features are the ones the
  embedder computed with its own transformers code before (tests/data/clip/embedder_reference.json,
  made by experiments/clip_embedder_fixture.py), bit for bit;
- ``clip-model`` keeps no checkpoint for the life of the process: one load per run, shared, and
  nothing left once the run's components are gone.
"""

from __future__ import annotations

import base64
import gc
import json
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("PIL")

import capmetrics  # noqa: E402
import torch  # noqa: E402
from capmetrics.data.model import Dataset, Item  # noqa: E402
from capmetrics.errors import CapmetricsError, DataError, MetricError  # noqa: E402

from tests.conftest import DATA  # noqa: E402
from tests.data.clip.tiny_clip import tiny_clip_state_dict  # noqa: E402
from tests.plugins.clip_folders import write_hf_folders  # noqa: E402

CLIP_DATA = DATA / "clip"
FIXTURE = json.loads((CLIP_DATA / "embedder_reference.json").read_text(encoding="utf-8"))
ROCKET = str(CLIP_DATA / "images" / "rocket.jpg")
CHELSEA = str(CLIP_DATA / "images" / "chelsea.jpg")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny test CLIP (seed 0) as an OpenAI state dict and as Hugging Face folders."""
    root = tmp_path_factory.mktemp("clip_kind")
    state = {k: torch.from_numpy(v) for k, v in tiny_clip_state_dict(0).items()}
    torch.save(state, root / "tiny.pt")
    return {"openai": root / "tiny.pt", **write_hf_folders(root)}


def _fixture(key: str) -> np.ndarray:
    entry = FIXTURE["models"][key]
    raw = base64.b64decode(entry["float32_le_base64"])
    return np.frombuffer(raw, "<f4").reshape(entry["shape"])


def _old_hf_features(folder: Path, texts: list[str], normalize: bool) -> np.ndarray:
    """What the embedder computed for a Hugging Face folder with its own code path before:
    CLIPTextModelWithProjection, texts sorted longest first in batches of 64, padded to the
    batch's longest and cut at the context, normalised in torch."""
    from transformers import AutoConfig, AutoTokenizer, CLIPTextModelWithProjection

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    if config.model_type == "clip":
        text_config = config.text_config
        text_config.projection_dim = config.projection_dim
        config = text_config
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    tower = CLIPTextModelWithProjection.from_pretrained(folder, config=config).eval()
    distinct = list(dict.fromkeys(texts))
    limit = int(tower.config.max_position_embeddings)
    order = np.argsort([-len(t) for t in distinct], kind="stable")
    out = np.zeros((len(distinct), int(tower.config.projection_dim)), np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), 64):
            rows = order[start : start + 64]
            batch = [distinct[k] for k in rows]
            inputs = tokenizer(
                batch, padding=True, truncation=True, max_length=limit, return_tensors="pt"
            )
            feats = tower(**inputs).text_embeds
            if normalize:
                feats = feats / feats.norm(dim=-1, keepdim=True)
            out[rows] = feats.float().numpy()
    return out[[distinct.index(t) for t in texts]]


# ------------------------------------------------------------------------------------------
# one loader: the clip embedder's features, identity and signature are the ones of before
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["openai", "full", "text"])
@pytest.mark.parametrize("normalize", [False, True])
def test_the_clip_embedder_gives_the_features_of_its_former_loader(models, fmt, normalize):
    from capmetrics.plugins.clip_score.model import folder_checksum

    texts = FIXTURE["texts"]
    key = f"{fmt}/normalize={normalize}"
    emb = capmetrics.compose(
        f'clip(model="{models[fmt]}", normalize={str(normalize).lower()})', "embedder"
    )
    with pytest.warns(UserWarning, match="clip: 2 text\\(s\\) longer than 77 tokens"):
        ours = emb.embed_texts(texts)
    assert ours.dtype == np.float32 and ours.shape == tuple(FIXTURE["models"][key]["shape"])
    before = _fixture(key)
    if fmt != "openai":  # bit for bit: the former code path, run here, and the stored fixture
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_array_equal(ours, _old_hf_features(models[fmt], texts, normalize))
        np.testing.assert_allclose(ours, before, rtol=0, atol=1e-6)
    elif not normalize:  # it ran on clip-model already
        np.testing.assert_allclose(ours, before, rtol=0, atol=1e-6)
    else:  # normalised in torch now, as for Hugging Face folders (CHANGELOG): 1 ulp at most
        assert np.max(np.abs(ours - before)) <= 3e-8
    signature = {k: v for k, v in emb.signature().items() if k != "spec"}
    expected = dict(FIXTURE["models"][key]["signature"])
    if fmt == "openai":  # torch.save's bytes: compare the checksum with the file's own
        import hashlib

        digest = hashlib.sha256(models[fmt].read_bytes()).hexdigest()
        expected["model"] = f"sha256:{digest}"
    else:  # the embedder's former identity: names and bytes of .safetensors/.bin/.json files
        expected["model"] = folder_checksum(models[fmt], (".safetensors", ".bin", ".json"))
    assert signature == expected


def test_a_text_tower_folder_gives_text_features_and_refuses_images(models):
    from capmetrics.plugins.clip_score.model import ClipModel

    model = ClipModel(str(models["text"]))
    full = ClipModel(str(models["full"]))
    texts = ["A photo depicts a rocket.", "a cat"]
    np.testing.assert_array_equal(model.embed_texts(texts), full.embed_texts(texts))
    assert model.signature_extra()["format"] == "hf-clip_text_model"
    with pytest.raises(MetricError, match="text tower only.*no vision tower") as err:
        capmetrics.score(
            Dataset([Item("a", (), ("a rocket",), ROCKET)]),
            [f'clip-score(model="{models["text"]}")'],
        )
    assert "\n" not in str(err.value)


def test_a_non_clip_folder_is_named_for_the_embedder_and_the_metric(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(MetricError, match="'bert' model, not a CLIP model with a text tower"):
        capmetrics.compose(f'clip(model="{tmp_path}")', "embedder").embed_texts(["a"])


# ------------------------------------------------------------------------------------------
# no process-wide checkpoint cache: one load per run, nothing left after it
# ------------------------------------------------------------------------------------------
def test_a_run_loads_a_checkpoint_once_and_keeps_nothing_after_it(models, monkeypatch):
    from capmetrics.plugins.clip_score import model as model_module

    loads: list[weakref.ref] = []
    real = model_module.load_checkpoint

    def counting(*args, **kwargs):
        loaded = real(*args, **kwargs)
        loads.append(weakref.ref(loaded.model))
        return loaded

    monkeypatch.setattr(model_module, "load_checkpoint", counting)
    path = models["openai"]
    items = [
        Item("rocket", ("a rocket", "a tall rocket"), ("a rocket on a pad", "a cat"), ROCKET),
        Item("cat", ("a cat", "a tabby cat"), ("a cat looks", "a dog"), CHELSEA),
    ]
    specs = [
        f'clip-score(model="{path}")',
        f'ref-clip-score(model="{path}")',
        f'mmd(embedder=clip(model="{path}"), permutations=10)',
    ]
    res = capmetrics.score(Dataset(items), specs)
    assert len(loads) == 1  # the metrics and the embedder of one run share the checkpoint
    assert np.isfinite(res.metrics[0].corpus) and np.isfinite(res.metrics[1].corpus)
    del res
    gc.collect()
    assert loads[0]() is None  # no cache outlives the run's components
    capmetrics.score(Dataset(items), specs[:1])
    assert len(loads) == 2  # the next run loads it again
    gc.collect()
    assert all(ref() is None for ref in loads)


def test_a_kept_metric_holds_its_model_outside_a_run(models, monkeypatch):
    from capmetrics.plugins.clip_score import model as model_module

    calls = []
    real = model_module.load_checkpoint
    monkeypatch.setattr(
        model_module, "load_checkpoint", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    metric = capmetrics.compose(f'clip-score(model="{models["openai"]}")')
    first = metric.score_images(["a rocket"], [[]], [ROCKET]).values
    second = metric.score_images(["a rocket"], [[]], [ROCKET]).values
    assert calls == [1] and first[0] == second[0]


# ------------------------------------------------------------------------------------------
# the kind: registry, score, CLI, streaming, statistics
# ------------------------------------------------------------------------------------------
def test_the_clip_metrics_are_image_text_metrics_with_unchanged_specs(models):
    from capmetrics.components.base import METRIC_KINDS
    from capmetrics.registry import get_registry

    assert "image-text-metric" in METRIC_KINDS
    names = get_registry().names("image-text-metric")
    assert names == ["clip-score", "pac-score", "ref-clip-score", "ref-pac-score"]
    assert not {"clip-score", "pac-score"} & set(get_registry().names("distance"))
    metric = capmetrics.compose('ref-pac-score(model="x.pt", w=2.0)')
    assert isinstance(metric, capmetrics.ImageTextMetric)
    assert not isinstance(metric, capmetrics.Distance) and not hasattr(metric, "score")
    assert metric.kind == "image-text-metric" and metric.needs_references
    assert metric.spec == "ref-pac-score(model=x.pt, w=2.0)"
    assert metric.portable_spec() == "ref-pac-score(model=<local>, w=2.0)"
    assert not capmetrics.compose("clip-score(model=x.pt)").needs_references


def test_results_record_the_kind_and_the_signature_of_before(models):
    res = capmetrics.score(
        Dataset([Item("a", ("a rocket",), ("a rocket",), ROCKET)]),
        [f'clip-score(model="{models["openai"]}")'],
    )
    m = res.metrics[0]
    assert m.kind == "image-text-metric"
    assert json.loads(res.to_json())["metrics"][0]["kind"] == "image-text-metric"
    assert m.signature["spec"] == "clip-score(model=<local>)"
    assert m.signature["w"] == "2.5" and m.signature["prompt"] == "A photo depicts "


def test_plugins_lists_the_kind(models):
    from capmetrics.cli import app
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, ["plugins", "--kind", "image-text-metric", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert {r["name"] for r in rows} == {
        "clip-score",
        "ref-clip-score",
        "pac-score",
        "ref-pac-score",
    }
    assert {r["kind"] for r in rows} == {"image-text-metric"}


def test_streaming_refuses_image_text_metrics_naming_the_reason(models, tmp_path):
    from capmetrics.engine.streaming import score_file

    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"id": "a", "references": ["r"], "candidates": ["c"]}) + "\n")
    with pytest.raises(MetricError, match="scores captions with their images, which streaming"):
        score_file(path, [f'clip-score(model="{models["openai"]}")'], chunk_size=1)


def test_statistics_cannot_take_an_image_text_metric_as_their_distance():
    with pytest.raises(CapmetricsError, match="clip-score"):
        capmetrics.compose("trm(distance=clip-score(model=x.pt))")


# ------------------------------------------------------------------------------------------
# a third-party image-text metric and the conformance kit
# ------------------------------------------------------------------------------------------
class Brightness(capmetrics.ImageTextMetric):
    """The image's mean brightness times the candidate's share of the letter 'a' (a toy)."""

    name = "toy-brightness"
    needs_references = False
    accepts_empty_candidates = True

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def score_images(self, candidates, references, images):
        from capmetrics.data.images import open_image

        light = [np.asarray(open_image(im).convert("L"), dtype=float).mean() / 255 for im in images]
        share = [c.count("a") / max(len(c), 1) for c in candidates]
        values = self.scale * np.array(light) * np.array(share)
        return capmetrics.Scores(values, float(values.mean()) if len(values) else float("nan"))


class Leaky(Brightness):
    name = "toy-leaky"

    def score_images(self, candidates, references, images):
        scores = super().score_images(candidates, references, images)
        return capmetrics.Scores(scores.values + len(candidates), scores.corpus)


class ToyMetrics:
    @staticmethod
    @capmetrics.hookimpl
    def register_image_text_metrics(register):
        register(Brightness)
        register(Leaky)


def test_a_third_party_image_text_metric_scores_and_passes_the_kit(add_plugin):
    from capmetrics.testing import CheckContext, check_component, default_dataset

    add_plugin(ToyMetrics(), "toy-image-text-metrics")
    res = capmetrics.score(
        Dataset([Item("r", (), ("a cat", "dog"), ROCKET)]), ["toy-brightness(scale=2.0)"]
    )
    from capmetrics.data.images import open_image

    light = np.asarray(open_image(ROCKET).convert("L"), dtype=float).mean() / 255
    np.testing.assert_allclose(res.metrics[0].candidate_values[0], [2.0 * light * 2 / 5, 0.0])
    # every check of the kind (a plugin registered in code is not seen by a new process)
    ran = check_component(
        "toy-brightness", context=CheckContext(default_dataset(), fresh_process=False)
    )
    assert "check_image_text_metric" in ran and "check_item_permutation" in ran
    assert "check_edge_inputs" in ran and "check_results_formats" in ran


def test_the_kit_catches_an_image_text_metric_whose_values_depend_on_the_call(add_plugin):
    from capmetrics.testing import CheckFailed, check_component

    add_plugin(ToyMetrics(), "toy-image-text-metrics")
    with pytest.raises(CheckFailed, match="alone but .* with the others"):
        check_component("toy-leaky", checks=["check_image_text_metric"])


def test_an_item_without_an_image_is_named(add_plugin):
    add_plugin(ToyMetrics(), "toy-image-text-metrics")
    items = [Item("ok", (), ("a cat",), ROCKET), Item("bare", (), ("a cat",))]
    with pytest.raises(DataError, match="item 'bare': has no image"):
        capmetrics.score(Dataset(items), ["toy-brightness"])
