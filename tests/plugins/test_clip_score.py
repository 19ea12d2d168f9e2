"""CLIP-S, RefCLIP-S, PAC-S and RefPAC-S against the reference implementations.

tests/data/clip/reference.json was made by experiments/clip_reference_fixtures.py, which runs
jmhessel/clipscore's ``clipscore.py`` and aimagelab/pacscore's ``pac_score`` on the images in
tests/data/clip/images (scikit-image's sample photographs) with a tiny randomly initialised CLIP
that tests/data/clip/tiny_clip.py rebuilds here from a seeded generator.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("PIL")

import capmetrics  # noqa: E402
import torch  # noqa: E402
from capmetrics.data.model import Dataset, Item  # noqa: E402
from capmetrics.errors import DataError, MetricError  # noqa: E402

from tests.conftest import DATA  # noqa: E402
from tests.data.clip.tiny_clip import tiny_clip_state_dict, weights_digest  # noqa: E402

CLIP_DATA = DATA / "clip"
REFERENCE = json.loads((CLIP_DATA / "reference.json").read_text(encoding="utf-8"))
ITEMS = [
    json.loads(line)
    for line in (CLIP_DATA / "items.jsonl").read_text(encoding="utf-8").splitlines()
]
PROMPT = "A photo depicts "


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The tiny CLIP as an OpenAI state-dict .pt and a PAC-S .pth (the fixture's weights)."""
    base, pac = tiny_clip_state_dict(0), tiny_clip_state_dict(1)
    assert weights_digest(base) == REFERENCE["weights_sha256"]["clip"]
    assert weights_digest(pac) == REFERENCE["weights_sha256"]["pac"]
    folder = tmp_path_factory.mktemp("clip")
    torch.save({k: torch.from_numpy(v) for k, v in base.items()}, folder / "tiny.pt")
    torch.save(
        {"state_dict": {k: torch.from_numpy(v) for k, v in pac.items()}}, folder / "tiny_pacs.pth"
    )
    return {
        "clip": str(folder / "tiny.pt"),
        "pac": str(folder / "tiny_pacs.pth"),
        "folder": str(folder),
    }


def dataset() -> Dataset:
    return Dataset(
        [
            Item(
                it["id"],
                tuple(it["references"]),
                tuple(it["candidates"]),
                str(CLIP_DATA / it["image"]),
            )
            for it in ITEMS
        ],
        "items.jsonl",
    )


