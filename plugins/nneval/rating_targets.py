"""Training NNEval on human ratings: per-item soft targets and a split of the judged images that
is the same in every judgment set, so that no held-out image is used for training or early
stopping."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from capmetrics.data.judgments import Judgments, choose_groups
from capmetrics.errors import MetricError


def rating_targets(judgments: Judgments) -> np.ndarray:
    """Each item's mean rating rescaled to [0, 1] by the lowest and highest rating point of the
    set (Flickr8k-Expert 1-4 -> (mean - 1) / 3; Flickr8k-CF's share of yes votes stays as is)."""
    low, high = float(judgments.point_rating.min()), float(judgments.point_rating.max())
    if not high > low:
        raise MetricError(
            f"{source_name(judgments)}: every rating is {low}; rating targets need at least two "
            "values"
        )
    return (judgments.item_rating("mean") - low) / (high - low)


def source_name(judgments: Judgments) -> str:
    """The file name of the judgments' source (never an absolute path)."""
    return Path(judgments.source).name


def split_images(sets: Sequence[Judgments], fraction: float, seed: int) -> set[str]:
    """A seeded share of the images judged in any of ``sets`` (``choose_groups`` over their
    union: for one set, or sets judging the same images, the first part of
    ``Judgments.split_by_group(fraction, seed)``)."""
    return choose_groups((g for j in sets for g in j.groups), fraction, seed)


def of_images(judgments: Judgments, images: set[str]) -> np.ndarray:
    """Item mask: the items whose image is in ``images``."""
    return np.array([g in images for g in judgments.groups], dtype=bool)
