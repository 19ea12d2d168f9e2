"""Make tests/data/clip/embedder_reference.json: the ``clip`` embedder's text features, identity
and signature as the embedder computed them before it was moved onto the ``clip-model`` loader
(run once at commit 80c180e, plugins/embeddings/clip.py with its own transformers code path for
Hugging Face folders), on the tiny test CLIP as an OpenAI state dict, a Hugging Face CLIPModel
folder and a text-tower-only folder (tests/plugins/clip_folders.py).

    .venv/bin/python experiments/clip_embedder_fixture.py
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data" / "clip"
PROMPT = "A photo depicts "


def texts() -> list[str]:
    items = [json.loads(line) for line in (DATA / "items.jsonl").read_text().splitlines()]
    captions = [t for it in items for t in it["candidates"]]
    return captions + [PROMPT + t for t in captions] + [captions[0], "x"]


def main() -> None:
    import capmetrics
    import numpy as np
    import torch

    from tests.data.clip.tiny_clip import tiny_clip_state_dict
    from tests.plugins.clip_folders import write_hf_folders

    out: dict = {"texts": texts(), "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        state = {k: torch.from_numpy(v) for k, v in tiny_clip_state_dict(0).items()}
        torch.save(state, root / "tiny.pt")
        paths = {"openai": root / "tiny.pt", **write_hf_folders(root)}
        for name, path in paths.items():
            for normalize in (False, True):
                emb = capmetrics.compose(
                    f'clip(model="{path}", normalize={str(normalize).lower()})', "embedder"
                )
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    feats = np.asarray(emb.embed_texts(out["texts"]), dtype=np.float32)
                sig = emb.signature()
                out["models"][f"{name}/normalize={normalize}"] = {
                    "shape": list(feats.shape),
                    "float32_le_base64": base64.b64encode(feats.astype("<f4").tobytes()).decode(),
                    "signature": {k: v for k, v in sig.items() if k != "spec"},
                    "warnings": [str(w.message) for w in caught],
                    "dtype": str(feats.dtype),
                }
    (DATA / "embedder_reference.json").write_text(json.dumps(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
