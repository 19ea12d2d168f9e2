"""capmetrics.integrations.torchmetrics under DDP: ``CocoCaptionMetrics.compute`` (BLEU-1..4,
METEOR, ROUGE-L, CIDEr-D) on 20,000 Flickr8k items (each image's caption j as the candidate, its
other four as the references), one rank against two (torch.distributed gloo, CPU processes, one
thread each), in one run. Each rank holds its DistributedSampler shard; the timed ``compute`` scores
the shard and combines the statistics. Printed: the slowest rank's compute time, the speed-up, the
bytes each rank received, and that the values are those of one rank. Each process first computes a
50-item warm-up (METEOR loads its tables once per process), as a training run's later validations
would find. The CPU time of each rank's compute is printed too: where other work keeps the cores
busy the wall-clock ratio says little, and 1-rank CPU / slowest rank's CPU is the speed-up when each
rank has a core to itself. Target (issue 29): 2 ranks >= 1.6x one rank on a 2-core machine.

Run: ``python benchmarks/bench_ddp.py [--items 20000] [--ranks 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k"


def items(data: Path, n: int) -> tuple[list[str], list[list[str]]]:
    from capmetrics.data.flickr8k import load_captions

    _, by_image = load_captions(data)
    pairs = [(k, j) for j in range(5) for k in sorted(by_image) if len(by_image[k]) == 5][:n]
    return [by_image[k][j] for k, j in pairs], [
        by_image[k][:j] + by_image[k][j + 1 :] for k, j in pairs
    ]


def worker(rank: int, world: int, port: int, data: str, n: int, out: str) -> None:
    import threadpoolctl
    import torch
    import torch.distributed as dist
    from capmetrics.integrations.torchmetrics import CocoCaptionMetrics
    from torch.utils.data import DistributedSampler

    torch.set_num_threads(1)
    threadpoolctl.threadpool_limits(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    cands, refs = items(Path(data), n)
    metric = CocoCaptionMetrics()
    warm = list(range(rank, 50, world))
    metric.update([cands[k] for k in warm], [refs[k] for k in warm], ids=warm)
    metric.compute()
    metric.reset()
    shard = list(
        DistributedSampler(range(len(cands)), num_replicas=world, rank=rank, shuffle=False)
    )
    for start in range(0, len(shard), 64):
        batch = shard[start : start + 64]
        metric.update([cands[k] for k in batch], [refs[k] for k in batch], ids=batch)
    dist.barrier()
    start_time, start_cpu = time.perf_counter(), time.process_time()
    values = metric.compute()
    seconds, cpu = time.perf_counter() - start_time, time.process_time() - start_cpu
    Path(out, f"{world}-{rank}.json").write_text(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "bytes": metric.gathered_bytes,
                "values": {k: float(v) for k, v in values.items()},
            }
        )
    )
    dist.destroy_process_group()


def run(world: int, data: Path, n: int, out: str) -> list[dict]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(world, port, str(data), n, out), nprocs=world, join=True)
    return [json.loads(Path(out, f"{world}-{r}.json").read_text()) for r in range(world)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("CAPMETRICS_FLICKR8K", DEFAULT))
    )
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f} (1-min average), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as out:
        one = run(1, args.data, args.items, out)
        many = run(args.ranks, args.data, args.items, out)
    t1, tn = one[0]["seconds"], max(r["seconds"] for r in many)
    print(f"CocoCaptionMetrics.compute, {args.items} items")
    print(f"1 rank : {t1:6.2f} s")
    print(
        f"{args.ranks} ranks: {tn:6.2f} s (slowest rank; ranks: "
        + ", ".join(f"{r['seconds']:.2f}" for r in many)
        + f")  speed-up {t1 / tn:.2f}x  (target >= 1.6x for 2)"
    )
    c1, cn = one[0]["cpu"], max(r["cpu"] for r in many)
    print(
        f"CPU time: 1 rank {c1:.2f} s; {args.ranks} ranks "
        + ", ".join(f"{r['cpu']:.2f}" for r in many)
        + f" s: {c1 / cn:.2f}x less per rank (the speed-up when each rank has a free core)"
    )
    print(
        "received per rank: "
        + ", ".join(f"{r['bytes'] / 1e6:.2f} MB" for r in many)
        + " (ids, item values, df keys and counts, summed statistics; no strings)"
    )
    same = all(r["values"] == one[0]["values"] for r in many)
    print(
        "values equal to one rank: "
        + (
            "yes, every metric to the bit"
            if same
            else f"NO: {many[0]['values']} vs {one[0]['values']}"
        )
    )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
