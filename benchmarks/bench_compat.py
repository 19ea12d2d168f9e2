"""pycocoevalcap's example flow (``COCOEvalCap(coco, cocoRes).evaluate()``) with pycocoevalcap and
with ``capmetrics.integrations.pycocoevalcap``, on COCO files built from Flickr8k-Expert (each
image's 5 references, its first Expert candidate); every number checked bit-identical. SPICE is
left out of both (pycocoevalcap's own Spice downloads CoreNLP). pycocoevalcap starts its METEOR
JVM inside the timed run; capmetrics' METEOR is the native one.

Run: ``python benchmarks/bench_compat.py [--data DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
from capmetrics.data.flickr8k import load_expert
from capmetrics.integrations import pycocoevalcap as compat

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"


class NoSpice:
    def compute_score(self, gts, res):  # type: ignore[no-untyped-def]
        return math.nan, [math.nan] * len(gts)

    def method(self) -> str:
        return "SPICE"


def write_files(data: Path, folder: Path) -> tuple[str, str]:
    dataset, _ = load_expert(data)
    first = {}
    for item in dataset:
        first.setdefault(str(item.id).split("#")[0], item)
    items = list(first.values())
    ann = {
        "images": [{"id": i} for i in range(len(items))],
        "annotations": [
            {"image_id": i, "id": 10 * i + j, "caption": r}
            for i, it in enumerate(items)
            for j, r in enumerate(it.references)
        ],
    }
    res = [{"image_id": i, "caption": it.candidates[0]} for i, it in enumerate(items)]
    (folder / "ann.json").write_text(json.dumps(ann))
    (folder / "res.json").write_text(json.dumps(res))
    return str(folder / "ann.json"), str(folder / "res.json")


def run(evaluator: type, ann: str, res: str) -> tuple[float, object]:
    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(ann)
        coco_res = coco.loadRes(res)
        start = time.perf_counter()
        ev = evaluator(coco, coco_res)
        ev.params["image_id"] = coco_res.getImgIds()
        ev.evaluate()
    return time.perf_counter() - start, ev


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT)
    args = parser.parse_args()
    import pycocoevalcap.eval as reference

    reference.Spice = NoSpice  # pycocoevalcap would try to download CoreNLP
    with tempfile.TemporaryDirectory() as tmp:
        ann, res = write_files(args.data, Path(tmp))
        t_ref, theirs = run(reference.COCOEvalCap, ann, res)
        t_ours, ours = run(lambda c, r: compat.COCOEvalCap(c, r, spice=False), ann, res)
    keys = [k for k in theirs.eval if k != "SPICE"]
    worst = max(
        abs(ours.imgToEval[i][k] - theirs.imgToEval[i][k]) for i in theirs.imgToEval for k in keys
    )
    worst = max(worst, max(abs(ours.eval[k] - theirs.eval[k]) for k in keys))
    differ = sum(
        ours.imgToEval[i][k] != theirs.imgToEval[i][k] for i in theirs.imgToEval for k in keys
    )
    differ += sum(ours.eval[k] != theirs.eval[k] for k in keys)
    print(f"{len(theirs.imgToEval)} images, metrics {', '.join(keys)}")
    print(f"pycocoevalcap COCOEvalCap.evaluate: {t_ref:8.2f} s")
    print(f"capmetrics compat COCOEvalCap     : {t_ours:8.2f} s   ({t_ref / t_ours:.1f}x)")
    print(
        f"max abs difference over eval and imgToEval: {worst:.2g}; numbers not bit-identical: "
        f"{differ} of {len(keys) * (len(theirs.imgToEval) + 1)}"
    )
    print("corpus:", {k: round(float(v), 4) for k, v in ours.eval.items()})
    assert differ == 0 and np.isfinite(worst)
    stages(theirs)


def stages(ev) -> None:  # type: ignore[no-untyped-def]
    """Tokenisation and each scorer alone, pycocoevalcap's classes against the compat ones."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    gts = {i: ev.coco.imgToAnns[i] for i in ev.params["image_id"]}
    res = {i: ev.cocoRes.imgToAnns[i] for i in ev.params["image_id"]}
    pairs = {"PTBTokenizer (both captions sets)": (PTBTokenizer, compat.PTBTokenizer)}
    for name, (ref_cls, our_cls) in pairs.items():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            t0 = time.perf_counter()
            tg, tr = ref_cls().tokenize(gts), ref_cls().tokenize(res)
            t1 = time.perf_counter()
            our_cls().tokenize(gts), our_cls().tokenize(res)
            t2 = time.perf_counter()
        print(
            f"  {name:34s} pycocoevalcap {t1 - t0:7.3f} s  compat {t2 - t1:7.3f} s  "
            f"({(t1 - t0) / (t2 - t1):.0f}x)"
        )
    for name, ref_cls, our_cls in (
        ("Bleu(4)", Bleu, compat.Bleu),
        ("Rouge", Rouge, compat.Rouge),
        ("Cider", Cider, compat.Cider),
    ):
        with contextlib.redirect_stdout(io.StringIO()):
            t0 = time.perf_counter()
            ref_cls().compute_score(tg, tr)
            t1 = time.perf_counter()
            our_cls().compute_score(tg, tr)
            t2 = time.perf_counter()
        print(
            f"  {name:34s} pycocoevalcap {t1 - t0:7.3f} s  compat {t2 - t1:7.3f} s  "
            f"({(t1 - t0) / (t2 - t1):.0f}x)"
        )


if __name__ == "__main__":
    main()