@pytest.mark.parametrize(
    "metric,source,model",
    [
        ("clip-score", "clipscore", "clip"),
        ("ref-clip-score", "clipscore", "clip"),
        ("pac-score", "pacscore", "pac"),
        ("ref-pac-score", "pacscore", "pac"),
    ],
)
def test_per_candidate_values_equal_the_reference_code(checkpoints, metric, source, model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = capmetrics.score(dataset(), [f'{metric}(model="{checkpoints[model]}")'])
    ours = np.concatenate(res.metrics[0].candidate_values)
    ref = np.array(REFERENCE[source][metric])
    assert ours.shape == ref.shape
    assert np.max(np.abs(ours - ref)) <= 1e-5
    assert res.metrics[0].corpus == pytest.approx(ref.mean(), abs=1e-6)
    assert (ref == 0).any()  # the clamp at 0 is exercised


def test_clip_score_and_ref_clip_score_share_embeddings(checkpoints, monkeypatch):
    from capmetrics.plugins.clip_score.model import ClipModel

    calls = {"image": 0, "text": 0}
    image_batch, encode_texts = ClipModel._image_batch, ClipModel._encode_texts

    def count_images(self, images, batch_size):
        calls["image"] += len(images)
        return image_batch(self, images, batch_size)

    def count_texts(self, texts):
        calls["text"] += len(texts)
        return encode_texts(self, texts)

    monkeypatch.setattr(ClipModel, "_image_batch", count_images)
    monkeypatch.setattr(ClipModel, "_encode_texts", count_texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        capmetrics.score(
            dataset(),
            [
                f'clip-score(model="{checkpoints["clip"]}")',
                f'ref-clip-score(model="{checkpoints["clip"]}")',
            ],
        )
    texts = {PROMPT + t for it in ITEMS for t in it["candidates"] + it["references"]}
    assert calls == {"image": len(ITEMS), "text": len(texts)}


def test_preprocessing_is_bit_identical_to_the_reference_transform():
    from capmetrics.data.images import open_image
    from capmetrics.plugins.clip_score._preprocess import Preprocess

    index = np.array(REFERENCE["sample_index"])
    for it in ITEMS:
        pixels = Preprocess()(open_image(CLIP_DATA / it["image"])).numpy()
        expected = REFERENCE["preprocess"][it["id"]]
        assert pixels.shape == (3, 224, 224)
        np.testing.assert_allclose(
            pixels.reshape(-1)[index], expected["samples"], atol=1e-6, err_msg=it["id"]
        )
        np.testing.assert_allclose(pixels.reshape(3, -1).sum(axis=1), expected["sums"], rtol=1e-6)
        assert hashlib.sha256(pixels.tobytes()).hexdigest() == expected["sha256"], it["id"]


def test_tokenizer_equals_clip_tokenize():
    from capmetrics.plugins.clip_score._bpe import ClipBPE

    bpe = ClipBPE()
    texts = [t for t in REFERENCE["tokens"] if bpe.fixes_text or t.isascii()]  # ftfy mends mojibake
    ids, cut = bpe.tokenize(texts)
    for row, text in enumerate(texts):
        expected = REFERENCE["tokens"][text]
        assert [int(x) for x in ids[row] if x] == expected, text
    assert [texts[i] for i in cut] == [t for t in texts if len(bpe.encode(t)) + 2 > 77]
    assert cut  # the long texts are there


def test_embeddings_equal_the_clip_package_forward(checkpoints):
    from capmetrics.plugins.clip_score.model import ClipModel

    model = ClipModel(checkpoints["clip"])
    feats = REFERENCE["features"]
    images = [
        str(CLIP_DATA / next(it["image"] for it in ITEMS if it["id"] == i))
        for i in feats["image_items"]
    ]
    np.testing.assert_allclose(model.embed_images(images), feats["image"], atol=1e-5)
    texts = [PROMPT + c for it in ITEMS for c in it["candidates"]]
    np.testing.assert_allclose(model.embed_texts(texts), feats["text"], atol=1e-5)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_checkpoint_loads_like_the_state_dict(checkpoints, tmp_path):
    """OpenAI ships TorchScript archives: their state_dict() is read (as clip.load(jit=False))."""
    from capmetrics.plugins.clip_score.model import ClipModel

    state = tiny_clip_state_dict(0)

    class Holder(torch.nn.Module):
        def __init__(self, prefix: str = "") -> None:
            super().__init__()
            for key in {
                k[len(prefix) :].split(".")[0]
                for k in state
                if k.startswith(prefix) and "." in k[len(prefix) :]
            }:
                self.add_module(key, Holder(prefix + key + "."))
            for key in [k for k in state if k.startswith(prefix) and "." not in k[len(prefix) :]]:
                self.register_parameter(
                    key[len(prefix) :], torch.nn.Parameter(torch.from_numpy(state[key]))
                )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    scripted = torch.jit.script(Holder())
    path = tmp_path / "ViT-tiny.pt"
    scripted.save(str(path))
    with pytest.raises(
        MetricError, match="is a TorchScript archive: loading one runs the code inside it"
    ):
        ClipModel(str(path)).embed_texts(["a cat"])  # refused unless trusted (issue 35)
    ours = ClipModel(str(path), trust_code=True)
    texts = [PROMPT + "a cat"]
    np.testing.assert_array_equal(
        ours.embed_texts(texts), ClipModel(checkpoints["clip"]).embed_texts(texts)
    )
    assert ours.signature_extra()["format"] == "openai-torchscript"


def test_signature_carries_prompt_w_checksum_precision_and_truncation(checkpoints):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = capmetrics.score(dataset(), [f'pac-score(model="{checkpoints["pac"]}")'])
    sig = res.metrics[0].signature
    digest = hashlib.sha256(Path(checkpoints["pac"]).read_bytes()).hexdigest()
    assert sig["prompt"] == PROMPT and sig["w"] == "2.0" and sig["precision"] == "fp32"
    assert sig["model"] == f"sha256:{digest}" and "truncation" in sig
    assert checkpoints["folder"] not in res.metrics[0].signature_string  # no local path


@pytest.mark.filterwarnings("ignore:1 empty candidate")
def test_long_captions_warn_once_with_a_count_or_are_refused(checkpoints):
    from capmetrics.plugins.clip_score._bpe import ClipBPE

    bpe = ClipBPE()
    captions = {t for it in ITEMS for t in it["candidates"]}
    counts = [len(bpe.encode(PROMPT + t)) + 2 for t in captions]  # start and end tokens
    long = [n for n in counts if n > 77]
    assert len(long) == 1  # the fixture's one long caption
    expected = (
        f"clip-score: 1 of {len(captions)} distinct captions longer than 77 tokens were cut "
        f"(up to {long[0]} tokens; {long[0] - 77} tokens dropped in all;"
    )
    with pytest.warns(UserWarning, match=re.escape(expected)) as record:
        capmetrics.score(dataset(), [f'clip-score(model="{checkpoints["clip"]}")'])
    assert sum("longer than 77 tokens" in str(w.message) for w in record) == 1
    with pytest.raises(
        MetricError,
        match=f"1 caption.* longer than the 77 tokens the text tower takes "
        f".*up to {long[0]} tokens.*A tabby cat",
    ):
        capmetrics.score(dataset(), [f'clip-score(model="{checkpoints["clip"]}", truncate=false)'])


def test_every_missing_or_unreadable_image_is_listed_at_once(checkpoints, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    items = [
        Item("ok", ("r",), ("c",), str(CLIP_DATA / "images/rocket.jpg")),
        Item("none", ("r",), ("c",)),
        Item("gone", ("r",), ("c",), str(tmp_path / "missing.jpg")),
        Item("junk", ("r",), ("c",), str(bad)),
    ]
    with pytest.raises(DataError) as err:
        capmetrics.score(Dataset(items, "x.jsonl"), [f'clip-score(model="{checkpoints["clip"]}")'])
    text = str(err.value)
    assert "3 problem(s)" in text and "'ok'" not in text
    assert "item 'none': has no image" in text
    assert "item 'gone': image" in text and "does not exist" in text
    assert "item 'junk': image" in text and "not an image file" in text


def test_reference_free_metrics_score_items_without_references(checkpoints):
    items = [Item("a", (), ("a rocket",), str(CLIP_DATA / "images/rocket.jpg"))]
    res = capmetrics.score(Dataset(items), [f'clip-score(model="{checkpoints["clip"]}")'])
    assert res.metrics[0].corpus >= 0
    with pytest.raises(
        DataError, match="(?s)ref-clip-score.* needs references.*item 'a': has no references"
    ):
        capmetrics.score(Dataset(items), [f'ref-clip-score(model="{checkpoints["clip"]}")'])


def test_loaded_images_score_like_their_files(checkpoints):
    from PIL import Image

    path = CLIP_DATA / "images/chelsea.jpg"
    with Image.open(path) as im:
        im.load()
        items = [Item("file", (), ("a cat",), str(path)), Item("loaded", (), ("a cat",), im)]
        res = capmetrics.score(Dataset(items), [f'clip-score(model="{checkpoints["clip"]}")'])
    values = res.metrics[0].item_values
    assert values[0] == values[1]


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda d: str(d / "nothing.pt"), "no such file or folder"),
        (
            lambda d: (d / "notes.txt").write_text("hello") and str(d / "notes.txt"),
            "not a CLIP checkpoint",
        ),
        (
            lambda d: (
                torch.save(
                    {
                        k: torch.from_numpy(v)
                        for k, v in tiny_clip_state_dict(0).items()
                        if not k.startswith("visual.")
                    },
                    d / "text.pt",
                )
                or str(d / "text.pt")
            ),
            "has no vision tower",
        ),
        (
            lambda d: torch.save({"weight": torch.zeros(2)}, d / "other.pt") or str(d / "other.pt"),
            "not a CLIP checkpoint",
        ),
    ],
)
def test_a_path_that_is_not_a_clip_model_is_one_line_naming_it(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(MetricError, match=message) as err:
        capmetrics.score(
            Dataset([Item("a", (), ("c",), str(CLIP_DATA / "images/rocket.jpg"))]),
            [f'clip-score(model="{path}")'],
        )
    assert f"model={path!r}" in str(err.value) and "\n" not in str(err.value)


def test_clip_score_without_a_model_names_the_parameter():
    from capmetrics.errors import SpecError

    with pytest.raises(SpecError, match="missing the required parameter.*'model'"):
        capmetrics.compose("clip-score")


# ------------------------------------------------------------------------------------------
# images through the loaders and the command line
# ------------------------------------------------------------------------------------------
def test_jsonl_images_resolve_against_the_file_folder_and_the_cli_scores_them(
    checkpoints, tmp_path
):
    from capmetrics.cli import app
    from typer.testing import CliRunner

    data = capmetrics.load_dataset(CLIP_DATA / "items.jsonl")
    assert [Path(it.image) for it in data] == [CLIP_DATA / it["image"] for it in ITEMS]
    out = tmp_path / "scores.json"
    res = CliRunner().invoke(
        app,
        [
            "score",
            str(CLIP_DATA / "items.jsonl"),
            "-m",
            f'clip-score(model="{checkpoints["clip"]}")',
            "--out",
            str(out),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    values = json.loads(out.read_text())
    assert json.dumps(values).count("clip-score") >= 1
    ours = capmetrics.score(data, [f'clip-score(model="{checkpoints["clip"]}")']).metrics[0]
    assert ours.corpus == pytest.approx(np.mean(REFERENCE["clipscore"]["clip-score"]), abs=1e-6)


def test_references_are_optional_for_reference_free_runs(checkpoints, tmp_path):
    from capmetrics.cli import app
    from typer.testing import CliRunner

    path = tmp_path / "norefs.jsonl"
    path.write_text(json.dumps({"id": "rocket", "candidates": ["a rocket"]}) + "\n")
    images = str(CLIP_DATA / "images")
    ok = CliRunner().invoke(
        app,
        [
            "score",
            str(path),
            "-m",
            f'clip-score(model="{checkpoints["clip"]}")',
            "--images",
            images,
            "--format",
            "json",
            "-q",
        ],
    )
    assert ok.exit_code == 0, ok.output
    refused = CliRunner().invoke(
        app,
        [
            "score",
            str(path),
            "-m",
            f'ref-clip-score(model="{checkpoints["clip"]}")',
            "--images",
            images,
            "-q",
        ],
    )
    assert refused.exit_code == 1 and "has no 'references' field" in refused.output


def test_coco_file_names_resolve_against_images(tmp_path):
    ann = {
        "images": [{"id": 1, "file_name": "rocket.jpg"}, {"id": 2, "file_name": "chelsea.jpg"}],
        "annotations": [
            {"image_id": 1, "caption": "a rocket"},
            {"image_id": 2, "caption": "a cat"},
        ],
    }
    results = [
        {"image_id": 1, "caption": "a tall rocket"},
        {"image_id": 2, "caption": "a tabby cat"},
    ]
    (tmp_path / "ann.json").write_text(json.dumps(ann))
    (tmp_path / "res.json").write_text(json.dumps(results))
    data = capmetrics.load_dataset(
        tmp_path / "ann.json", tmp_path / "res.json", images=CLIP_DATA / "images"
    )
    assert [Path(it.image).name for it in data] == ["rocket.jpg", "chelsea.jpg"]
    assert all(Path(it.image).is_file() for it in data)


def test_a_jsonl_image_that_is_not_a_path_is_a_load_problem(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"id": "a", "references": ["r"], "candidates": ["c"], "image": 3}) + "\n"
    )
    with pytest.raises(DataError, match="item 'a': 'image' must be a path"):
        capmetrics.load_dataset(path)


# ------------------------------------------------------------------------------------------
# Hugging Face CLIPModel folders: capmetrics' embeddings equal transformers' own pipeline
# ------------------------------------------------------------------------------------------
def _hf_tokenizer_files(folder: Path) -> None:
    """vocab.json and merges.txt of CLIP's BPE (the vocabulary the plugin ships)."""
    import gzip

    from capmetrics.plugins.clip_score._bpe import DEFAULT_VOCAB, ClipBPE

    bpe = ClipBPE()
    (folder / "vocab.json").write_text(json.dumps(bpe.ids), encoding="utf-8")
    with gzip.open(DEFAULT_VOCAB, "rt", encoding="utf-8") as f:
        merges = f.read().split("\n")[1 : 49152 - 256 - 2 + 1]
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8"
    )


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

    folder = tmp_path_factory.mktemp("hf_clip")
    torch.manual_seed(0)
    config = CLIPConfig(
        text_config=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=77,
            eos_token_id=49407,
            bos_token_id=49406,
        ),
        vision_config=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=224,
            patch_size=32,
        ),
        projection_dim=32,
    )
    CLIPModel(config).save_pretrained(folder)
    _hf_tokenizer_files(folder)
    CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")).save_pretrained(folder)
    CLIPImageProcessor(
        size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}
    ).save_pretrained(folder)
    return folder


