"""folder_digest of a model-sized folder: first call (every byte hashed) and second call (the
digest memo: a stat per file), wall time. Usage:

    python benchmarks/bench_model_digest.py [--gib 1.0] [--folder /tmp/capmetrics-digest-bench]

Makes the folder with random bytes (roberta-large's layout: one large weight file, a few JSON
files) unless it exists, and uses a private cache root so the user's memo is left alone. The
files are made at least ``RACY_NS`` before the first call so they can be remembered.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def make_folder(folder: Path, gib: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / "model.safetensors"
    if not weights.exists():
        with open(weights, "wb") as out:
            left = int(gib * (1 << 30))
            while left > 0:
                out.write(os.urandom(min(left, 64 << 20)))
                left -= 64 << 20
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json"):
        if not (folder / name).exists():
            (folder / name).write_bytes(os.urandom(200_000).hex().encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--folder", default="/tmp/capmetrics-digest-bench")
    args = parser.parse_args()
    folder = Path(args.folder)
    make_folder(folder, args.gib)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["CAPMETRICS_CACHE_DIR"] = cache
        from capmetrics.io import digests
        from capmetrics.io.models import folder_digest

        newest = max(max(s.st_mtime_ns, s.st_ctime_ns) for s in map(os.stat, folder.iterdir()))
        wait = (newest + digests.RACY_NS - time.time_ns()) / 1e9
        if wait > 0:
            time.sleep(wait + 0.1)
        size = sum(p.stat().st_size for p in folder.iterdir())
        for label in ("first (hashes every byte)", "second (memo hit)"):
            digests._loaded = (None, {})  # as a new process: the memo is read from disk
            start = time.perf_counter()
            digest = folder_digest(folder)
            wall = time.perf_counter() - start
            print(f"{label:28} {wall * 1000:10.1f} ms  {size / 2**30:.2f} GiB  {digest[:23]}")


if __name__ == "__main__":
    main()
