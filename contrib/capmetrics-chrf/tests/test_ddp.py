"""chrF under DDP through capmetrics' torchmetrics integration: two gloo ranks on CPU each score
their shard, exchange only summed statistics (the statistics protocol), and every rank gets the
corpus chrF of one process over everything, to the bit."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

pytest.importorskip("torchmetrics")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from capmetrics.testing import default_dataset  # noqa: E402
from capmetrics_chrf import ChrF  # noqa: E402

SPECS = ["chrf", "chrf(word_order=2)"]


def _pairs() -> tuple[list[str], list[list[str]]]:
    cands, refs, _ = default_dataset(20).flat_pairs()
    return cands, [list(r) for r in refs]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, out: str) -> None:
    from capmetrics.integrations.torchmetrics import CaptionMetric
    from capmetrics.registry import get_registry, register_plugin

    if "chrf" not in get_registry().names("distance"):  # a source checkout: no entry point
        import capmetrics_chrf

        register_plugin(capmetrics_chrf, "chrf")
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        cands, refs = _pairs()
        mine = list(range(rank, len(cands), world))  # interleaved shards of unequal sizes
        metric = CaptionMetric(SPECS)
        for start in range(0, len(mine), 8):
            batch = mine[start : start + 8]
            metric.update([cands[k] for k in batch], [refs[k] for k in batch], ids=batch)
        values = {spec: float(v) for spec, v in metric.compute().items()}
        Path(out, f"rank{rank}.json").write_text(json.dumps(values))
    finally:
        dist.destroy_process_group()


def test_two_ranks_give_the_corpus_chrf_of_one_process(tmp_path: Path) -> None:
    mp.spawn(_rank, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    cands, refs = _pairs()
    expected = {
        "chrf": ChrF().score(cands, refs).corpus,
        "chrf(word_order=2)": ChrF(word_order=2).score(cands, refs).corpus,
    }
    assert ranks == [expected, expected]
