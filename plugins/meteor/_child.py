"""METEOR's one-time steps in a child process (``main(["tables"|"aligner", <cache root>])``).

Building the resource tables and compiling the aligner each hold a few hundred MB (the table's
arrays; numba and LLVM) that a scoring process should not keep for the rest of its life: a child
builds into the cache and exits, and the parent memory-maps or imports the result. The child
inherits stderr, so its one-line announcement and progress bar reach the user's terminal. A child
that cannot run or fails leaves the cache as it was; the caller then does the step itself (so a
first use never depends on starting a process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from capmetrics.allocator import return_freed_memory

STEPS = ("tables", "aligner")


def run_child(step: str, root: Path) -> bool:
    """Run ``step`` for the cache root ``root`` in a child Python; whether it succeeded."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:
        code = f"import sys; from {__name__} import main; sys.exit(main(sys.argv[1:]))"
        done = subprocess.run([sys.executable, "-c", code, step, str(root)], env=env, check=False,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    except OSError:
        return False
    return done.returncode == 0


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in STEPS:
        print(f"usage: main([{'|'.join(STEPS)}, <cache root>])", file=sys.stderr)
        return 2
    step, root = argv[0], Path(argv[1])
    return_freed_memory()
    try:
        if step == "tables":
            from capmetrics.plugins.meteor._resources import build_tables

            build_tables(root)
        else:
            from capmetrics.plugins.meteor._compiled import build_or_mark

            build_or_mark(root)
    except Exception:  # noqa: BLE001 - the parent does the step itself and reports what stops it
        return 1
    return 0
