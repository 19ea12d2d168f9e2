"""Fixed start-up cost of BERTScore's encoder, transformers path vs light path (issue 40).

Each round runs a fresh process per backend with an empty cache root; the child prints the
wall and CPU seconds from interpreter start (imports included) until the bundled MiniLM's
encoder has embedded one text, and whether transformers was imported. Usage:

    .venv/bin/python experiments/bertscore_light_startup.py [rounds]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from capmetrics.plugins.bertscore._encoder import shared_encoder
enc = shared_encoder(None, None)
enc.embed(["a dog runs on the grass"])
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "backend": enc.backend[0], "transformers": "transformers" in sys.modules}))
"""


def main(rounds: int) -> None:
    for r in range(rounds):
        for backend in ("transformers", "light"):
            env = {k: v for k, v in os.environ.items() if k != "CAPMETRICS_BERTSCORE_BACKEND"}
            if backend == "transformers":
                env["CAPMETRICS_BERTSCORE_BACKEND"] = "transformers"
            with tempfile.TemporaryDirectory() as cache:
                env["CAPMETRICS_CACHE_DIR"] = cache
                out = subprocess.run(
                    [sys.executable, "-c", CHILD],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            print(f"round {r + 1} {backend:12s} {json.loads(out.splitlines()[-1])}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
