"""clip-score against jmhessel/clipscore's clipscore.py, in one run, on the same images and model.

The reference needs the ``clip`` package and torchvision's transforms, which cannot live in
capmetrics' venv; it runs in a subprocess of a separate venv (see
experiments/clip_reference_fixtures.py for how to make one; or, reusing this venv's torch: make a
venv, put a ``.pth`` file naming this venv's site-packages in its site-packages, and
``pip install --no-deps openai-clip torchvision==0.28.0`` there). On a loaded 2-core machine a
round of the default 220 images takes tens of minutes; ``--copies 5`` (55 images) is enough:

    .venv/bin/python benchmarks/bench_clip_score.py --ref-python /tmp/refvenv/bin/python \\
        --clipscore /path/to/jmhessel/clipscore [--copies 20] [--size vit-b-32|tiny] \\
        [--refs 5] [--rounds 3]

Model: a randomly initialised CLIP of ViT-B/32's shape (``--size vit-b-32``, the default: the
forward pass costs what the real one does) or the tests' tiny CLIP, saved as TorchScript as
OpenAI ships it (capmetrics reads the same weights from a state dict); nothing is downloaded.
Images: the test photographs (tests/data/clip/images), copied ``--copies`` times under distinct
names so that each is decoded and embedded. Both sides are timed after the model is loaded:
clipscore.py's ``extract_all_images`` + ``get_clip_score`` (its DataLoaders, 8 workers), and with
``--refs N`` (default 5 Flickr8k captions per image) its ``get_refonlyclipscore`` and harmonic mean
as its ``main`` computes RefCLIP-S, against
``capmetrics.score(dataset, ["clip-score(...)", "ref-clip-score(...)"])``. Each round times both
sides (the reference first), wall clock and CPU time (every thread, and the reference's DataLoader
worker processes, from ``getrusage``); the per-candidate values are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
pkg = types.ModuleType("torchvision")
pkg.__path__ = list(spec.submodule_search_locations)
pkg.__spec__ = spec
sys.modules["torchvision"] = pkg
import torch, clip, numpy as np
args = json.loads(sys.argv[1])
if args["make"]:
    torch.manual_seed(0)
    if args["size"] == "tiny":
        sys.path.insert(0, args["tiny_dir"])
        import tiny_clip
        state = tiny_clip.tiny_clip_state_dict(0)
        model = clip.model.build_model({k: torch.from_numpy(v) for k, v in state.items()})
    else:
        model = clip.model.CLIP(512, 224, 12, 768, 32, 77, 49408, 512, 8, 12)
        clip.model.convert_weights(model)  # fp16 values, as OpenAI's checkpoint
    model = model.float().eval()
    example = (torch.zeros(1, 3, 224, 224), clip.tokenize(["a"]))
    torch.jit.trace(model, example, check_trace=False).save(args["model"])
    # capmetrics reads the same weights as a state dict (it refuses to run a TorchScript archive)
    torch.save(torch.jit.load(args["model"], map_location="cpu").state_dict(), args["state"])
    sys.exit(0)
sys.modules.setdefault("generation_eval_utils", types.ModuleType("generation_eval_utils"))
spec = importlib.util.spec_from_file_location("clipscore", args["clipscore"] + "/clipscore.py")
cs = importlib.util.module_from_spec(spec); spec.loader.exec_module(cs)
model, _ = clip.load(args["model"], device="cpu", jit=False)
model.eval()
import resource
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
               resource.getrusage(resource.RUSAGE_CHILDREN)))
start, start_cpu = time.perf_counter(), cpu()
feats = cs.extract_all_images(args["images"], model, "cpu", batch_size=64, num_workers=8)
_, per, cand_feats = cs.get_clip_score(model, feats, args["captions"], "cpu")
ref = []
if args["references"]:
    _, text = cs.get_refonlyclipscore(model, args["references"], cand_feats, "cpu")
    ref = [float(x) for x in 2 * per * text / (per + text)]
print(json.dumps({"seconds": time.perf_counter() - start, "cpu": cpu() - start_cpu,
                  "values": [float(x) for x in per], "ref_values": ref}))
"""


