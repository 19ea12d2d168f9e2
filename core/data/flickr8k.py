"""Loaders for the Flickr8k human-judgement benchmarks: Flickr8k-Expert and Flickr8k-CF.

Both follow the CLIPScore preparation (``flickr8k_example/download.py``, described in
``PROVENANCE.md`` of the data folder): captions are compared as they appear in
``Flickr8k.token.txt`` and whitespace-normalised (``" ".join(s.split())``) on output.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from capmetrics.data.model import Dataset, Item, Problem
from capmetrics.errors import DataError

TOKEN_FILE = "Flickr8k.token.txt"
EXPERT_FILE = "ExpertAnnotations.txt"
CROWDFLOWER_FILE = "CrowdFlowerAnnotations.txt"


def normalize_space(text: str) -> str:
    """Collapse runs of whitespace to single spaces and strip both ends."""
    return " ".join(text.split())


def _rows(path: Path, n_fields: int) -> list[list[str]]:
    """The tab-separated rows of ``path``; every malformed line is reported at once."""
    if not path.is_file():
        raise DataError([Problem(str(path), None, "file not found")], header="cannot load Flickr8k")
    rows, problems = [], []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.strip().split("\t")
            if len(fields) != n_fields:
                problems.append(
                    Problem(
                        str(path),
                        None,
                        f"expected {n_fields} tab-separated fields, got {len(fields)}",
                        number,
                    )
                )
            rows.append(fields)
    if problems:
        raise DataError(problems, header=f"cannot load {path}")
    return rows


def load_captions(root: str | Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Read ``Flickr8k.token.txt``: caption id -> caption, and image name -> its 5 captions.

    Images are keyed by the file name before its first dot (as CLIPScore does, so the quirk
    key ``2258277193_586949ec62.jpg.1`` and the real image share one key; the later wins).
    """
    by_id: dict[str, str] = {}
    by_key: dict[str, list[str]] = defaultdict(list)
    for caption_id, caption in _rows(Path(root) / TOKEN_FILE, 2):
        by_id[caption_id] = caption
        by_key[caption_id.split("#")[0]].append(caption)
    by_image = {key.split(".")[0]: captions for key, captions in by_key.items()}
    return by_id, by_image


def _caption(by_id: dict[str, str], caption_id: str, source: Path, line: int) -> str:
    if caption_id not in by_id:
        raise DataError(
            [Problem(str(source), None, f"unknown caption id {caption_id!r}", line)],
            header=f"cannot load {source}",
        )
    return by_id[caption_id]


def _item(image: str, caption_id: str, refs: list[str], caption: str) -> Item:
    return Item(
        f"{image}#{caption_id}",
        tuple(normalize_space(r) for r in refs),
        (normalize_space(caption),),
    )


def load_expert(root: str | Path) -> tuple[Dataset, np.ndarray]:
    """Flickr8k-Expert: 5,664 (image, candidate) items with the image's 5 references.

    The 158 rows whose candidate is one of the image's own references are dropped.

    Returns:
        The dataset (one candidate per item, id ``"<image>#<caption id>"``) and the expert
        scores, an array of shape (n_items, 3) with values 1-4.
    """
    by_id, by_image = load_captions(root)
    source = Path(root) / EXPERT_FILE
    items, ratings = [], []
    for line, (image, caption_id, *scores) in enumerate(_rows(source, 5), 1):
        caption = _caption(by_id, caption_id, source, line)
        refs = by_image[image.split(".")[0]]
        if caption in refs:
            continue
        items.append(_item(image, caption_id, refs, caption))
        ratings.append([float(s) for s in scores])
    return Dataset(items, str(source)), np.array(ratings, dtype=float)


def load_crowdflower(root: str | Path) -> tuple[Dataset, np.ndarray]:
    """Flickr8k-CF: 47,830 (image, candidate) items rated by CrowdFlower workers.

    References are the image's 5 captions minus any caption that is a CF candidate of that
    image (one occurrence removed per candidate row, over all of the image's rows).

    Returns:
        The dataset and the share of "yes" judgements per item (``pct_yes``), shape (n_items,).
    """
    by_id, by_image = load_captions(root)
    source = Path(root) / CROWDFLOWER_FILE
    rows = []
    refs_of: dict[str, list[str]] = {}
    for line, (image, caption_id, pct_yes, _n_yes, _n_no) in enumerate(_rows(source, 5), 1):
        caption = _caption(by_id, caption_id, source, line)
        refs = refs_of.setdefault(image, list(by_image[image.split(".")[0]]))
        if caption in refs:
            refs.remove(caption)
        rows.append((image, caption_id, caption, float(pct_yes)))
    items = [_item(image, cid, refs_of[image], caption) for image, cid, caption, _ in rows]
    return Dataset(items, str(source)), np.array([r[3] for r in rows], dtype=float)


def group_by_image(
    items: Iterable[Item], size: int = 5, min_candidates: int = 1, min_references: int = 1
) -> list[tuple[list[str], list[str]]]:
    """Multi-candidate items from the one-candidate items of :func:`load_expert` or
    :func:`load_crowdflower`: per image (id ``"<image>#..."``, in order of first appearance), its
    first ``size`` candidates and references, for the images with at least ``min_candidates``
    candidates and ``min_references`` references."""
    by_image: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for item in items:
        group = by_image[str(item.id).split("#")[0]]
        group[0].append(item.candidates[0])
        group[1][:] = list(item.references)
    return [
        (c[:size], r[:size])
        for c, r in by_image.values()
        if len(c) >= min_candidates and len(r) >= min_references
    ]
