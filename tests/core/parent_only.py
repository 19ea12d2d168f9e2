"""An embedder and a distance that refuse to run anywhere but in the test's own process.

``PARENT_ENV`` holds the pid of the process that may use them (set by the test). Importing this
module in any other process fails, and so does calling the model there: a worker that got the
model (pickled, or inherited by fork) cannot use it without the test noticing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import numpy as np
from capmetrics import Distance, Embedder, Scores

PARENT_ENV = "CAPMETRICS_TEST_PARENT_PID"
_parent = os.environ.get(PARENT_ENV)
if _parent is not None and _parent != str(os.getpid()):
    raise ImportError(
        f"tests.core.parent_only imported in process {os.getpid()}, not the parent {_parent}"
    )

#: Texts embedded, with the pid that embedded them (the test checks where the model ran).
CALLS: list[tuple[int, int]] = []


def _check_parent() -> None:
    if os.environ.get(PARENT_ENV) != str(os.getpid()):
        raise RuntimeError(f"the model was used in process {os.getpid()}, not the parent")


def vector(text: str, dim: int = 6) -> np.ndarray:
    """A deterministic pseudo-embedding of ``text``."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).normal(size=dim).astype(np.float32)


class ParentOnlyEmbedder(Embedder):
    """Pseudo-embeddings; raises outside the parent process."""

    name = "parent-only-test"

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        _check_parent()
        CALLS.append((os.getpid(), len(texts)))
        return np.stack([vector(t) for t in texts]) if texts else np.zeros((0, 6), np.float32)


class ParentOnlyDistance(Distance):
    """Euclidean distance between pseudo-embeddings; raises outside the parent process."""

    name = "parent-only-distance-test"
    higher_is_better = False

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        _check_parent()
        v = np.array(
            [
                float(np.linalg.norm(vector(c) - vector(r[0])))
                for c, r in zip(candidates, references)
            ]
        )
        return Scores(v, float(v.mean()) if len(v) else 0.0)
