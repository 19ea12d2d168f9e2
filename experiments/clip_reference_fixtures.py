"""Make tests/data/clip/reference.json: what the reference implementations give on the test
images with a tiny randomly initialised CLIP (tests/data/clip/tiny_clip.py).

Runs beside the reference code, never inside capmetrics' venv (it needs torchvision):

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 openai-clip 'setuptools<81' ftfy regex tqdm \\
        pillow numpy scikit-learn
    /tmp/refvenv/bin/pip install --no-deps torchvision==0.28.0
    # jmhessel/clipscore @ 1036465276513621f77f1c2208d742e4a430781f checked out in CLIPSCORE_DIR,
    # aimagelab/pacscore @ bfbc488e9f5cccd818e75c7cdfaa37e1c87f00eb (evaluation/, models/)
    # in PACSCORE_DIR
    /tmp/refvenv/bin/python experiments/clip_reference_fixtures.py CLIPSCORE_DIR PACSCORE_DIR

PyPI's torchvision 0.28.0 is a CUDA build whose package ``__init__`` fails beside the CPU torch
(``operator torchvision::nms does not exist``); its ``transforms`` are pure Python, so the
package is put in ``sys.modules`` without running ``__init__`` (:func:`_transforms_only`).
pacscore's ``evaluation/__init__`` imports pycocoevalcap; its ``pac_score`` module is loaded the
same way. What the fixture holds:

- ``clipscore``: per candidate CLIP-S and RefCLIP-S from ``get_clip_score`` and
  ``get_refonlyclipscore`` (RefCLIP-S as its ``main`` combines them), model = the tiny CLIP saved
  as TorchScript (as OpenAI ships ViT-B/32) and loaded by ``clip.load(path, jit=False)``; CLIP-S
  also from the state dict built with ``clip.model.build_model``;
- ``pacscore``: PAC-S and RefPAC-S from ``PACScore``/``RefPACScore`` (w = 2.0), model = pacscore's
  ``clip.load`` of the tiny CLIP, ``.float()``, then ``load_state_dict`` of a second tiny CLIP
  (seed 1) saved as ``{"state_dict": ...}``, as its ``compute_metrics.py`` does;
- ``preprocess``: per image, clipscore's transform output summarised (per-channel sums, sampled
  values, sha256 of the float32 bytes);
- ``features``: the ``clip`` model's own ``encode_image``/``encode_text`` on the tiny CLIP;
- ``tokens``: ``clip.tokenize(..., truncate=True)`` of tricky texts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "clip"
OUT = DATA / "reference.json"
WORK = Path("/tmp/clip_reference_work")
PROMPT = "A photo depicts "
TRICKY = [
    "café &amp; crème brûlée — “quoted” 123 4,5",
    "A   man\tand\n a DOG's toy",
    "ñandú 日本語 🙂 test",
    "&lt;b&gt; bold",
    "ﬁne ligature",
    "mojibake: Ã©tÃ©",
    "word " * 90,
    "don't can't we'll I'd they're",
]


def _transforms_only() -> None:
    spec = importlib.util.find_spec("torchvision")
    pkg = types.ModuleType("torchvision")
    pkg.__path__ = list(spec.submodule_search_locations)
    pkg.__spec__ = spec
    sys.modules["torchvision"] = pkg
    import torchvision.transforms  # noqa: F401


def _load_module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(clipscore_dir: Path, pacscore_dir: Path) -> None:
    _transforms_only()
    import clip
    import numpy as np
    import torch

    tiny = _load_module("tiny_clip", DATA / "tiny_clip.py")
    WORK.mkdir(exist_ok=True)
    base = {k: torch.from_numpy(v) for k, v in tiny.tiny_clip_state_dict(0).items()}
    pac = {k: torch.from_numpy(v) for k, v in tiny.tiny_clip_state_dict(1).items()}
    sd_path, jit_path, pac_path = (
        WORK / "tiny_clip.pt",
        WORK / "tiny_clip_jit.pt",
        WORK / "tiny_pacs.pth",
    )
    torch.save(base, sd_path)
    torch.save({"state_dict": pac}, pac_path)

    items = [
        json.loads(line)
        for line in (DATA / "items.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    images = [str(DATA / it["image"]) for it in items for _ in it["candidates"]]
    cands = [c for it in items for c in it["candidates"]]
    refs = [it["references"] for it in items for _ in it["candidates"]]

    # The tiny CLIP as OpenAI ships its models: a TorchScript archive. (clip.load cannot read a
    # plain state-dict file: its fallback re-reads the handle the failed TorchScript attempt used.)
    built = clip.model.build_model(dict(base)).float().eval()
    traced = torch.jit.trace(
        built, (torch.zeros(1, 3, 224, 224), clip.tokenize(["a"])), check_trace=False
    )
    traced.save(str(jit_path))

    # -- clipscore.py (its unused imports stubbed: sklearn is only used for numpy < 1.21)
    sys.modules.setdefault("generation_eval_utils", types.ModuleType("generation_eval_utils"))
    cs = _load_module("clipscore", clipscore_dir / "clipscore.py")
    model, _ = clip.load(str(jit_path), device="cpu", jit=False)
    model.eval()
    _, clip_s, cand_feats = cs.get_clip_score(model, images, cands, "cpu")
    _, ref_cos = cs.get_refonlyclipscore(model, refs, cand_feats, "cpu")
    ref_clip_s = 2 * clip_s * np.array(ref_cos) / (clip_s + np.array(ref_cos))
    _, sd_clip_s, _ = cs.get_clip_score(
        built, images, cands, "cpu"
    )  # the state dict, built as clip.load would

    with torch.no_grad():
        pixels = torch.stack(
            [cs.CLIPImageDataset([str(DATA / it["image"])])[0]["image"] for it in items]
        )
        image_feats = model.encode_image(pixels).numpy()
        text_feats = model.encode_text(
            clip.tokenize([PROMPT + c for c in cands], truncate=True)
        ).numpy()
    rng = np.random.default_rng(0)
    index = rng.integers(0, 3 * 224 * 224, 1500)
    preprocess = {}
    for it, px in zip(items, pixels):
        arr = px.numpy().astype(np.float32)
        preprocess[it["id"]] = {
            "sums": arr.reshape(3, -1).astype(np.float64).sum(axis=1).tolist(),
            "samples": arr.reshape(-1)[index].tolist(),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest(),
        }

    # -- pacscore (evaluation/__init__ imports pycocoevalcap: load pac_score.py alone)
    sys.path.insert(0, str(pacscore_dir))
    from models import clip as pac_clip

    pac_model, pac_preprocess = pac_clip.load(str(jit_path), device="cpu")
    pac_model = pac_model.float()
    pac_model.load_state_dict(torch.load(pac_path)["state_dict"])
    pac_model.eval()
    ps = _load_module("pac_score", pacscore_dir / "evaluation" / "pac_score" / "pac_score.py")
    _, pac_s, pac_feats, len_cands = ps.PACScore(
        pac_model, pac_preprocess, images, cands, "cpu", w=2.0
    )
    _, pac_ref = ps.RefPACScore(pac_model, refs, pac_feats, "cpu", torch.tensor(len_cands))
    ref_pac_s = 2 * pac_s * np.array(pac_ref) / (pac_s + np.array(pac_ref))

    lengths = [len(clip.tokenize(PROMPT + c, context_length=1000)[0].nonzero()) for c in cands]
    tokens = {
        t: [int(x) for x in clip.tokenize(t, truncate=True)[0] if int(x)]
        for t in TRICKY + [PROMPT + c for c in cands]
    }
    out = {
        "made_by": "experiments/clip_reference_fixtures.py",
        "references": {
            "clipscore": "jmhessel/clipscore@1036465276513621f77f1c2208d742e4a430781f",
            "pacscore": "aimagelab/pacscore@bfbc488e9f5cccd818e75c7cdfaa37e1c87f00eb",
            "torch": torch.__version__,
            "numpy": np.__version__,
        },
        "weights_sha256": {
            "clip": tiny.weights_digest(tiny.tiny_clip_state_dict(0)),
            "pac": tiny.weights_digest(tiny.tiny_clip_state_dict(1)),
        },
        "candidates": [
            {"item": it["id"], "index": j} for it in items for j in range(len(it["candidates"]))
        ],
        "token_lengths": lengths,
        "clipscore": {
            "clip-score": [float(x) for x in clip_s],
            "ref-clip-score": [float(x) for x in ref_clip_s],
            "clip-score-state-dict": [float(x) for x in sd_clip_s],
        },
        "pacscore": {
            "pac-score": [float(x) for x in pac_s],
            "ref-pac-score": [float(x) for x in ref_pac_s],
        },
        "features": {
            "image_items": [it["id"] for it in items],
            "image": image_feats.tolist(),
            "text": text_feats.tolist(),
        },
        "sample_index": index.tolist(),
        "preprocess": preprocess,
        "tokens": tokens,
    }
    OUT.write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        f"wrote {OUT}: {len(cands)} candidates; CLIP-S {np.mean(clip_s):.4f} RefCLIP-S "
        f"{np.mean(ref_clip_s):.4f} PAC-S {np.mean(pac_s):.4f} RefPAC-S {np.mean(ref_pac_s):.4f}; "
        f"token lengths {lengths}; state dict vs TorchScript max diff "
        f"{np.max(np.abs(np.array(sd_clip_s) - clip_s)):.2e}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
