"""capmetrics.integrations.torchmetrics under DDP: torch.distributed's gloo backend, 2 and 4 CPU
processes (torch.multiprocessing spawn), DistributedSampler shards of an uneven set (its padding
repeats samples on the last ranks; one rank also sees an item twice), strings and token ids: the
values equal one process over the set (capmetrics.score), to the bit."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torchmetrics")

import capmetrics  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from capmetrics.integrations.torchmetrics import COCO_METRICS  # noqa: E402

from tests.plugins.coco_reference import FLICKR8K, needs_flickr8k  # noqa: E402

N_ITEMS = 103  # uneven for 2 and 4 ranks


def flickr8k_items(n: int = N_ITEMS) -> tuple[list[str], list[list[str]]]:
    """Real captions: each image's first caption as the candidate, the other four as references."""
    from capmetrics.data.flickr8k import load_captions

    _, by_image = load_captions(FLICKR8K)
    names = sorted(by_image)[:n]
    return [by_image[k][0] for k in names], [by_image[k][1:] for k in names]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, specs: list[str], mode: str, out: str) -> None:
    from capmetrics.errors import MetricError
    from capmetrics.integrations.torchmetrics import BERTScoreMetric, CaptionMetric
    from torch.utils.data import DistributedSampler

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        if mode == "idle":  # rank 1 never calls update; rank 0 without ids, then with them
            cands, refs = flickr8k_items(20)
            found = {}
            for variant in ("idle", "idle-ids"):  # one process group for both (one spawn)
                metric = CaptionMetric(specs)
                if rank == 0:
                    metric.update(
                        cands[:12],
                        refs[:12],
                        **({"ids": list(range(12))} if variant == "idle-ids" else {}),
                    )
                    metric.update(
                        cands[12:],
                        refs[12:],
                        **({"ids": list(range(12, 20))} if variant == "idle-ids" else {}),
                    )
                found[variant] = {s: float(v) for s, v in metric.compute().items()}
            Path(out, f"rank{rank}.json").write_text(json.dumps(found))
            return
        cands, refs = flickr8k_items(25 if mode == "bertscore" else N_ITEMS + 1)
        extra = (cands.pop(), refs.pop()) if mode != "bertscore" else None  # added after a compute
        indices = list(
            DistributedSampler(range(len(cands)), num_replicas=world, rank=rank, shuffle=False)
        )
        if rank == 0:
            indices.append(indices[0])  # an item this rank sees twice
        if mode == "ids":  # the model's token ids and a vocabulary (end id 0)
            words = ["<end>"] + sorted(
                {w for t in cands + [r for rs in refs for r in rs] for w in t.split()}
            )
            index = {w: i for i, w in enumerate(words)}
            metric = CaptionMetric(specs, vocab=words, end_id=0)
            for start in range(0, len(indices), 8):
                batch = indices[start : start + 8]
                ids = torch.zeros((len(batch), 40), dtype=torch.int64)
                for row, k in enumerate(batch):
                    ids[row, : len(cands[k].split())] = torch.tensor(
                        [index[w] for w in cands[k].split()]
                    )
                metric.update(ids, [refs[k] for k in batch], ids=torch.tensor(batch))
        elif mode == "bertscore":
            metric = BERTScoreMetric(specs[0]) if len(specs) == 1 else CaptionMetric(specs)
            for start in range(0, len(indices), 8):
                batch = indices[start : start + 8]
                metric.update([cands[k] for k in batch], [refs[k] for k in batch], ids=batch)
        else:
            metric = CaptionMetric(specs)
            for start in range(0, len(indices), 8):
                batch = indices[start : start + 8]
                metric.update([cands[k] for k in batch], [refs[k] for k in batch], ids=batch)
        try:
            values = metric.compute()
        except MetricError as err:
            values = {"error": str(err)}
        if not isinstance(values, dict):
            values = {specs[0]: values}
        result: dict = {
            "values": {k: v if isinstance(v, str) else float(v) for k, v in values.items()},
            "bytes": metric.gathered_bytes,
        }
        if (
            mode == "strings"
        ):  # update after compute adds (one rank a new item, the other one it had)
            assert extra is not None
            if rank == world - 1:
                metric.update([extra[0]], [extra[1]], ids=[N_ITEMS])
            else:
                metric.update(cands[:1], refs[:1], ids=[0])
            result["after"] = {k: float(v) for k, v in metric.compute().items()}
            other = CaptionMetric(["cider-d", "bleu-4"] if rank == 0 else ["bleu-4", "cider-d"])
            other.update(cands[rank : rank + 1], refs[rank : rank + 1], ids=[rank])
            try:
                other.compute()
            except MetricError as err:
                result["mismatch"] = str(err)
        if mode == "ids":  # 3 items: the last rank holds only the sampler's padding (item 0 again)
            tiny = CaptionMetric(specs)
            mine = list(DistributedSampler(range(3), num_replicas=world, rank=rank, shuffle=False))
            tiny.update([cands[k] for k in mine], [refs[k] for k in mine], ids=mine)
            result["tiny"] = {k: float(v) for k, v in tiny.compute().items()}
        Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def run_ddp(world: int, specs: list[str], mode: str, tmp_path: Path) -> list[dict]:
    mp.spawn(
        _worker, args=(world, _free_port(), specs, mode, str(tmp_path)), nprocs=world, join=True
    )
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def one_process() -> dict[str, float]:
    cands, refs = flickr8k_items()
    results = capmetrics.score(candidates=cands, references=refs, metrics=list(COCO_METRICS))
    return {s: results[s].corpus for s in COCO_METRICS}


