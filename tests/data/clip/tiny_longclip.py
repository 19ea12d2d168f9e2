"""A tiny randomly initialised Long-CLIP (Zhang et al., 2024): the tiny CLIP of tiny_clip.py
(seed 6) with Long-CLIP's text positions, 248 of them, in Long-CLIP's checkpoint layout: two
position tables, ``positional_embedding`` (used at positions 0-19) and
``positional_embedding_res`` (used at 20-247), as beichenzbc/Long-CLIP's ``longclip-B.pt`` holds
them. Built from a seeded numpy generator so that the tests and
experiments/clip_longclip_fixture.py (run beside Long-CLIP's own model code) get the same weights.
"""

from __future__ import annotations

import numpy as np

from tests.data.clip.tiny_clip import WIDTH, tiny_clip_state_dict

LONG_CONTEXT = 248


def tiny_longclip_state_dict(seed: int = 6) -> dict[str, np.ndarray]:
    """The weights (float32 holding fp16-exact values) under Long-CLIP's state-dict keys; the
    two position tables differ at every row, so using the wrong one changes every feature. Seed 6
    gives positive image-text cosines for the fixture's captions, cut or whole, so CLIP-S's clamp
    does not hide the difference."""
    sd = tiny_clip_state_dict(seed)
    rng = np.random.default_rng(seed + 1000)
    for key in ("positional_embedding", "positional_embedding_res"):
        table = rng.normal(0, 0.05, (LONG_CONTEXT, WIDTH))
        sd[key] = np.ascontiguousarray(np.asarray(table, dtype=np.float16), dtype=np.float32)
    return sd
