"""AI Challenger image captioning (AIC-ICC) files: the references are a JSON list of
``{"url": ..., "image_id": "<file name>.jpg", "caption": ["...", ...]}`` (five raw Chinese
captions per image); the results are a COCO-style list of ``{"image_id", "caption"}`` whose
ids name the image with or without its extension (AIC's submissions leave it out).

Each item's id is the reference file's ``image_id`` as written, and its image is that file
name (resolved against ``--images``). Captions load as written: segmenting them is the
tokenizer's work (``--lang zh``: jieba, the convention of AIC-ICC's evaluation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capmetrics.data.model import Dataset


def is_aic(data: Any) -> bool:
    """Whether parsed JSON looks like AIC-ICC references: a non-empty list whose first
    object has a string ``image_id`` and a list ``caption``."""
    if not isinstance(data, list) or not data or not isinstance(data[0], Mapping):
        return False
    first = data[0]
    return isinstance(first.get("image_id"), str) and isinstance(first.get("caption"), list)


def _stem(image_id: str) -> str:
    """The image id without a file extension (``abc.jpg`` -> ``abc``)."""
    head, dot, tail = image_id.rpartition(".")
    return head if dot and head and tail and "/" not in tail else image_id


def from_aic(
    references: Any,
    results: Any,
    source: str = "<aic>",
    on_error: Any = "raise",
    empty_candidates: Any = "score",
) -> Dataset:
    """A dataset from AIC-ICC references and a results list (several results per image are
    several candidates). Every problem is reported at once, naming the entry."""
    from capmetrics.data.loaders import _Collector

    col = _Collector(source, empty_candidates)
    if not isinstance(references, list):
        col.problem(None, "AIC-ICC references must be a list of {'image_id', 'caption'} objects")
        return col.finish(on_error)
    by_stem: dict[str, str] = {}
    for n, row in enumerate(references):
        if (
            not isinstance(row, Mapping)
            or not isinstance(row.get("image_id"), str)
            or "caption" not in row
        ):
            col.problem(
                None,
                f"reference entry {n} must be an object with a string 'image_id' and a "
                "'caption' list",
            )
            continue
        item_id = row["image_id"]
        if not col.check_id(item_id):
            continue
        if item_id in col.items:
            col.problem(item_id, f"reference entry {n} repeats the image id")
            continue
        col.items[item_id] = {
            "references": col.captions(item_id, "references", row["caption"]),
            "candidates": [],
            "image": item_id,
        }
        by_stem.setdefault(_stem(item_id), item_id)
    if not isinstance(results, list):
        col.problem(None, "AIC-ICC results must be a list of {'image_id', 'caption'} objects")
        return col.finish(on_error)
    for n, row in enumerate(results):
        if not isinstance(row, Mapping) or "image_id" not in row or "caption" not in row:
            col.problem(None, f"result {n} must be an object with 'image_id' and 'caption'")
            continue
        key = row["image_id"]
        item_id = (
            key
            if key in col.items
            else by_stem.get(_stem(str(key)))
            if isinstance(key, str)
            else None
        )
        if item_id is None:
            named = key if isinstance(key, (str, int)) and not isinstance(key, bool) else None
            col.problem(named, f"result {n} names an image id missing from the references")
            continue
        col.items[item_id]["candidates"].extend(
            col.captions(item_id, "candidates", [row["caption"]])
        )
    return col.finish(on_error)
