"""capmetrics.integrations.pycocoevalcap (also capmetrics.integrations.pycocoevalcap) against
pycocoevalcap itself: the example flow of pycocoevalcap (COCO annotation and results files,
``COCOEvalCap(coco, cocoRes)``, ``evaluate()``) run both ways on Flickr8k-Expert, every number
compared with ``==`` (types too); and the scorer classes on the same data. (test_exact_parity.py:
all of Flickr8k and aac-metrics' inputs.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from capmetrics.errors import MetricError
from capmetrics.integrations import pycocoevalcap as compat

from tests.plugins.coco_reference import needs_coco, needs_flickr8k, raw

pytestmark = [needs_coco, needs_flickr8k, pytest.mark.java]


def _flickr8k_coco_files(folder: Path, n_images: int = 300) -> tuple[Path, Path]:
    """COCO caption annotations of ``n_images`` Flickr8k-Expert images (5 references each) and a
    results file with each image's first Expert candidate; integer image ids, as COCO has them.
    (benchmarks/bench_compat.py runs all 1,000 images.)"""
    cands, refs, _ = raw("expert")
    from capmetrics.data.flickr8k import load_expert

    from tests.plugins.coco_reference import FLICKR8K

    dataset, _ = load_expert(FLICKR8K)
    first: dict[str, int] = {}
    for n, item in enumerate(dataset):
        first.setdefault(str(item.id).split("#")[0], n)
    images = list(first)[:n_images]
    annotations = {
        "info": {},
        "licenses": [],
        "type": "captions",
        "images": [{"id": i, "file_name": name} for i, name in enumerate(images)],
        "annotations": [
            {"image_id": i, "id": 10 * i + j, "caption": r}
            for i, name in enumerate(images)
            for j, r in enumerate(refs[first[name]])
        ],
    }
    results = [{"image_id": i, "caption": cands[first[name]]} for i, name in enumerate(images)]
    ann_file, res_file = folder / "captions_flickr8k.json", folder / "results_flickr8k.json"
    ann_file.write_text(json.dumps(annotations))
    res_file.write_text(json.dumps(results))
    return ann_file, res_file


def _example_flow(evaluator: type, ann_file: Path, res_file: Path):  # type: ignore[no-untyped-def]
    """pycocoevalcap's example/coco_eval_example.py, with the evaluator class swapped."""
    from pycocotools.coco import COCO

    coco = COCO(str(ann_file))
    coco_result = coco.loadRes(str(res_file))
    coco_eval = evaluator(coco, coco_result)
    coco_eval.params["image_id"] = coco_result.getImgIds()
    coco_eval.evaluate()
    return coco_eval


class _NoSpice:
    """Stands in for pycocoevalcap's Spice (it would download CoreNLP)."""

    def compute_score(self, gts, res):  # type: ignore[no-untyped-def]
        return math.nan, [math.nan] * len(gts)

    def method(self) -> str:
        return "SPICE"


def _same(ours: object, theirs: object, where: str) -> None:
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), where
        for key in theirs:
            _same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (float, np.floating)):
        assert type(ours) is type(theirs), f"{where}: {type(ours)} vs {type(theirs)}"
        assert ours == theirs or (math.isnan(ours) and math.isnan(theirs)), (
            f"{where}: {ours!r} != {theirs!r}"
        )
    else:
        assert ours == theirs, where


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory, request):  # type: ignore[no-untyped-def]
    """The example flow both ways, SPICE left out of both: pycocoevalcap's own Spice downloads
    CoreNLP and fails on Java 17, and a cold SPICE run takes minutes (its parity with the
    original jar is tests/plugins/test_spice.py's)."""
    import pycocoevalcap.eval as reference

    files = _flickr8k_coco_files(tmp_path_factory.mktemp("coco"))
    patch = pytest.MonkeyPatch()
    patch.setattr(reference, "Spice", _NoSpice)
    patch.setattr(compat, "spice_available", lambda: False)
    try:
        theirs = _example_flow(reference.COCOEvalCap, *files)
        with pytest.warns(
            UserWarning, match="SPICE is not set up here.*run `capmetrics setup spice`"
        ):
            ours = _example_flow(
                compat.COCOEvalCap, *files
            )  # not silently: pycocoevalcap has SPICE
    finally:
        patch.undo()
    for table in (theirs.eval, *theirs.imgToEval.values()):
        del table["SPICE"]
    return ours, theirs