def test_hf_folder_embeddings_equal_transformers_forward(hf_folder):
    from capmetrics.data.images import open_image
    from capmetrics.plugins.clip_score.model import ClipModel
    from transformers import AutoTokenizer, CLIPImageProcessor, CLIPModel

    paths = [str(CLIP_DATA / it["image"]) for it in ITEMS]
    texts = [PROMPT + c for it in ITEMS for c in it["candidates"]]
    hf = CLIPModel.from_pretrained(hf_folder).eval()
    tok = AutoTokenizer.from_pretrained(hf_folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proc = CLIPImageProcessor.from_pretrained(hf_folder)
    with torch.no_grad():
        pixels = proc(images=[open_image(p) for p in paths], return_tensors="pt")["pixel_values"]
        want_images = hf.get_image_features(pixel_values=pixels)
        enc = tok(texts, padding="max_length", truncation=True, max_length=77, return_tensors="pt")
        want_texts = hf.get_text_features(**enc)
    want_images = getattr(want_images, "pooler_output", want_images).numpy()
    want_texts = getattr(want_texts, "pooler_output", want_texts).numpy()
    ours = ClipModel(str(hf_folder))
    np.testing.assert_allclose(ours.embed_images(paths), want_images, atol=1e-5)
    np.testing.assert_allclose(ours.embed_texts(texts), want_texts, atol=1e-5)
    assert ours.signature_extra()["format"] == "hf-clipmodel"


def test_hf_text_model_folder_is_refused_as_having_no_vision_tower(hf_folder, tmp_path):
    from transformers import CLIPTextModel

    CLIPTextModel.from_pretrained(hf_folder).save_pretrained(tmp_path / "text")
    with pytest.raises(MetricError, match="no vision tower"):
        capmetrics.score(
            Dataset([Item("a", (), ("c",), str(CLIP_DATA / "images/rocket.jpg"))]),
            [f'clip-score(model="{tmp_path / "text"}")'],
        )


# ------------------------------------------------------------------------------------------
# open_clip checkpoints: capmetrics' embeddings equal open_clip's forward pass
# (tests/data/clip/open_clip_reference.json, made by experiments/clip_open_clip_fixture.py)
# ------------------------------------------------------------------------------------------
OPEN_CLIP = json.loads((CLIP_DATA / "open_clip_reference.json").read_text(encoding="utf-8"))


def test_open_clip_folder_embeddings_equal_open_clip_forward(tmp_path):
    from capmetrics.plugins.clip_score.model import ClipModel

    state = tiny_clip_state_dict(OPEN_CLIP["weights_seed"])
    assert weights_digest(state) == OPEN_CLIP["weights_sha256"]
    folder = tmp_path / "open_clip_tiny"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps(OPEN_CLIP["open_clip_config"]))
    torch.save(
        {k: torch.from_numpy(v) for k, v in state.items()}, folder / "open_clip_pytorch_model.bin"
    )
    model = ClipModel(str(folder))
    images = [
        str(CLIP_DATA / next(it["image"] for it in ITEMS if it["id"] == i))
        for i in OPEN_CLIP["image_items"]
    ]
    np.testing.assert_allclose(model.embed_images(images), OPEN_CLIP["image"], atol=1e-5)
    np.testing.assert_allclose(model.embed_texts(OPEN_CLIP["texts"]), OPEN_CLIP["text"], atol=1e-5)
    assert model.signature_extra()["format"] == "open_clip-gelu"
    # the same weights as a bare file: the activation is not in the state dict, so it is asked for
    torch.save({k: torch.from_numpy(v) for k, v in state.items()}, tmp_path / "bare.pt")
    gelu = ClipModel(str(tmp_path / "bare.pt"), activation="gelu").embed_texts(
        OPEN_CLIP["texts"][:3]
    )
    np.testing.assert_allclose(gelu, np.array(OPEN_CLIP["text"][:3]), atol=1e-5)
    quick = ClipModel(str(tmp_path / "bare.pt")).embed_texts(OPEN_CLIP["texts"][:3])
    assert np.max(np.abs(quick - np.array(OPEN_CLIP["text"][:3]))) > 1e-3


