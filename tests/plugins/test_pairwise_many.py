"""``Distance.pairwise_many`` (what TRM calls for many items) equals ``pairwise(pool, pool)``
of each pool: the generic loop, and the n-gram family's batched form across batch bounds."""

from __future__ import annotations

import capmetrics
import numpy as np
import pytest
from capmetrics.plugins.ngram import counts

POOLS = [
    ["a dog runs", "a dog is running", "dogs run fast"],
    ["two cats", "a cat sleeps on a mat"],
    ["a man rides a horse", "a horse", "someone riding", "a man on a horse"],
]


@pytest.mark.parametrize("spec", ["bleu-4", "rouge-l", "bleu-2"])
def test_the_batched_form_equals_pairwise_of_each_pool(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    distance = capmetrics.compose(spec)
    assert isinstance(distance, counts.BatchDistance) and distance.pairwise_on_workers
    want = [distance.pairwise(pool, pool) for pool in POOLS]
    monkeypatch.setattr(counts, "POOLS_PER_BATCH", 2)  # three pools: two batches
    got = distance.pairwise_many(POOLS)
    assert [g.shape for g in got] == [(3, 3), (2, 2), (4, 4)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)


def test_the_generic_form_is_pairwise_of_each_pool() -> None:
    class Length(capmetrics.Distance):
        name = "length-gap"
        higher_is_better = False

        def score(self, candidates, references):  # type: ignore[no-untyped-def]
            values = [
                abs(len(c.split()) - len(r[0].split())) for c, r in zip(candidates, references)
            ]
            return capmetrics.Scores(np.array(values, dtype=float), float(np.mean(values)))

    got = Length().pairwise_many([["a b", "a b c d"], ["x"]])
    assert not Length.pairwise_on_workers
    assert [g.tolist() for g in got] == [[[0.0, 2.0], [2.0, 0.0]], [[0.0]]]
