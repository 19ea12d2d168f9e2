"""Human judgments of captions: rated candidates and pairwise preferences, and their JSONL loader.

A rated record (one line)::

    {"id": "img1#c3", "image": "img1", "references": ["...", ...], "candidate": "...", "rating": 3}

``rating`` is a number or a list of numbers (one per rater; each becomes a separate data point,
as the Flickr8k-Expert protocol counts every expert rating). ``image`` (optional, default the
``id``) groups candidates for splits and bootstrap; ``references`` may be left out when a
references dataset is given, which is then looked up by ``image``.

DetailCaps' layout reads too: ``caption`` for ``candidate``, ``human_score`` or ``score`` for
``rating``, and its ``GT_Caption_*`` fields (in name order) for ``references``.

A pairwise record has ``"candidates": [a, b]`` and ``"preferred": 0 or 1`` (the index humans
preferred) instead of ``candidate``/``rating``, and optionally a ``"category"`` (HC, HI, HM, MM
in PASCAL-50S).

Problems are collected over the whole file and raised at once, as a :class:`JudgmentsError`
subclass named after the kind of problem when all problems are of one kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.data.model import Dataset, Item, Problem
from capmetrics.errors import DataError


class JudgmentsError(DataError):
    """A judgments file has problems (``problems`` lists them)."""


class MissingRatingError(JudgmentsError):
    """A record has no rating (or no preference, for pairwise records)."""


class NonNumericRatingError(JudgmentsError):
    """A rating is not a finite number."""


class UnknownIdError(JudgmentsError):
    """A record names an image or item id that the references dataset does not have."""


#: The rating's field: ``rating``, else (the DetailCaps layout) ``human_score`` or ``score``.
RATING_KEYS = ("rating", "human_score", "score")
#: DetailCaps' reference fields (``GT_Caption_GPT4O``, ``GT_Caption_GPT4V``, ...), read in name
#: order where a record has no ``references``.
DETAILCAPS_REFERENCES = "GT_Caption"


@dataclass
class Judgments:
    """Rated candidates: one candidate per item and one or more rating points per item.

    Attributes:
        dataset: the items (one candidate each, with its references).
        point_item: for every data point, the index of its item.
        point_rating: for every data point, the human rating.
        groups: per item, the image it belongs to (splits and bootstrap resample whole items).
        source: where the judgments came from.
    """

    dataset: Dataset
    point_item: np.ndarray
    point_rating: np.ndarray
    groups: list[str]
    source: str = "<memory>"

    @classmethod
    def from_ratings(
        cls,
        dataset: Dataset,
        ratings: np.ndarray | Sequence[Sequence[float]],
        groups: Sequence[str] | None = None,
    ) -> Judgments:
        """Build from a per-item rating array: shape (n_items,) or (n_items, n_raters)."""
        r = np.asarray(ratings, dtype=float)
        r = r[:, None] if r.ndim == 1 else r
        if r.shape[0] != len(dataset):
            raise JudgmentsError(
                [
                    Problem(
                        dataset.source, None, f"{r.shape[0]} rating rows for {len(dataset)} items"
                    )
                ]
            )
        keep = np.isfinite(r)
        items = np.repeat(np.arange(len(dataset))[:, None], r.shape[1], axis=1)
        return cls(
            dataset,
            items[keep],
            r[keep],
            list(groups) if groups is not None else [str(i) for i in dataset.ids],
            dataset.source,
        )

    @property
    def n_points(self) -> int:
        return int(self.point_item.size)

    def item_rating(self, how: str = "mean") -> np.ndarray:
        """One rating per item: ``mean``, ``median`` or ``mode`` (ties: the median of the tied
        modes)."""
        out = np.empty(len(self.dataset))
        order = np.argsort(self.point_item, kind="stable")
        bounds = np.searchsorted(self.point_item[order], np.arange(len(self.dataset) + 1))
        for i in range(len(self.dataset)):
            values = self.point_rating[order[bounds[i] : bounds[i + 1]]]
            out[i] = _reduce(values, how)
        return out

    def subset(self, item_mask: np.ndarray) -> Judgments:
        """The judgments of the items where ``item_mask`` is True."""
        keep = np.flatnonzero(item_mask)
        new_index = np.full(len(self.dataset), -1)
        new_index[keep] = np.arange(keep.size)
        point_keep = item_mask[self.point_item]
        dataset = Dataset([self.dataset.items[i] for i in keep], self.dataset.source)
        return Judgments(
            dataset,
            new_index[self.point_item[point_keep]],
            self.point_rating[point_keep],
            [self.groups[i] for i in keep],
            self.source,
        )

    def split_by_group(self, fraction: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Boolean item masks (first, second) splitting the images at random (seeded)."""
        chosen = choose_groups(self.groups, fraction, seed)
        first = np.array([g in chosen for g in self.groups])
        return first, ~first