# ------------------------------------------------------------------------------------------
# meta-evaluation on CLIPScore-format benchmark files
# ------------------------------------------------------------------------------------------
def test_flickr8k_json_loads_as_the_expert_benchmark_and_bleu_agrees_with_the_clipscore_flow():
    from capmetrics.analysis.meta import agreement
    from capmetrics.data.judgments import load_judgments

    from tests.conftest import FLICKR8K

    path = FLICKR8K / "flickr8k.json"
    if not path.is_file():
        pytest.skip("needs ../shared/data/flickr8k/flickr8k.json")
    judged = load_judgments(path)
    assert (len(judged.dataset), judged.n_points) == (5664, 16992)
    assert all(Path(it.image).name.endswith(".jpg") for it in judged.dataset)
    res = agreement("bleu-1", judged, n_boot=0, ceiling=False)
    # CLIPScore's flickr8k_example flow (PTB + pycocoevalcap per caption, scipy kendalltau), x100:
    # 32.175 (tau-b) and 32.324 (tau-c) -- ../shared/data/flickr8k/PROVENANCE.md
    assert res.as_dict()["kendall_b"] == pytest.approx(0.32175, abs=5e-6)
    assert res.as_dict()["kendall_c"] == pytest.approx(0.32324, abs=5e-6)