def test_example_flow_gives_every_number_of_pycocoevalcap(both_ways) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = both_ways
    assert len(theirs.imgToEval) == len(ours.imgToEval) == 300
    assert set(theirs.eval) >= {
        "Bleu_1",
        "Bleu_2",
        "Bleu_3",
        "Bleu_4",
        "METEOR",
        "ROUGE_L",
        "CIDEr",
    }
    _same(ours.eval, theirs.eval, "eval")
    _same(ours.imgToEval, theirs.imgToEval, "imgToEval")
    assert len(ours.evalImgs) == len(theirs.evalImgs)
    for n, (a, b) in enumerate(zip(ours.evalImgs, theirs.evalImgs)):
        _same(a, b, f"evalImgs[{n}]")
    assert ours.params["image_id"] == theirs.params["image_id"]


def test_plain_dicts_give_the_same_numbers(both_ways, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ours, _ = both_ways
    ann_file, res_file = _flickr8k_coco_files(tmp_path)
    again = compat.COCOEvalCap(
        json.loads(ann_file.read_text()),
        json.loads(res_file.read_text()),
        verbose=False,
        spice=False,
    )
    again.evaluate()
    _same(again.eval, ours.eval, "eval")
    _same(again.imgToEval, ours.imgToEval, "imgToEval")


def _gts_res(n: int = 300, shuffle: bool = True) -> tuple[dict, dict]:
    """Tokenised gts/res dicts (by pycocoevalcap's own tokenizer), keys in a non-sorted order."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    cands, refs, _ = raw("expert")
    keys = list(range(n))[::-1] if shuffle else list(range(n))
    gts = {k: [{"caption": r} for r in refs[k]] for k in keys}
    res = {k: [{"caption": cands[k]}] for k in keys}
    tok = PTBTokenizer()
    return tok.tokenize(gts), tok.tokenize(res)


def test_tokenizer_gives_pycocoevalcap_tokens() -> None:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    cands, refs, _ = raw("expert")
    data = {
        k: [{"caption": c}, *({"caption": r} for r in refs[k])] for k, c in enumerate(cands[:500])
    }
    assert compat.PTBTokenizer().tokenize(data) == PTBTokenizer().tokenize(data)


@pytest.mark.parametrize("name", ["Bleu", "Rouge", "Cider", "Meteor"])
def test_scorers_return_the_shapes_and_values_of_pycocoevalcap(name: str) -> None:
    import pycocoevalcap.bleu.bleu
    import pycocoevalcap.cider.cider
    import pycocoevalcap.meteor.meteor
    import pycocoevalcap.rouge.rouge

    module = {
        "Bleu": pycocoevalcap.bleu.bleu,
        "Rouge": pycocoevalcap.rouge.rouge,
        "Cider": pycocoevalcap.cider.cider,
        "Meteor": pycocoevalcap.meteor.meteor,
    }[name]
    gts, res = _gts_res()
    reference = getattr(module, name)()
    theirs = reference.compute_score(gts, res)
    if name == "Meteor":
        reference.meteor_p.kill()
    ours = getattr(compat, name)().compute_score(gts, res)
    assert type(ours) is type(theirs) and len(ours) == 2
    assert type(ours[1]) is type(theirs[1])
    if name == "Bleu":
        assert len(ours[0]) == len(ours[1]) == 4
        for a, b in zip(ours[1], theirs[1]):
            assert type(a) is type(b) and len(a) == len(b) == len(gts)
            _same(dict(enumerate(a)), dict(enumerate(b)), "Bleu per image")
        _same(dict(enumerate(ours[0])), dict(enumerate(theirs[0])), "Bleu corpus")
    else:
        _same(ours[0], theirs[0], f"{name} corpus")
        _same(dict(enumerate(ours[1])), dict(enumerate(theirs[1])), f"{name} per image")
    assert getattr(compat, name)().method() == reference.method()


def test_bad_input_names_the_image() -> None:
    with pytest.raises(MetricError, match=r"res\[3\] must be a list of exactly one caption"):
        compat.Bleu().compute_score({3: ["a dog"]}, {3: ["a dog", "two"]})
    with pytest.raises(MetricError, match=r"only in gts: \['4'\]"):
        compat.Cider().compute_score({3: ["a dog"], 4: ["x"]}, {3: ["a dog"]})
    with pytest.raises(MetricError, match=r"gts\['a'\] must be a non-empty list"):
        compat.Rouge().compute_score({"a": []}, {"a": ["a dog"]})


def test_no_spice_warning_when_asked_to_leave_it_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    monkeypatch.setattr(compat, "spice_available", lambda: False)
    data = {
        "annotations": [
            {"image_id": 1, "caption": "a dog runs"},
            {"image_id": 2, "caption": "a cat"},
        ]
    }
    results = [{"image_id": 1, "caption": "a dog"}, {"image_id": 2, "caption": "a cat sits"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = compat.COCOEvalCap(data, results, spice=False, verbose=False)
        quiet.evaluate()
    assert "SPICE" not in quiet.eval and quiet.eval["Bleu_1"] > 0
