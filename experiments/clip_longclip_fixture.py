"""Make tests/data/clip/longclip_reference.json: what Long-CLIP's own model code gives for the tiny
Long-CLIP of tests/data/clip/tiny_longclip.py (248 text positions, two position tables).

Long-CLIP (beichenzbc/Long-CLIP @ 3966af9, Apache-2.0) is not on PyPI: its ``model/`` files are
read from a git mirror and imported from a temporary folder, never copied into capmetrics. Only
``model_longclip.py`` (torch, numpy) and ``simple_tokenizer.py`` (ftfy, regex) are imported:
``longclip.py`` needs torchvision for its image transform, which is CLIP's (bicubic resize,
centre crop, RGB, normalise), so the pixels come from capmetrics' ``Preprocess`` (bit-identical
to that transform, tests/plugins/test_clip_score.py) and go through Long-CLIP's ``encode_image``.
Texts are tokenized as ``longclip.tokenize`` does (its body is three lines: start token, BPE,
end token; cut to the context with the last token made the end token) with Long-CLIP's own
``SimpleTokenizer``. Run once in capmetrics' venv:

    git -C LONGCLIP_MIRROR show 3966af9:model/model_longclip.py > /tmp/longclip/model_longclip.py
    (and simple_tokenizer.py, bpe_simple_vocab_16e6.txt.gz the same way)
    .venv/bin/python experiments/clip_longclip_fixture.py /tmp/longclip

What the fixture holds, per (image, prompted caption): the token count (start and end tokens
included), CLIP-S (w = 2.5) with the whole caption (cut only past 248 tokens), CLIP-S with the
caption cut at 77 tokens as CLIP's tokenizer cuts it (the end token at position 76, padded to
248), and the unit text features of both.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "clip"
OUT = DATA / "longclip_reference.json"
PROMPT = "A photo depicts "
_DETAIL = (
    "An astronaut in a bright orange pressure suit stands in front of a large American flag, "
    "smiling at the camera and holding a white helmet with a gold visor under her left arm. Behind "
    "her, a model of the space shuttle hangs against a dark blue backdrop, and the flag's stripes "
    "fall in soft folds. Her suit carries mission patches on both shoulders and a name tag on the "
    "chest; metal rings at the wrists and the neck join the gloves and the helmet. The lighting is "
    "even and warm, like a studio portrait. On the left a small table holds a glass of water and a "
    "folded program, and on the right a microphone stand waits, its cable coiled on the carpet; a "
    "second flag, smaller, hangs from a pole in the corner."
)
_MORE = (
    " A tabby cat with green eyes sits on a wooden floor next to a red chair, its tail curled "
    "around its paws, while a cup of coffee on a saucer steams on a small table by the window. "
    "Sunlight falls across the room in long stripes, dust floats in the air, and a bookshelf full "
    "of old paperbacks leans against the far wall beside a potted fern with drooping leaves."
)
CAPTIONS = {
    "short": "A woman in an orange space suit smiles.",
    "detailed": _DETAIL,  # about 150 tokens with the prompt: cut by CLIP, whole in Long-CLIP
    "very_long": _DETAIL + _MORE + _MORE,  # past 248 tokens: cut by Long-CLIP too
}
PAIRS = [
    ("astronaut", "images/astronaut.jpg", "short"),
    ("astronaut", "images/astronaut.jpg", "detailed"),
    ("chelsea", "images/chelsea.jpg", "detailed"),
    ("coffee", "images/coffee.jpg", "very_long"),
]


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(longclip_dir: str) -> None:
    import numpy as np
    import torch

    sys.path.insert(0, str(ROOT))
    from capmetrics.data.images import open_image
    from capmetrics.plugins.clip_score._preprocess import Preprocess

    from tests.data.clip.tiny_longclip import LONG_CONTEXT, tiny_longclip_state_dict

    folder = Path(longclip_dir)
    model_code = _module("model_longclip", folder / "model_longclip.py")
    tokenizer = _module("simple_tokenizer", folder / "simple_tokenizer.py").SimpleTokenizer(
        str(folder / "bpe_simple_vocab_16e6.txt.gz")
    )
    state = {k: torch.from_numpy(v) for k, v in tiny_longclip_state_dict().items()}
    model = model_code.build_model(state, load_from_clip=False).float().eval()
    sot, eot = tokenizer.encoder["<|startoftext|>"], tokenizer.encoder["<|endoftext|>"]

    def tokenize(text: str, context: int) -> torch.Tensor:  # longclip.tokenize(..., truncate=True)
        ids = [sot, *tokenizer.encode(text), eot]
        if len(ids) > context:
            ids = ids[:context]
            ids[-1] = eot
        row = torch.zeros(1, LONG_CONTEXT, dtype=torch.long)  # encode_text needs all 248 positions
        row[0, : len(ids)] = torch.tensor(ids)
        return row

    def unit(x: torch.Tensor) -> np.ndarray:
        v = x[0].double().numpy()
        return v / np.linalg.norm(v)

    rows = []
    with torch.no_grad():
        for item, image, key in PAIRS:
            text = PROMPT + CAPTIONS[key]
            pixels = Preprocess()(open_image(DATA / image)).unsqueeze(0)
            img = unit(model.encode_image(pixels))
            whole = unit(model.encode_text(tokenize(text, LONG_CONTEXT)))
            cut = unit(model.encode_text(tokenize(text, 77)))
            rows.append(
                {
                    "id": item,
                    "image": image,
                    "caption": key,
                    "tokens": len(tokenizer.encode(text)) + 2,
                    "cos": float(img @ whole),
                    "cos_cut_at_77": float(img @ cut),
                    "clip_score": 2.5 * max(float(img @ whole), 0.0),
                    "clip_score_cut_at_77": 2.5 * max(float(img @ cut), 0.0),
                    "text_features": whole.tolist(),
                    "text_features_cut_at_77": cut.tolist(),
                }
            )
    OUT.write_text(
        json.dumps(
            {
                "source": "beichenzbc/Long-CLIP @ 3966af9 model/model_longclip.py",
                "prompt": PROMPT,
                "captions": CAPTIONS,
                "rows": rows,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    print(
        json.dumps(
            [
                {k: r[k] for k in ("id", "caption", "tokens", "clip_score", "clip_score_cut_at_77")}
                for r in rows
            ],
            indent=1,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