def test_meta_on_a_clipscore_json_with_images_matches_the_reference_values(checkpoints, tmp_path):
    from capmetrics.cli import app
    from scipy.stats import kendalltau
    from typer.testing import CliRunner

    rng = np.random.default_rng(1)
    bench, ratings = {}, []
    for it in ITEMS:
        judged = []
        for c in it["candidates"]:
            if not c.strip():
                continue
            for _ in range(2):  # two raters per candidate, as separate points
                ratings.append(float(rng.integers(1, 5)))
                judged.append(
                    {
                        "image_id": it["id"],
                        "image_path": Path(it["image"]).name,
                        "caption": c,
                        "rating": ratings[-1],
                    }
                )
        bench[it["id"]] = {
            "image_path": Path(it["image"]).name,
            "ground_truth": it["references"],
            "human_judgement": judged,
        }
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench))
    ref_values = [
        v
        for v, c in zip(
            REFERENCE["clipscore"]["clip-score"], [c for it in ITEMS for c in it["candidates"]]
        )
        if c.strip()
    ]
    expected = kendalltau(np.repeat(ref_values, 2), ratings, variant="c").statistic
    res = CliRunner().invoke(
        app,
        [
            "meta",
            str(path),
            "--images",
            str(CLIP_DATA / "images"),
            "--bootstrap",
            "0",
            "--no-ceiling",
            "--format",
            "json",
            "-m",
            f'clip-score(model="{checkpoints["clip"]}")',
        ],
    )
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout[res.stdout.index("[") :])[0]
    assert row["n_points"] == len(ratings)
    assert row["kendall_c"] == pytest.approx(expected, abs=1e-9)


