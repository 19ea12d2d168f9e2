"""Every kind of bad input gets a named error; nothing is dropped silently."""

from __future__ import annotations

import json

import pytest
from capmetrics import DataError
from capmetrics.data import from_gts_res, load_dataset

from tests.conftest import DATA, SAMPLE

BAD = DATA / "bad"


def problems(excinfo) -> list[str]:
    return [str(p) for p in excinfo.value.problems]


def test_sample_loads_with_several_candidates():
    ds = load_dataset(SAMPLE)
    assert len(ds) == 20 and ds.n_candidates == 112
    assert all(len(item.references) == 5 for item in ds)


def test_jsonl_reports_every_problem_at_once():
    with pytest.raises(DataError) as info:
        load_dataset(BAD / "problems.jsonl", empty_candidates="error")
    src = str(BAD / "problems.jsonl")
    assert problems(info) == [
        f"{src}:2: item 'b': reference 1 is empty or whitespace-only",
        f"{src}:2: item 'b': candidate 0 is empty or whitespace-only",
        f"{src}:4: item 'a': duplicate id",
        f"{src}:5: item 'd': references must be a list of strings, got str",
        f"{src}:5: item 'd': candidate 0 must be a string, got int",
        f"{src}:6: item id must be a string or an integer, got ['bad id']",
        f"{src}: item 'c': has no references",
    ]
    assert str(info.value).startswith(f"cannot load {src}: 7 problem(s)")


def test_skip_lists_what_was_skipped():
    with pytest.raises(DataError):  # a problem without an item (bad id) cannot be skipped
        load_dataset(BAD / "problems.jsonl", on_error="skip")
    with pytest.raises(DataError) as info:
        load_dataset(BAD / "vdtk_bad.json", empty_candidates="error")
    assert [p.split(": ", 1)[1] for p in problems(info)] == [
        "item '0': candidate 1 is empty or whitespace-only",
        "item '1': duplicate id",
        "expected an object, got str",
    ]
    ds = load_dataset(BAD / "gts.json", results=BAD / "res.json", on_error="skip")
    assert ds.ids == ["1", "3"]
    assert [(p.item, p.message) for p in ds.skipped] == [
        ("4", "has candidates but no references (id missing from the references)"),
        ("2", "has references but no candidates (id missing from the results)"),
    ]


def test_coco_results_and_annotations_checked_both_ways():
    with pytest.raises(DataError) as info:
        load_dataset(BAD / "coco_annotations.json", results=BAD / "coco_results.json")
    msgs = [p.split(": ", 1)[1] for p in problems(info)]
    assert msgs == [
        "item 3: reference 0 is empty or whitespace-only",
        "item 99: result 3 names an image id missing from the annotations",
        "item 2: has no candidates",
    ]
    ds = load_dataset(
        BAD / "coco_annotations.json", results=BAD / "coco_results.json", on_error="skip"
    )
    assert ds.ids == [1]
    assert ds[0].candidates == (
        "a man is riding a horse",
        "a horse",
    )  # several results = several candidates
    assert ds[0].references == ("a man rides a horse", "a person on a horse")


def test_invalid_utf8_broken_json_and_missing_files():
    with pytest.raises(DataError, match=r"invalid_utf8.jsonl:1: invalid UTF-8 at byte 31"):
        load_dataset(BAD / "invalid_utf8.jsonl")
    with pytest.raises(DataError, match=r"broken.jsonl:2: not valid JSON"):
        load_dataset(BAD / "broken.jsonl")
    with pytest.raises(DataError, match=r"not_json.json:2: not valid JSON"):
        load_dataset(BAD / "not_json.json")
    with pytest.raises(DataError, match=r"nope.jsonl: cannot read: No such file or directory"):
        load_dataset(BAD / "nope.jsonl")
    with pytest.raises(DataError, match="needs the results file as well"):
        load_dataset(BAD / "gts.json")
    with pytest.raises(DataError, match="unknown format 'xml'"):
        load_dataset(BAD / "gts.json", format="xml")


def test_gts_res_dicts_in_python_and_non_ascii(tmp_path):
    ds = from_gts_res({1: ["un café très noir"], 2: ["b"]}, {1: ["un café"], 2: ["b", "c"]})
    assert ds[0].references == ("un café très noir",) and ds[1].candidates == ("b", "c")
    path = tmp_path / "data.jsonl"
    path.write_text(
        json.dumps({"id": 5, "references": ["日本語のキャプション"], "candidates": ["ü"]}) + "\n",
        encoding="utf-8",
    )
    assert load_dataset(path)[0].references == ("日本語のキャプション",)


def test_empty_candidates_load_by_default_and_empty_references_never():
    with pytest.raises(DataError) as info:
        load_dataset(BAD / "problems.jsonl")
    msgs = problems(info)
    assert not any("candidate 0 is empty" in m for m in msgs)
    assert any("item 'b': reference 1 is empty or whitespace-only" in m for m in msgs)
    with pytest.raises(DataError) as info:
        load_dataset(BAD / "vdtk_bad.json")
    assert [p.split(": ", 1)[1] for p in problems(info)] == [
        "item '1': duplicate id",
        "expected an object, got str",
    ]
    with pytest.raises(DataError, match="empty_candidates must be 'score' or 'error'"):
        load_dataset(SAMPLE, empty_candidates="drop")


def test_group_by_image_makes_multi_candidate_items():
    from capmetrics.data.flickr8k import group_by_image
    from capmetrics.data.model import Item

    items = [
        Item("a.jpg#1", ("r1", "r2"), ("c1",)),
        Item("b.jpg#4", ("s1",), ("d1",)),
        Item("a.jpg#2", ("r1", "r2"), ("c2",)),
        Item("a.jpg#3", ("r1", "r2"), ("c3",)),
    ]
    assert group_by_image(items) == [(["c1", "c2", "c3"], ["r1", "r2"]), (["d1"], ["s1"])]
    assert group_by_image(items, size=2, min_candidates=2) == [(["c1", "c2"], ["r1", "r2"])]
    assert group_by_image(items, min_references=3) == []
