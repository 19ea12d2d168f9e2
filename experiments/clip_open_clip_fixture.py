"""Make tests/data/clip/open_clip_reference.json: open_clip's own forward pass on the test
images with the tiny CLIP weights (seed 2) in an open_clip ViT whose activation is GELU (open_clip's
default, unlike OpenAI's QuickGELU), saved as open_clip saves a model folder.

Runs in the reference venv of experiments/clip_reference_fixtures.py plus
``pip install --no-deps open_clip_torch==3.3.0 && pip install huggingface_hub safetensors``
(timm is optional for ViT models); torchvision's package ``__init__`` is bypassed the same way:

    /tmp/refvenv/bin/python experiments/clip_open_clip_fixture.py
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "clip"
PROMPT = "A photo depicts "
#: open_clip's model config for the tiny CLIP (tests/data/clip/tiny_clip.py's shapes).
CONFIG = {
    "embed_dim": 64,
    "vision_cfg": {
        "image_size": 224,
        "layers": 2,
        "width": 128,
        "patch_size": 32,
        "head_width": 64,
    },
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 2},
}


def main() -> None:
    spec = importlib.util.find_spec("torchvision")
    pkg = types.ModuleType("torchvision")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__spec__ = spec
    sys.modules["torchvision"] = pkg
    import open_clip
    import torch
    from PIL import Image

    tiny_spec = importlib.util.spec_from_file_location("tiny_clip", DATA / "tiny_clip.py")
    tiny = importlib.util.module_from_spec(tiny_spec)
    tiny_spec.loader.exec_module(tiny)
    state = {k: torch.from_numpy(v) for k, v in tiny.tiny_clip_state_dict(2).items()}
    model = open_clip.model.CLIP(
        CONFIG["embed_dim"], CONFIG["vision_cfg"], CONFIG["text_cfg"], quick_gelu=False
    )
    result = model.load_state_dict(state, strict=True)
    model.eval()
    preprocess = open_clip.image_transform(224, is_train=False)
    items = [
        json.loads(line)
        for line in (DATA / "items.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    texts = [PROMPT + c for it in items for c in it["candidates"]]
    with torch.no_grad():
        pixels = torch.stack([preprocess(Image.open(DATA / it["image"])) for it in items])
        image = model.encode_image(pixels).numpy()
        text = model.encode_text(open_clip.tokenize(texts)).numpy()
    out = {
        "made_by": "experiments/clip_open_clip_fixture.py",
        "open_clip": open_clip.__version__,
        "weights_seed": 2,
        "weights_sha256": tiny.weights_digest(tiny.tiny_clip_state_dict(2)),
        "open_clip_config": {
            "model_cfg": CONFIG,
            "preprocess_cfg": {
                "mean": list(open_clip.OPENAI_DATASET_MEAN),
                "std": list(open_clip.OPENAI_DATASET_STD),
            },
        },
        "image_items": [it["id"] for it in items],
        "image": image.tolist(),
        "texts": texts,
        "text": text.tolist(),
    }
    (DATA / "open_clip_reference.json").write_text(json.dumps(out) + "\n", encoding="utf-8")
    print(f"wrote open_clip_reference.json ({result}); image {image.shape}, text {text.shape}")


if __name__ == "__main__":
    main()