# ------------------------------------------------------------------------------------------
# the image-text model kind: conformance kit, a third-party (toy) model, the bundled CLIP
# ------------------------------------------------------------------------------------------
class ToyImageText(capmetrics.ImageTextModel):
    """Mean colour of the image; letter counts of r, g and b in the text (a toy for the kit)."""

    name = "toy-image-text"

    def __init__(self, bias: float = 1.0) -> None:
        self.bias = bias

    def embed_images(self, images):
        from capmetrics.data.images import open_image

        rows = [
            np.asarray(open_image(im).convert("RGB"), dtype=float).reshape(-1, 3).mean(axis=0) / 255
            for im in images
        ]
        return np.array([[*r, self.bias] for r in rows]).reshape(len(images), 4)

    def embed_texts(self, texts):
        return np.array(
            [[t.count("r"), t.count("g"), t.count("b"), self.bias] for t in texts], dtype=float
        ).reshape(len(texts), 4)


class ToyPlugin:
    @staticmethod
    @capmetrics.hookimpl
    def register_image_text_models(register):
        register(ToyImageText)


def test_the_kit_checks_a_third_party_image_text_model_that_the_metrics_then_use(add_plugin):
    from capmetrics.testing import check_component

    add_plugin(ToyPlugin(), "toy-image-text")
    ran = check_component(
        "toy-image-text", checks=["check_image_text_model", "check_spec_round_trip", "check_pickle"]
    )
    assert ran == ["check_spec_round_trip", "check_pickle", "check_image_text_model"]
    res = capmetrics.score(
        Dataset([Item("r", (), ("red rocket", "bbb"), str(CLIP_DATA / "images/rocket.jpg"))]),
        ["clip-score(model=toy-image-text)"],
    )
    values = res.metrics[0].candidate_values[0]
    image = ToyImageText().embed_images([str(CLIP_DATA / "images/rocket.jpg")])[0]
    for value, text in zip(values, ["A photo depicts red rocket", "A photo depicts bbb"]):
        t = ToyImageText().embed_texts([text])[0]
        assert value == pytest.approx(
            2.5 * max(0.0, image @ t / np.linalg.norm(image) / np.linalg.norm(t))
        )