@needs_flickr8k
def test_two_ranks_coco_set_equal_one_process(
    tmp_path: Path, one_process: dict[str, float]
) -> None:
    """Also: update after compute, and ranks with different specs, refused with one line."""
    ranks = run_ddp(2, list(COCO_METRICS), "strings", tmp_path)
    cands, refs = flickr8k_items(N_ITEMS + 1)
    more = capmetrics.score(candidates=cands, references=refs, metrics=list(COCO_METRICS))
    for r in ranks:
        assert r["values"] == one_process  # every rank, every metric, to the bit
        assert r["after"] == {
            s: more[s].corpus for s in COCO_METRICS
        }  # update after compute: added
        assert (
            "ranks have different metric specs: rank 0: ['cider-d', 'bleu-4']; "
            "rank 1: ['bleu-4', 'cider-d']" in r["mismatch"]
        )
    # statistics, not strings: ids, values, word digests, the compressed df
    assert 0 < ranks[0]["bytes"] < 100_000


@pytest.mark.slow(
    full=True,
    reason=(
        "four gloo ranks over Flickr8k (~22 s); two ranks, uneven shards and an idle rank run"
        " in CI in this file"
    ),
)
@needs_flickr8k
def test_four_ranks_token_ids_equal_one_process(
    tmp_path: Path, one_process: dict[str, float]
) -> None:
    """Also: 3 items on 4 ranks, the last rank holding only the sampler's padding (scoring
    nothing)."""
    specs = ["cider-d", "bleu-4", "rouge-l"]
    cands, refs = flickr8k_items(3)
    tiny = capmetrics.score(candidates=cands, references=refs, metrics=specs)
    for r in run_ddp(4, specs, "ids", tmp_path):
        assert r["values"] == {s: one_process[s] for s in specs}
        assert r["tiny"] == {s: tiny[s].corpus for s in specs}


@needs_flickr8k
def test_bertscore_embeds_each_rank_s_texts_and_sums_idf(tmp_path: Path) -> None:
    """BERTScore (the bundled MiniLM) on 2 ranks: idf from the summed token-id document counts of
    both ranks' references; float32 embeddings of other batches: equal within 1e-6."""
    pytest.importorskip("transformers")
    specs = ["bertscore", "bertscore(idf=true)"]
    cands, refs = flickr8k_items(25)
    results = capmetrics.score(candidates=cands, references=refs, metrics=specs)
    for r in run_ddp(2, specs, "bertscore", tmp_path):
        for s in specs:
            assert abs(r["values"][s] - results[s].corpus) < 1e-6
    # without the summed idf each rank's own references would weigh the tokens: far from it
    half = capmetrics.score(candidates=cands[::2], references=refs[::2], metrics=specs[1])[
        specs[1]
    ].item_values
    assert np.abs(half - results[specs[1]].item_values[::2]).max() > 1e-3


@pytest.mark.slow(
    full=True,
    reason=(
        "four gloo ranks of BERTScore (~20 s); two ranks with idf run in CI "
        "(test_bertscore_embeds_each_rank_s_texts_and_sums_idf) and parts to the bit in "
        "tests/plugins/test_bertscore.py"
    ),
)
@needs_flickr8k
def test_bertscore_on_4_ranks_is_one_process_to_the_bit(tmp_path: Path) -> None:
    """On the CPU BERTScore takes part through the statistics protocol alone and an item's
    value does not depend on the other texts or pairs of its rank: 4 ranks give the corpus
    value of one process to the bit, with and without idf."""
    pytest.importorskip("transformers")
    specs = ["bertscore", "bertscore(idf=true)"]
    cands, refs = flickr8k_items(25)
    results = capmetrics.score(candidates=cands, references=refs, metrics=specs)
    for r in run_ddp(4, specs, "bertscore", tmp_path):
        assert r["values"] == {s: results[s].corpus for s in specs}


@needs_flickr8k
def test_a_rank_that_never_updates_contributes_nothing(tmp_path: Path) -> None:
    """Rank 1 never calls update (rank 0 with ids or without, two metrics in one process
    group): no error on either rank, and the value of rank 0's items alone."""
    specs = ["cider-d", "bleu-4", "rouge-l", "meteor"]
    cands, refs = flickr8k_items(20)
    results = capmetrics.score(candidates=cands, references=refs, metrics=specs)
    want = {s: results[s].corpus for s in specs}
    for r in run_ddp(2, specs, "idle", tmp_path):
        assert r == {"idle": want, "idle-ids": want}


def test_gram_keys_are_stable_and_distinct() -> None:
    with pytest.deprecated_call(match="gram_keys is deprecated"):
        from capmetrics.integrations.torchmetrics import gram_keys

    grams = ["a", "a dog", "dog a", "a dog runs", "ä dog", "a  dog"]
    keys = gram_keys(grams)
    assert keys.dtype == np.int64 and len(set(keys.tolist())) == len(grams)
    assert gram_keys(["a dog"])[0] == np.int64(
        -4081912340589182210
    )  # the same in every process and run