def choose_groups(groups: Iterable[str], fraction: float, seed: int = 0) -> set[str]:
    """A seeded share ``fraction`` of the distinct ``groups`` (the first part of
    :meth:`Judgments.split_by_group`; equal group sets give equal choices)."""
    names = sorted(set(groups))
    rng = np.random.default_rng(seed)
    return set(
        np.asarray(names, dtype=object)[rng.permutation(len(names))[: round(fraction * len(names))]]
    )


def _reduce(values: np.ndarray, how: str) -> float:
    if how == "mean":
        return float(values.mean())
    if how == "median":
        return float(np.median(values))
    if how == "mode":
        uniq, counts = np.unique(values, return_counts=True)
        return float(np.median(uniq[counts == counts.max()]))
    raise ValueError(f"unknown rating reduction {how!r}; use mean, median or mode")


@dataclass
class PairJudgments:
    """Pairwise preferences: two candidates per item and the index (0/1) humans preferred."""

    dataset: Dataset
    preferred: np.ndarray
    categories: list[str]
    source: str = "<memory>"


# ---------------------------------------------------------------------------------------------
# JSONL loader
# ---------------------------------------------------------------------------------------------
_KINDS = (
    ("no rating", MissingRatingError),
    ("no preference", MissingRatingError),
    ("not a finite number", NonNumericRatingError),
    ("unknown", UnknownIdError),
)


def _error(problems: list[Problem], source: str) -> JudgmentsError:
    kinds = {
        next((cls for key, cls in _KINDS if key in p.message), JudgmentsError) for p in problems
    }
    cls = kinds.pop() if len(kinds) == 1 else JudgmentsError
    return cls(problems, header=f"cannot load judgments from {source}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


class _Reader:
    def __init__(self, source: str, references: Mapping[str, Sequence[str]] | None) -> None:
        self.source = source
        self.references = references
        self.problems: list[Problem] = []

    def problem(self, item: Any, message: str, line: int) -> None:
        self.problems.append(Problem(self.source, item, message, line))

    def refs(self, record: dict[str, Any], image: str, rid: Any, line: int) -> tuple[str, ...]:
        refs = record.get("references")
        if refs is None and any(k.startswith(DETAILCAPS_REFERENCES) for k in record):
            refs = [record[k] for k in sorted(record) if k.startswith(DETAILCAPS_REFERENCES)]
        if refs is None and self.references is not None:
            if image not in self.references:
                self.problem(
                    rid, f"unknown image id {image!r}: not in the references dataset", line
                )
                return ()
            refs = self.references[image]
        if (
            not isinstance(refs, list | tuple)
            or not refs
            or not all(isinstance(r, str) and r.strip() for r in refs)
        ):
            self.problem(rid, "references must be a non-empty list of non-empty strings", line)
            return ()
        return tuple(refs)

    def ratings(self, record: dict[str, Any], rid: Any, line: int) -> list[float]:
        key = next((k for k in RATING_KEYS if record.get(k) is not None), None)
        if key is None:
            self.problem(rid, "no rating", line)
            return []
        raw = record[key]
        values = raw if isinstance(raw, list) else [raw]
        out = [_number(v) for v in values]
        if not values or any(v is None for v in out):
            self.problem(
                rid, f"rating {raw!r} is not a finite number (or a non-empty list of them)", line
            )
            return []
        return [v for v in out if v is not None]


def _records(path: Path) -> list[tuple[int, Any]]:
    from capmetrics.io.strict_json import parse_json, read_bytes

    out, problems = [], []
    try:
        lines = read_bytes(path, "a judgments file").decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise JudgmentsError(
            [Problem(str(path), None, f"invalid UTF-8 at byte {err.start}")],
            header=f"cannot load judgments from {path}",
        ) from err
    for line, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            out.append((line, parse_json(text, str(path), line)))
        except DataError as err:  # bad JSON, nesting past the parser's limit, 5000-digit numbers
            problems.extend(err.problems)
    if problems:
        raise JudgmentsError(problems, header=f"cannot load judgments from {path}")
    return out


def load_judgments(
    path: str | Path,
    references: Dataset | Mapping[str, Sequence[str]] | None = None,
    images: str | Path | None = None,
) -> Judgments | PairJudgments:
    """Load a judgments JSONL file: rated records give :class:`Judgments`, pairwise records
    :class:`PairJudgments` (the kind is decided by the first record).

    Args:
        path: the JSONL file (format in the module docstring).
        references: a dataset (or mapping image id -> references) for records without
            ``references``.
        images: the folder of the images (``.json`` files in the CLIPScore benchmark format,
            :mod:`capmetrics.data.clipscore_json`, are read too).

    Raises:
        MissingRatingError, NonNumericRatingError, UnknownIdError, JudgmentsError.
    """
    path = Path(path)
    if not path.is_file():
        raise JudgmentsError(
            [Problem(str(path), None, "file not found")], header="cannot load judgments"
        )
    if path.suffix == ".json":
        from capmetrics.data.clipscore_json import load_clipscore_json

        return load_clipscore_json(path, images)
    if isinstance(references, Dataset):
        references = {str(item.id): item.references for item in references}
    records = _records(path)
    if not records:
        raise JudgmentsError(
            [Problem(str(path), None, "no records")], header=f"cannot load judgments from {path}"
        )
    reader = _Reader(str(path), references)
    pairwise = isinstance(records[0][1], dict) and "candidates" in records[0][1]
    result = _pairwise(records, reader) if pairwise else _rated(records, reader)
    if reader.problems:
        raise _error(reader.problems, str(path))
    return result


def _header(record: Any, reader: _Reader, line: int, seen: set[str]) -> tuple[str, str] | None:
    if not isinstance(record, dict):
        reader.problem(None, f"expected a JSON object, got {type(record).__name__}", line)
        return None
    rid = record.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int):
        reader.problem(None, f"id must be a string or an integer, got {rid!r}", line)
        return None
    if str(rid) in seen:
        reader.problem(rid, "duplicate id", line)
        return None
    seen.add(str(rid))
    return str(rid), str(record.get("image", rid))


