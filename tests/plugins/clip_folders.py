"""Hugging Face folders of the tiny test CLIP (tests/data/clip/tiny_clip.py, seed 0): a full
``CLIPModel`` folder and a text-tower-only ``CLIPTextModelWithProjection`` folder
(``model_type`` ``clip_text_model``), both with CLIP's BPE tokenizer (the vocabulary the plugin
ships). Used by the tests and by experiments/clip_embedder_fixture.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.data.clip.tiny_clip import tiny_clip_state_dict


def write_tokenizer(folder: Path) -> None:
    """vocab.json and merges.txt of CLIP's BPE, saved as a ``CLIPTokenizer``."""
    from capmetrics.plugins.clip_score._bpe import DEFAULT_VOCAB, ClipBPE
    from transformers import CLIPTokenizer

    bpe = ClipBPE()
    (folder / "vocab.json").write_text(json.dumps(bpe.ids), encoding="utf-8")
    with gzip.open(DEFAULT_VOCAB, "rt", encoding="utf-8") as f:
        merges = f.read().split("\n")[1 : 49152 - 256 - 2 + 1]
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8"
    )
    CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")).save_pretrained(folder)


def write_hf_folders(root: Path, seed: int = 0) -> dict[str, Path]:
    """``{"full": CLIPModel folder, "text": clip_text_model folder}`` under ``root``."""
    import torch
    from capmetrics.plugins.clip_score._checkpoints import openai_layout_model
    from transformers import CLIPTextModelWithProjection

    state = {k: torch.from_numpy(v) for k, v in tiny_clip_state_dict(seed).items()}
    model, _, _ = openai_layout_model(state, "tiny", "quick_gelu")
    full, text = root / "hf_full", root / "hf_text"
    model.save_pretrained(full)
    write_tokenizer(full)
    text_config = model.config.text_config
    text_config.projection_dim = model.config.projection_dim
    tower = CLIPTextModelWithProjection(text_config).eval()
    weights = {
        k: v
        for k, v in model.state_dict().items()
        if k.startswith(("text_model.", "text_projection."))
    }
    result = tower.load_state_dict(weights, strict=False)
    assert not [k for k in result.missing_keys if not k.endswith("position_ids")], result
    tower.save_pretrained(text)
    write_tokenizer(text)
    return {"full": full, "text": text}
