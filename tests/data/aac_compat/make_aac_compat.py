"""Make the aac-metrics compatibility fixtures: inputs.json.gz and expected.json.gz.

Inputs: aac-metrics' coco-caption compatibility examples (tests/test_compatibility_caption_
evaluation_tools.py of github.com/Labbeti/aac-metrics, MIT licence, version 0.6.0): example_0
(three audio captions with five references each, written in that test) and data/example_1.csv,
data/example_2.csv (Clotho captions: ``caption_predicted`` against ``caption_1`` .. ``caption_5``).

Expected values: pycocoevalcap 1.2's ``COCOEvalCap`` flow on them, as aac-metrics' test gets them
from caption-evaluation-tools (a coco-caption fork whose scorers compute the same operations):
COCO annotation and result files with running integer ids, pycocotools' ``COCO``/``loadRes``,
its Java PTBTokenizer, BLEU-1..4, METEOR (the jar), ROUGE-L and CIDEr-D. SPICE is left out
(pycocoevalcap's own Spice downloads CoreNLP) and so is SPIDEr (capmetrics has no SPIDEr).
JSON writes every float with ``repr``, so the stored numbers read back to the same bits.

Run: ``python tests/data/aac_compat/make_aac_compat.py /path/to/aac-metrics`` (a checkout);
without the path it recomputes expected.json.gz from the stored inputs.json.gz.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE_COLUMNS = [f"caption_{k}" for k in range(1, 6)]

#: example_0 of aac-metrics' test (its inputs, as data).
EXAMPLE_0 = {
    "candidates": ["a man is speaking", "birds chirping", "rain is falling in the background"],
    "references": [
        ["man speaks", "man is speaking", "a man speaks", "man talks", "someone is talking"],
        ["a bird is chirping"] * 5,
        ["heavy rain noise"] * 5,
    ],
}


def read_csv(path: Path) -> dict[str, list]:
    """Candidates and reference lists of one of aac-metrics' example CSV files."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return {
        "candidates": [row["caption_predicted"] for row in rows],
        "references": [[row[c] for c in REFERENCE_COLUMNS] for row in rows],
    }


class _NoSpice:
    """Stands in for pycocoevalcap's Spice (it would download CoreNLP)."""

    def compute_score(self, gts, res):  # type: ignore[no-untyped-def]
        return math.nan, [math.nan] * len(gts)

    def method(self) -> str:
        return "SPICE"


def coco_eval(candidates: list[str], references: list[list[str]]) -> dict:
    """pycocoevalcap's example flow (files, COCO, loadRes, COCOEvalCap) without SPICE."""
    import pycocoevalcap.eval as reference
    from pycocotools.coco import COCO

    annotations = {
        "info": {},
        "licenses": [],
        "type": "captions",
        "images": [{"id": i} for i in range(len(candidates))],
        "annotations": [
            {"image_id": i, "id": 5 * i + j, "caption": r}
            for i, refs in enumerate(references)
            for j, r in enumerate(refs)
        ],
    }
    results = [{"image_id": i, "caption": c} for i, c in enumerate(candidates)]
    reference.Spice = _NoSpice
    with tempfile.TemporaryDirectory() as folder:
        ann_file, res_file = Path(folder, "annotations.json"), Path(folder, "results.json")
        ann_file.write_text(json.dumps(annotations))
        res_file.write_text(json.dumps(results))
        coco = COCO(str(ann_file))
        coco_result = coco.loadRes(str(res_file))
        evaluator = reference.COCOEvalCap(coco, coco_result)
        evaluator.params["image_id"] = coco_result.getImgIds()
        evaluator.evaluate()
    drop = lambda table: {k: float(v) for k, v in table.items() if k not in ("SPICE", "image_id")}  # noqa: E731
    per_image = list(evaluator.imgToEval.values())
    return {
        "eval": drop(evaluator.eval),
        "image_id": [table["image_id"] for table in per_image],
        "imgToEval": {m: [table[m] for table in per_image] for m in drop(per_image[0])},
    }


def main() -> None:
    inputs_file = HERE / "inputs.json.gz"
    if len(sys.argv) > 1:
        data = Path(sys.argv[1]) / "data"
        inputs = {
            "example_0": EXAMPLE_0,
            "example_1": read_csv(data / "example_1.csv"),
            "example_2": read_csv(data / "example_2.csv"),
        }
        write(inputs_file, inputs)
    with gzip.open(inputs_file, "rt", encoding="utf-8") as f:
        inputs = json.load(f)
    expected = {
        name: coco_eval(example["candidates"], example["references"])
        for name, example in inputs.items()
    }
    import pycocoevalcap

    expected["made_by"] = {
        "pycocoevalcap": getattr(pycocoevalcap, "__version__", "1.2"),
        "script": "tests/data/aac_compat/make_aac_compat.py",
    }
    write(HERE / "expected.json.gz", expected)


def write(path: Path, data: dict) -> None:
    """Compact JSON, gzipped with no time stamp (the same input makes the same bytes)."""
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(json.dumps(data, ensure_ascii=False).encode("utf-8"))


if __name__ == "__main__":
    main()
