"""NNEval training data: impostors, system output, the Flickr8k split, rank sampling."""

from __future__ import annotations

import numpy as np
import pytest
from capmetrics.data.model import Dataset, Item
from capmetrics.errors import DataError
from capmetrics.plugins.nneval.training_data import (
    build_training_set,
    load_flickr8k_split,
    sample_ranks,
)

from tests.conftest import FLICKR8K
from tests.plugins.nneval.toys import needs_flickr8k, toy_images


def test_training_set_from_impostors() -> None:
    images = toy_images()
    t = build_training_set(images, n_human=3, n_machine=3, n_refs=4, impostor_pool=4, seed=0)
    assert len(t) == 72 and t.labels.sum() == 36
    for cand, refs, label, image in zip(t.candidates, t.references, t.labels, t.images):
        own = next(it.references for it in images if it.id == image)
        assert len(refs) == 4 and set(refs) <= set(own)
        assert (cand in own) == bool(label) and cand not in refs
    # the nearest impostors share the topic word (TF-IDF picks the same-topic image)
    assert all(
        c.split()[1] == "dog"
        for c, lab, im in zip(t.candidates, t.labels, t.images)
        if im == "img0" and not lab
    )
    again = build_training_set(images, impostor_pool=4, seed=0)
    assert again.candidates == t.candidates


def test_training_set_from_system_output_and_bad_input() -> None:
    images = toy_images(3)
    t = build_training_set(
        images, system_output={"img1": ["a machine caption", "another one"]}, seed=0
    )
    assert (t.labels == 0).sum() == 2 and t.labels.sum() == 9
    with pytest.raises(DataError, match="unknown image id"):
        build_training_set(images, system_output={"img9": ["x"]})
    with pytest.raises(DataError, match="needs at least 2 references"):
        build_training_set(Dataset([Item("a", ("only one",), ())]))


@needs_flickr8k
def test_flickr8k_train_split_is_disjoint_from_the_judgedtoy_images() -> None:
    from capmetrics.analysis.meta import load_preset

    train_images = load_flickr8k_split(FLICKR8K, "train")
    expert, _ = load_preset("flickr8k-expert", FLICKR8K)
    assert len(train_images) == 6000 and all(len(it.references) == 5 for it in train_images)
    assert not {str(it.id) for it in train_images} & set(expert.groups)


def test_impostor_rank_sampling() -> None:
    rng = np.random.default_rng(0)
    ranks = np.concatenate([sample_ranks(3, 5000, "log-rank", rng) for _ in range(2000)])
    assert ranks.min() >= 0 and ranks.max() < 5000
    decades = np.histogram(ranks, bins=[0, 9, 99, 999])[0]
    assert decades[1] == pytest.approx(decades[2], rel=0.15)  # as many in 10-100 as in 100-1000
    assert sorted(sample_ranks(3, 3, "log-rank", rng)) == [0, 1, 2]
    assert len(set(sample_ranks(4, 10, "uniform", rng))) == 4
    with pytest.raises(DataError, match="unknown sampling"):
        sample_ranks(1, 10, "nearest", rng)