def test_the_kit_passes_the_bundled_clip_model(checkpoints):
    from capmetrics.plugins.clip_score.model import ClipModel
    from capmetrics.testing import check_component

    check_component(
        ClipModel(checkpoints["clip"]),
        checks=["check_image_text_model", "check_spec_round_trip", "check_pickle"],
    )


def test_the_kit_catches_a_model_whose_rows_depend_on_the_batch(add_plugin):
    from capmetrics.testing import CheckFailed, check_component

    class Leaky(ToyImageText):
        name = "leaky-image-text"

        def embed_texts(self, texts):
            return super().embed_texts(texts) + len(texts)

    class LeakyPlugin:
        @staticmethod
        @capmetrics.hookimpl
        def register_image_text_models(register):
            register(Leaky)

    add_plugin(LeakyPlugin(), "leaky-image-text")
    with pytest.raises(CheckFailed, match="depend on the other texts"):
        check_component("leaky-image-text", checks=["check_image_text_model"])


def test_the_clip_text_embedder_reads_openai_checkpoints_through_the_shared_loader(checkpoints):
    from capmetrics.plugins.clip_score.model import ClipModel

    emb = capmetrics.compose(f'clip(model="{checkpoints["clip"]}", normalize=true)', "embedder")
    texts = ["a dog runs", "a cat", "a dog runs"]
    ours = emb.embed_texts(texts)
    want = ClipModel(checkpoints["clip"]).embed_texts(texts)
    np.testing.assert_allclose(ours, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)
    assert emb.signature()["model"].startswith("sha256:")
    res = capmetrics.score(
        Dataset([Item("a", ("a dog", "a dog runs", "dogs run"), ("a dog runs", "a cat"))]),
        [f'mmd(embedder=clip(model="{checkpoints["clip"]}"))'],
    )
    assert np.isfinite(res.metrics[0].corpus)


def test_an_image_that_fails_to_decode_is_named(checkpoints, tmp_path):
    data = (CLIP_DATA / "images/coffee.jpg").read_bytes()
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(data[: len(data) // 3])  # a valid header, then nothing
    items = [
        Item("cut", (), ("a cup",), str(cut)),
        Item("ok", (), ("a rocket",), str(CLIP_DATA / "images/rocket.jpg")),
    ]
    with pytest.raises(DataError, match="cut.jpg' cannot be decoded"):
        capmetrics.score(Dataset(items), [f'clip-score(model="{checkpoints["clip"]}")'])