def _valid_records(
    records: list[tuple[int, Any]], reader: _Reader
) -> Iterator[tuple[int, dict[str, Any], str, str, tuple[str, ...]]]:
    """(line, record, id, image, references) of every record with a valid, unique id."""
    seen: set[str] = set()
    for line, record in records:
        head = _header(record, reader, line, seen)
        if head is not None:
            rid, image = head
            yield line, record, rid, image, reader.refs(record, image, rid, line)


def _rated(records: list[tuple[int, Any]], reader: _Reader) -> Judgments:
    items: list[Item] = []
    point_item: list[int] = []
    point_rating: list[float] = []
    groups: list[Any] = []
    for line, record, rid, image, refs in _valid_records(records, reader):
        cand = record.get("candidate", record.get("caption"))
        if not isinstance(cand, str) or not cand.strip():
            reader.problem(rid, "candidate must be a non-empty string", line)
        ratings = reader.ratings(record, rid, line)
        if refs and ratings and isinstance(cand, str) and cand.strip():
            point_item += [len(items)] * len(ratings)
            point_rating += ratings
            items.append(Item(rid, refs, (cand,)))
            groups.append(image)
    dataset = Dataset(items, reader.source)
    return Judgments(
        dataset,
        np.array(point_item, dtype=int),
        np.array(point_rating, dtype=float),
        groups,
        reader.source,
    )


def _pairwise(records: list[tuple[int, Any]], reader: _Reader) -> PairJudgments:
    items, preferred, categories = [], [], []
    for line, record, rid, _image, refs in _valid_records(records, reader):
        cands = record.get("candidates")
        if (
            not isinstance(cands, list)
            or len(cands) != 2
            or not all(isinstance(c, str) and c.strip() for c in cands)
        ):
            reader.problem(rid, "candidates must be a list of two non-empty strings", line)
            continue
        if record.get("preferred") is None:
            reader.problem(rid, "no preference ('preferred': 0 or 1)", line)
            continue
        if record["preferred"] not in (0, 1) or isinstance(record["preferred"], bool):
            reader.problem(rid, f"preferred must be 0 or 1, got {record['preferred']!r}", line)
            continue
        if refs:
            items.append(Item(rid, refs, tuple(cands)))
            preferred.append(int(record["preferred"]))
            categories.append(str(record.get("category", "all")))
    return PairJudgments(
        Dataset(items, reader.source), np.array(preferred, dtype=int), categories, reader.source
    )