def run_reference(python: str, payload: dict) -> dict:
    proc = subprocess.run(
        [python, "-c", REFERENCE, json.dumps(payload)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.exit(f"reference failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def _cpu() -> float:
    """CPU seconds of this process (every thread) and its waited-for children."""
    return sum(
        r.ru_utime + r.ru_stime
        for r in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ref-python", required=True, help="python of a venv with openai-clip and torchvision"
    )
    parser.add_argument("--clipscore", required=True, help="a checkout of jmhessel/clipscore")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--size", choices=("vit-b-32", "tiny"), default="vit-b-32")
    parser.add_argument("--refs", type=int, default=5, help="references per image (0: CLIP-S only)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import capmetrics
    from capmetrics.data.model import Dataset, Item

    work = Path(tempfile.mkdtemp(prefix="bench_clip_"))
    try:
        model = str(work / f"{args.size}.pt")
        state = str(work / f"{args.size}-state-dict.pt")
        run_reference(
            args.ref_python,
            {
                "make": True,
                "size": args.size,
                "model": model,
                "state": state,
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
                k = len(items) * 5
                refs = tuple(captions[k + 1 : k + 1 + args.refs])
                items.append(Item(target.stem, refs, (captions[k],), str(target)))
        cands = [it.candidates[0] for it in items]
        payload = {
            "make": False,
            "clipscore": args.clipscore,
            "model": model,
            "images": paths,
            "captions": cands,
            "references": [list(it.references) for it in items] if args.refs else [],
        }
        specs = [f'clip-score(model="{state}")']
        if args.refs:
            specs.append(f'ref-clip-score(model="{state}")')
        # The metrics are built once and hold their loaded checkpoint from one score() call to the
        # next (a score() of specs loads it in each run), as the reference loads its model before
        # its timer. One item with another copy of an image is scored first so that lazily
        # imported modules are in (the reference imports clip beforehand); embeddings are not
        # kept from one score() call to the next.
        specs = [capmetrics.compose(spec) for spec in specs]
        warm_image = work / f"warm{files[0].suffix}"
        shutil.copyfile(files[0], warm_image)
        capmetrics.score(
            Dataset([Item("warm", ("a warm-up reference",), ("warm up",), str(warm_image))]),
            specs,
        )
        n = len(paths)
        print(
            f"clip-score{' + ref-clip-score' if args.refs else ''}, {args.size} CLIP, {n} images "
            f"({len(files)} photographs x {args.copies}), {args.refs} references each, CPU, "
            f"{os.cpu_count()} cores"
        )
        cpu_ratios = []
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            ref = run_reference(args.ref_python, payload)
            start, start_cpu = time.perf_counter(), _cpu()
            res = capmetrics.score(Dataset(items), specs)
            ours_s, ours_cpu = time.perf_counter() - start, _cpu() - start_cpu
            ours = np.concatenate(res.metrics[0].candidate_values)
            diff = float(np.max(np.abs(ours - np.array(ref["values"]))))
            if args.refs:
                ours_ref = np.concatenate(res.metrics[1].candidate_values)
                diff = max(diff, float(np.max(np.abs(ours_ref - np.array(ref["ref_values"])))))
            cpu_ratios.append(ref["cpu"] / ours_cpu)
            print(
                f"round {r + 1} (load {load:.2f}): clipscore.py {ref['seconds']:6.2f} s wall "
                f"{ref['cpu']:6.2f} s CPU ({n / ref['seconds']:5.1f} images/s) | capmetrics "
                f"{ours_s:6.2f} s wall {ours_cpu:6.2f} s CPU ({n / ours_s:5.1f} images/s) | "
                f"ratio wall {ref['seconds'] / ours_s:.2f}x CPU {ref['cpu'] / ours_cpu:.2f}x | "
                f"max |delta| {diff:.2e}"
            )
            assert diff < 1e-5
        print(
            f"CPU-time ratio per round: {', '.join(f'{x:.2f}x' for x in cpu_ratios)} "
            f"(target >= 2x in every round); load now {os.getloadavg()[0]:.2f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
