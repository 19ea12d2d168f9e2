"""clip-score against jmhessel/clipscore's clipscore.py, in one run, on the same images and model.

The reference needs the ``clip`` package and torchvision's transforms, which cannot live in
capmetrics' venv; it runs in a subprocess of a separate venv (see
experiments/clip_reference_fixtures.py for how to make one):

    .venv/bin/python benchmarks/bench_clip_score.py --ref-python /tmp/refvenv/bin/python \\
        --clipscore /path/to/jmhessel/clipscore [--copies 20] [--size vit-b-32|tiny]

Model: a randomly initialised CLIP of ViT-B/32's shape (``--size vit-b-32``, the default: the
forward pass costs what the real one does) or the tests' tiny CLIP, saved as TorchScript as
OpenAI ships it; nothing is downloaded. Images: the test photographs (tests/data/clip/images),
copied ``--copies`` times under distinct names so that each is decoded and embedded. Both sides
are timed after the model is loaded: clipscore.py's ``extract_all_images`` + ``get_clip_score``
(its DataLoaders, 8 workers) against ``capmetrics.score(dataset, ["clip-score(...)"])``. The
per-candidate values are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "tests" / "data" / "clip" / "images"
CAPTIONS = ROOT.parent / "shared" / "data" / "flickr8k" / "Flickr8k.token.txt"

REFERENCE = r"""
import importlib.util, json, sys, time, types
spec = importlib.util.find_spec("torchvision")
pkg = types.ModuleType("torchvision"); pkg.__path__ = list(spec.submodule_search_locations); pkg.__spec__ = spec
sys.modules["torchvision"] = pkg
import torch, clip, numpy as np
args = json.loads(sys.argv[1])
if args["make"]:
    torch.manual_seed(0)
    if args["size"] == "tiny":
        sys.path.insert(0, args["tiny_dir"])
        import tiny_clip
        model = clip.model.build_model({k: torch.from_numpy(v) for k, v in tiny_clip.tiny_clip_state_dict(0).items()})
    else:
        model = clip.model.CLIP(512, 224, 12, 768, 32, 77, 49408, 512, 8, 12)
        clip.model.convert_weights(model)  # fp16 values, as OpenAI's checkpoint
    model = model.float().eval()
    torch.jit.trace(model, (torch.zeros(1, 3, 224, 224), clip.tokenize(["a"])), check_trace=False).save(args["model"])
    sys.exit(0)
sys.modules.setdefault("generation_eval_utils", types.ModuleType("generation_eval_utils"))
spec = importlib.util.spec_from_file_location("clipscore", args["clipscore"] + "/clipscore.py")
cs = importlib.util.module_from_spec(spec); spec.loader.exec_module(cs)
model, _ = clip.load(args["model"], device="cpu", jit=False)
model.eval()
start = time.perf_counter()
feats = cs.extract_all_images(args["images"], model, "cpu", batch_size=64, num_workers=8)
_, per, _ = cs.get_clip_score(model, feats, args["captions"], "cpu")
print(json.dumps({"seconds": time.perf_counter() - start, "values": [float(x) for x in per]}))
"""


def run_reference(python: str, payload: dict) -> dict:
    proc = subprocess.run(
        [python, "-c", REFERENCE, json.dumps(payload)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"reference failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ref-python", required=True, help="python of a venv with openai-clip and torchvision"
    )
    parser.add_argument("--clipscore", required=True, help="a checkout of jmhessel/clipscore")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--size", choices=("vit-b-32", "tiny"), default="vit-b-32")
    args = parser.parse_args()

    import capmetrics
    from capmetrics.data.model import Dataset, Item
    from capmetrics.plugins.clip_score.model import ClipModel

    work = Path(tempfile.mkdtemp(prefix="bench_clip_"))
    try:
        model = str(work / f"{args.size}.pt")
        run_reference(
            args.ref_python,
            {
                "make": True,
                "size": args.size,
                "model": model,
                "tiny_dir": str(ROOT / "tests" / "data" / "clip"),
            },
        )
        captions = [
            line.split("\t", 1)[1].strip()
            for line in CAPTIONS.read_text(encoding="utf-8").splitlines()
        ]
        files = sorted(IMAGES.iterdir())
        paths, items = [], []
        for copy in range(args.copies):
            for f in files:
                target = work / f"{copy}_{f.name}"
                shutil.copyfile(f, target)
                paths.append(str(target))
                items.append(Item(target.stem, (), (captions[len(items) * 5],), str(target)))
        cands = [it.candidates[0] for it in items]

        ref = run_reference(
            args.ref_python,
            {
                "make": False,
                "clipscore": args.clipscore,
                "model": model,
                "images": paths,
                "captions": cands,
            },
        )
        # Load the checkpoint outside the timing, as the reference does, and run one image and caption
        # through it so that lazily imported modules are in (the reference imports clip beforehand).
        warm = ClipModel(model)
        warm.embed_images([str(files[0])])
        warm.embed_texts(["warm up"])
        start = time.perf_counter()
        res = capmetrics.score(Dataset(items), [f'clip-score(model="{model}")'])
        ours_s = time.perf_counter() - start
        ours = np.concatenate(res.metrics[0].candidate_values)
        diff = float(np.max(np.abs(ours - np.array(ref["values"]))))
        n = len(paths)
        load = os.getloadavg()[0]
        print(
            f"clip-score, {args.size} CLIP, {n} images ({len(files)} photographs x {args.copies}), CPU, "
            f"{os.cpu_count()} cores, load {load:.2f}"
        )
        print(f"  clipscore.py  : {ref['seconds']:7.2f} s  {n / ref['seconds']:7.1f} images/s")
        print(f"  capmetrics    : {ours_s:7.2f} s  {n / ours_s:7.1f} images/s")
        print(
            f"  ratio         : {ref['seconds'] / ours_s:.2f}x   max |delta| per candidate {diff:.2e}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
