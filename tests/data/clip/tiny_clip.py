"""A tiny randomly initialised CLIP (ViT image tower, OpenAI checkpoint layout), made from a
seeded numpy generator so that the tests and the fixture script
(experiments/clip_reference_fixtures.py, run beside the reference code) build the very same weights
without storing them.

Needs numpy only; ``tiny_clip_state_dict()`` returns float32 arrays under OpenAI CLIP's key
names, which ``clip.model.build_model`` accepts and capmetrics' ``clip`` model loads.
"""

from __future__ import annotations

import hashlib

import numpy as np

VOCAB = 49408  # the CLIP BPE vocabulary (tokens are real, so the vocabulary must be too)
CONTEXT = 77
RESOLUTION = 224  # clipscore.py and pac_score preprocess to 224 whatever the model says
PATCH = 32
WIDTH = 128  # 2 heads of 64, as build_model infers (width // 64)
LAYERS = 2
EMBED = 64


def _block(rng: np.random.Generator, prefix: str, width: int, out: dict[str, np.ndarray]) -> None:
    s = width**-0.5
    out[f"{prefix}.attn.in_proj_weight"] = rng.normal(0, s, (3 * width, width))
    out[f"{prefix}.attn.in_proj_bias"] = rng.normal(0, 0.02, 3 * width)
    out[f"{prefix}.attn.out_proj.weight"] = rng.normal(0, s, (width, width))
    out[f"{prefix}.attn.out_proj.bias"] = rng.normal(0, 0.02, width)
    for ln in ("ln_1", "ln_2"):
        out[f"{prefix}.{ln}.weight"] = 1 + rng.normal(0, 0.1, width)
        out[f"{prefix}.{ln}.bias"] = rng.normal(0, 0.1, width)
    out[f"{prefix}.mlp.c_fc.weight"] = rng.normal(0, s, (4 * width, width))
    out[f"{prefix}.mlp.c_fc.bias"] = rng.normal(0, 0.02, 4 * width)
    out[f"{prefix}.mlp.c_proj.weight"] = rng.normal(0, (4 * width) ** -0.5, (width, 4 * width))
    out[f"{prefix}.mlp.c_proj.bias"] = rng.normal(0, 0.02, width)


def tiny_clip_state_dict(seed: int = 0) -> dict[str, np.ndarray]:
    """The weights, float32 holding fp16-exact values, under OpenAI CLIP's state-dict keys.

    The two projections share a component and the final layer norms a bias, so that image–text
    cosines spread over roughly -0.3..0.9 instead of clustering at 0 (both CLIP-S's clamp and its
    value path get exercised)."""
    rng = np.random.default_rng(seed)
    w = WIDTH
    sd: dict[str, np.ndarray] = {}
    grid = RESOLUTION // PATCH
    sd["visual.conv1.weight"] = rng.normal(0, (3 * PATCH * PATCH) ** -0.5, (w, 3, PATCH, PATCH))
    sd["visual.class_embedding"] = rng.normal(0, w**-0.5, w)
    sd["visual.positional_embedding"] = rng.normal(0, w**-0.5, (grid * grid + 1, w))
    sd["visual.ln_pre.weight"] = 1 + rng.normal(0, 0.1, w)
    sd["visual.ln_pre.bias"] = rng.normal(0, 0.1, w)
    for i in range(LAYERS):
        _block(rng, f"visual.transformer.resblocks.{i}", w, sd)
    shared_bias = rng.normal(0, 0.5, w)
    shared_proj = rng.normal(0, w**-0.5, (w, EMBED))
    sd["visual.ln_post.weight"] = 1 + rng.normal(0, 0.1, w)
    sd["visual.ln_post.bias"] = shared_bias + rng.normal(0, 0.9, w)
    sd["visual.proj"] = shared_proj + rng.normal(0, 0.8 * w**-0.5, (w, EMBED))
    sd["token_embedding.weight"] = rng.normal(0, 0.02, (VOCAB, w))
    sd["positional_embedding"] = rng.normal(0, 0.01, (CONTEXT, w))
    for i in range(LAYERS):
        _block(rng, f"transformer.resblocks.{i}", w, sd)
    sd["ln_final.weight"] = 1 + rng.normal(0, 0.1, w)
    sd["ln_final.bias"] = shared_bias + rng.normal(0, 0.9, w)
    sd["text_projection"] = shared_proj + rng.normal(0, 0.8 * w**-0.5, (w, EMBED))
    sd["logit_scale"] = np.array(np.log(1 / 0.07))
    # fp16-exact values, as OpenAI's checkpoints are (clip.load rounds weights through fp16)
    return {
        k: np.ascontiguousarray(np.asarray(v, dtype=np.float16), dtype=np.float32)
        for k, v in sd.items()
    }


def weights_digest(state: dict[str, np.ndarray]) -> str:
    """sha256 over the keys and float32 bytes, to notice if the generator ever changes."""
    h = hashlib.sha256()
    for key in sorted(state):
        h.update(key.encode())
        h.update(np.ascontiguousarray(state[key], dtype=np.float32).tobytes())
    return h.hexdigest()
