"""capmetrics' own scores (default ``ptb`` tokenizer) reproduce the published Kendall τ of the
classic metrics on Flickr8k (PAC-S ``compute_correlations.py`` expected output, PROVENANCE.md):
Flickr8k-Expert τ-c over 16,992 points (each item repeated for its 3 expert scores) and
Flickr8k-CF τ-b over 47,830 points, × 100, to three decimals."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.components.base import Distance
from capmetrics.plugins.ngram.bleu import Bleu1, Bleu4
from capmetrics.plugins.ngram.cider import CiderD
from capmetrics.plugins.ngram.rouge import RougeL
from scipy.stats import kendalltau

from tests.plugins.coco_reference import needs_flickr8k, raw

#: metric -> (Expert τ-c, CF τ-b); CIDEr in these tables is coco-caption's Cider, i.e. CIDEr-D.
PUBLISHED = {
    Bleu1: (32.324, 17.946),
    Bleu4: (30.776, 16.863),
    RougeL: (32.314, 19.903),
    CiderD: (43.891, 24.619),
}


def kendall_x100(name: str, metric: Distance, variant: str) -> float:
    cands, refs, ratings = raw(name)
    values = metric.score(cands, refs).values
    per_point = np.repeat(values, ratings.shape[1]) if ratings.ndim == 2 else values
    return float(kendalltau(per_point, ratings.ravel(), variant=variant).statistic) * 100


@needs_flickr8k
@pytest.mark.parametrize("cls", list(PUBLISHED))
def test_flickr8k_expert_tau_c(cls: type[Distance]) -> None:
    assert round(kendall_x100("expert", cls(), "c"), 3) == PUBLISHED[cls][0]


@needs_flickr8k
@pytest.mark.parametrize("cls", list(PUBLISHED))
def test_flickr8k_cf_tau_b(cls: type[Distance]) -> None:
    assert round(kendall_x100("cf", cls(), "b"), 3) == PUBLISHED[cls][1]


def _meteor_resources() -> bool:
    from capmetrics.errors import MetricError
    from capmetrics.plugins.meteor import meteor_files

    try:
        meteor_files()
    except MetricError:
        return False
    return True


@needs_flickr8k
@pytest.mark.skipif(not _meteor_resources(), reason="needs pycocoevalcap's METEOR files")
def test_flickr8k_expert_tau_c_native_meteor() -> None:
    from capmetrics.plugins.meteor import Meteor

    assert round(kendall_x100("expert", Meteor(), "c"), 3) == 41.822


@pytest.mark.slow(full=True)
@needs_flickr8k
def test_flickr8k_cf_tau_b_native_meteor() -> None:
    from capmetrics.plugins.meteor import Meteor

    assert round(kendall_x100("cf", Meteor(), "b"), 3) == 22.265
