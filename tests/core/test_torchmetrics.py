"""capmetrics.integrations.torchmetrics in one process: the values of capmetrics.score on real
Flickr8k captions, strings and token ids, duplicates counted once, torchmetrics' conventions
(forward gives the batch value, update after compute adds, a single reference string), bad input
(DDP: test_torchmetrics_ddp)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torchmetrics")

import capmetrics  # noqa: E402
import torch  # noqa: E402
from capmetrics.errors import MetricError  # noqa: E402
from capmetrics.integrations.torchmetrics import (  # noqa: E402
    COCO_METRICS,
    BERTScoreMetric,
    CaptionMetric,
    CocoCaptionMetrics,
)
from torchmetrics import Metric  # noqa: E402

from tests.core.test_torchmetrics_ddp import flickr8k_items  # noqa: E402
from tests.plugins.coco_reference import needs_flickr8k  # noqa: E402

pytestmark = needs_flickr8k


@pytest.fixture(scope="module")
def items() -> tuple[list[str], list[list[str]]]:
    return flickr8k_items(60)


def test_coco_set_equals_score(items: tuple[list[str], list[list[str]]]) -> None:
    cands, refs = items
    metric = CocoCaptionMetrics()
    assert isinstance(metric, Metric)
    for start in range(0, 60, 16):  # batches, with ids
        metric.update(
            cands[start : start + 16],
            refs[start : start + 16],
            ids=torch.arange(start, min(start + 16, 60)),
        )
    metric.update(cands[:3], refs[:3], ids=[0, 1, 2])  # seen again: counted once
    values = metric.compute()
    expected = capmetrics.score(candidates=cands, references=refs, metrics=list(COCO_METRICS))
    assert set(values) == set(COCO_METRICS)
    for spec in COCO_METRICS:
        assert values[spec].dtype == torch.float64 and float(values[spec]) == expected[spec].corpus
    metric.reset()
    batch = metric(cands[:10], refs[:10])  # forward accumulates (no ids: nothing is deduplicated)
    metric.update(cands[10:], refs[10:])
    assert float(metric.compute()["cider-d"]) == expected["cider-d"].corpus
    first = capmetrics.score(
        candidates=cands[:10], references=refs[:10], metrics=list(COCO_METRICS)
    )
    assert {s: float(v) for s, v in batch.items()} == {s: first[s].corpus for s in COCO_METRICS}


def test_torchmetrics_conventions(items: tuple[list[str], list[list[str]]]) -> None:
    """forward returns the batch's value (as capmetrics.score on the batch) and adds the batch;
    update after compute goes on adding; a single reference string per item; ids repeated in a
    forward batch count once there too."""
    cands, refs = items
    metric = CaptionMetric(["cider-d", "bleu-4"])
    whole = capmetrics.score(candidates=cands, references=refs, metrics=["cider-d", "bleu-4"])
    half = capmetrics.score(
        candidates=cands[:30], references=refs[:30], metrics=["cider-d", "bleu-4"]
    )
    value = metric(cands[:30], refs[:30], ids=list(range(30)))
    assert {s: float(v) for s, v in value.items()} == {s: half[s].corpus for s in half}
    assert {s: float(v) for s, v in metric.compute().items()} == {s: half[s].corpus for s in half}
    metric.update(cands[30:], refs[30:], ids=list(range(30, 60)))  # after compute: adds
    assert {s: float(v) for s, v in metric.compute().items()} == {s: whole[s].corpus for s in whole}
    again = metric(
        cands[:3] + cands[:1], refs[:3] + refs[:1], ids=[0, 1, 2, 0]
    )  # seen: counted once
    three = capmetrics.score(
        candidates=cands[:3], references=refs[:3], metrics=["cider-d", "bleu-4"]
    )
    assert {s: float(v) for s, v in again.items()} == {s: three[s].corpus for s in three}
    assert {s: float(v) for s, v in metric.compute().items()} == {s: whole[s].corpus for s in whole}
    one_ref = CaptionMetric("bleu-4")
    single = one_ref(cands[:20], [r[0] for r in refs[:20]])  # one reference string per item
    listed = capmetrics.score(
        candidates=cands[:20], references=[[r[0]] for r in refs[:20]], metrics="bleu-4"
    )
    assert float(single) == float(one_ref.compute()) == listed["bleu-4"].corpus


def test_token_ids_and_a_vocabulary(items: tuple[list[str], list[list[str]]]) -> None:
    cands, refs = items
    words = ["<end>"] + sorted(
        {w for t in cands + [r for rs in refs for r in rs] for w in t.split()}
    )
    index = {w: i for i, w in enumerate(words)}
    as_ids = lambda t: [index[w] for w in t.split()] + [0, 0]  # noqa: E731
    metric = CaptionMetric("cider-d", vocab=words, end_id=0)
    metric.update([np.array(as_ids(c)) for c in cands], [[as_ids(r) for r in rs] for rs in refs])
    expected = capmetrics.score(candidates=cands, references=refs, metrics="cider-d")[
        "cider-d"
    ].corpus
    assert float(metric.compute()) == expected


def test_bad_input(items: tuple[list[str], list[list[str]]]) -> None:
    cands, refs = items
    metric = CaptionMetric("bleu-4")
    with pytest.raises(MetricError, match="3 candidates but 2 reference lists"):
        metric.update(cands[:3], refs[:2])
    with pytest.raises(MetricError, match="token ids; pass vocab="):
        metric.update(torch.ones((2, 3), dtype=torch.int64), refs[:2])
    with pytest.raises(MetricError, match="ids must be 2 integers"):
        metric.update(cands[:2], refs[:2], ids=[0.5, 1.5])
    with pytest.raises(MetricError, match="meteor-jar cannot be combined across ranks"):
        CaptionMetric("meteor-jar")
    with pytest.raises(MetricError, match="'cider-d' is not a bertscore spec"):
        BERTScoreMetric("cider-d")
    with pytest.raises(
        MetricError, match="floor=bert-score makes each value depend on the other pairs"
    ):
        BERTScoreMetric("bertscore(floor=bert-score)")
    metric.update(cands[:2], refs[:2], ids=[0, 1])
    mixed = CaptionMetric("bleu-4")
    mixed.update(cands[:1], refs[:1])
    with pytest.raises(MetricError, match="ids with every update or with none"):
        mixed.update(cands[1:2], refs[1:2], ids=[1])
    with pytest.raises(MetricError, match="ids with every update or with none"):
        metric.update(cands[2:3], refs[2:3])
    with pytest.raises(MetricError, match="vocab has no word for end_id 0"):
        CaptionMetric("bleu-4", vocab={1: "a", 2: "dog"}, end_id=0, keep_end=True)


def test_meteor_shards_sum_to_the_corpus_value(items: tuple[list[str], list[list[str]]]) -> None:
    """meteor's score_shard/corpus_from_sums, which CaptionMetric combines ranks with: the halves'
    summed fragment statistics give the whole set's corpus value (the jar's aggregate), to the
    bit."""
    cands, refs = items
    meteor = capmetrics.compose("meteor")
    whole = meteor.score(cands, refs)
    (first, sums_a), (second, sums_b) = (
        meteor.score_shard(cands[:25], refs[:25]),
        meteor.score_shard(cands[25:], refs[25:]),
    )
    assert np.array_equal(np.concatenate([first.values, second.values]), whole.values)
    assert meteor.corpus_from_sums(sums_a + sums_b) == whole.corpus != float(np.mean(whole.values))
