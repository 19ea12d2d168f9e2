"""Parsing captions into SPICE tuples with the jar's own parser, in shards over several JVMs.

``java/CapmetricsSpiceParse`` (capmetrics' own small class, built with ``javac --release 8``; its
source is next to it) runs ``edu.anu.spice.SpiceParser`` of pycocoevalcap's ``spice-1.0.jar``
(CoreNLP 3.6.0 + SPICE's dependency patterns) and writes each caption's tuples as one JSON line,
flushed after every chunk. It starts faster than the jar (CoreNLP without the ``ner`` annotator,
whose tags the parser never reads; no synonym tables): 2.8 s against 5.8 s, the same tuples
(``experiments/spice_parser_equivalence.py``). The captions are split over ``jobs`` JVMs run
side by side (by default chosen from the work: :func:`default_jobs`), each loading the parser
model once for its whole shard, with a :data:`HEAP` heap and ``cores / jobs`` CoreNLP threads. A
JVM that dies (killed, out of memory) keeps the chunks it finished; the rest of its shard is run
again on a fresh JVM (with :data:`RETRY_HEAP`), up to ``RETRIES`` times, so no caption is silently
missing. No JVM outlives the run (:data:`PARENT_PIPE`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from capmetrics.engine.progress import work
from capmetrics.errors import MetricError
from capmetrics.plugins.java import LOCALE_OPTIONS, java_env
from capmetrics.plugins.spice._jar import classpath
from capmetrics.plugins.spice._parse_cache import Parse, valid_parse
from capmetrics.plugins.spice._resources import java_options

HELPER_CLASS = "CapmetricsSpiceParse"
#: Makes the helper start the parser as the jar does (its constructor, CoreNLP with ``ner``), for
#: comparisons.
JAR_START = "-Dcapmetrics.spice.jar_pipeline=true"
#: Captions per chunk: what a killed JVM can lose, and the unit written at once.
CHUNK = 50
#: Makes the helper exit when its stdin (a pipe from this process) ends: no JVM outlives its parent.
PARENT_PIPE = "-Dcapmetrics.spice.parent_pipe=true"
#: How many times the unfinished part of a shard is run again on a fresh JVM.
RETRIES = 2
#: A parsing JVM's heap unless ``spice(memory=...)`` says otherwise: the parser model and a chunk's
#: annotations fit in well under 1 GB (peak RSS 640 MB with this heap on 400 Flickr8k captions,
#: against 2.6 GB with 8 GB, which only lets the heap grow before it is collected).
HEAP = "1G"
#: The heap of a JVM started again after one died (out of memory on a very long caption, say).
RETRY_HEAP = "4G"
#: The serial collector (no collector threads competing with the parser for 2 cores; 25-30 % less
#: wall time and RSS than G1 in the measurements of docs/metrics/spice.md), an exit on running out
#: of memory, so that the shard is run again with :data:`RETRY_HEAP` instead of hanging, and C2 (the
#: optimising JIT) only for methods ~10x hotter than its defaults: C2 compiling ~800 methods took 16
#: of a cold run's 69 CPU seconds, competing with the parse for the cores; with these thresholds a
#: cold run takes ~10 % less (1,690 and 4,992 Flickr8k captions, the same tuples).
JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=20000",
    "-XX:Tier4CompileThreshold=60000",
    "-XX:Tier4BackEdgeThreshold=400000",
)
#: Resident memory of a parsing JVM with :data:`HEAP`, for choosing how many run side by side.
JVM_BYTES = 1536 << 20
#: Captions a JVM should have before another one is worth its start (the parser model's load,
#: a JIT that has not compiled the parser yet, another heap): one JVM for a few thousand.
SHARD_CAPTIONS = 2000


def helper_dir() -> Path:
    """The folder holding ``CapmetricsSpiceParse.class`` (on the class path as a folder)."""
    return Path(__file__).with_name("java")


def helper_command(
    java: str,
    corenlp_jars: Sequence[Path],
    memory: str,
    args: Sequence[str],
    jar_start: bool = False,
    options: Sequence[str] = (),
) -> list[str]:
    """The java command line that runs the helper class with ``args`` (and JVM ``options``)."""
    cp = classpath(corenlp_jars, [helper_dir()])
    return [
        java,
        f"-Xmx{memory}",
        *java_options(java),
        *LOCALE_OPTIONS,
        *([JAR_START] if jar_start else []),
        *options,
        "-cp",
        cp,
        HELPER_CLASS,
        *args,
    ]


def parse_command(
    java: str,
    corenlp_jars: Sequence[Path],
    memory: str | None,
    threads: int,
    in_file: Path,
    out_file: Path,
    jar_start: bool = False,
) -> list[str]:
    """The java command line that parses the captions of ``in_file`` into ``out_file`` with a
    heap of ``memory`` (None: :data:`HEAP`); with ``jar_start`` the parser starts as the jar's own
    does (slower; the same tuples)."""
    return helper_command(
        java,
        corenlp_jars,
        memory or HEAP,
        [str(in_file), str(out_file), str(threads), str(CHUNK)],
        jar_start,
        [PARENT_PIPE, *JVM_OPTIONS],
    )


def default_jobs(n_captions: int) -> int:
    """JVMs to run side by side, from the work: one per :data:`SHARD_CAPTIONS` captions, at most
    one per two cores, as available memory allows."""
    cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = JVM_BYTES
    return max(1, min(cores // 2, memory // JVM_BYTES, -(-n_captions // SHARD_CAPTIONS)))


def read_line(line: str | bytes, texts: Sequence[str]) -> tuple[str, Parse] | None:
    """A helper's output line as (caption, tuples), or None (not a complete, valid tuple line)."""
    try:
        entry = json.loads(line)
        if valid_parse(entry["t"]) and int(entry["i"]) >= 0:
            return texts[int(entry["i"])], entry["t"]
    except (ValueError, KeyError, IndexError, TypeError):
        pass  # the unfinished last line of a killed JVM, or a server's {"done": n}
    return None


def read_lines(out_file: Path, texts: Sequence[str]) -> dict[str, Parse]:
    """The complete lines of a (possibly killed) helper's output, as caption -> tuples."""
    if not out_file.is_file():
        return {}
    found = (read_line(line, texts) for line in out_file.read_text(encoding="utf-8").split("\n"))
    return dict(entry for entry in found if entry is not None)


TEMP_PREFIX = "capmetrics-spice-"


def _kill(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill and reap every JVM of ``procs`` still running."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_folders(root: str | None = None) -> None:
    """Remove the temporary folders of parsing runs whose process is gone (killed by SIGKILL or
    a power cut before it could clean up): ``capmetrics-spice-<pid>-*`` of this user."""
    folder = Path(root or tempfile.gettempdir())
    for path in folder.glob(f"{TEMP_PREFIX}*-*"):
        pid = path.name[len(TEMP_PREFIX) :].split("-", 1)[0]
        try:
            if pid.isdigit() and not _alive(int(pid)) and path.stat().st_uid == os.getuid():
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _wait_counting(
    runs: Sequence[tuple[Path, subprocess.Popen[bytes]]],
    deadline: float,
    timeout: float,
    advance: Callable[[int], None],
    stop: threading.Event | None = None,
) -> None:
    """Wait for every JVM of ``runs`` (its output file, its process), telling ``advance`` how many
    lines (captions parsed) their output files gained, every quarter of a second."""
    offsets = [0] * len(runs)
    while True:
        running = False
        for k, (out_file, proc) in enumerate(runs):
            running |= proc.poll() is None
            try:
                with open(out_file, "rb") as out:
                    out.seek(offsets[k])
                    new = out.read()
            except OSError:  # not created yet
                continue
            offsets[k] += len(new)
            if new.count(b"\n"):
                advance(new.count(b"\n"))
        if not running:
            return
        if time.monotonic() > deadline:
            raise MetricError(f"spice: parsing did not finish within {timeout:g} s")
        if stop is not None and stop.is_set():
            raise MetricError("spice: parsing stopped (the run ended)")
        try:  # returns as soon as that JVM ends
            next(proc for _, proc in runs if proc.poll() is None).wait(timeout=0.25)
        except (subprocess.TimeoutExpired, StopIteration):
            pass


def parse_captions(
    texts: Sequence[str],
    command_for: Callable[[int, Path, Path], list[str]],
    jobs: int,
    timeout: float,
    store: Callable[[dict[str, Parse]], None],
    retry_command_for: Callable[[int, Path, Path], list[str]] | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Parse]:
    """Parse every caption of ``texts`` (distinct) over ``jobs`` JVMs; ``store`` gets each finished
    shard's parses at once. ``command_for(threads, in, out)`` builds a JVM's command, and
    ``retry_command_for`` (default: the same) the command of a JVM that runs again what a dead
    one left (e.g. with a larger heap). Once ``stop`` is set (checked every quarter of a second)
    the JVMs are killed and a MetricError raised.

    Every JVM gets a pipe as stdin that is closed when it ends or when this process dies (even by
    SIGKILL); the helper exits when it closes (see :data:`PARENT_PIPE`). On any exception
    (Ctrl-C, SIGTERM turned into one by the CLI, a timeout) every JVM is killed and reaped and
    the temporary folder removed before it propagates.

    Raises:
        MetricError: a JVM failed ``RETRIES + 1`` times (the message names the first caption left),
            or ran past ``timeout``.
    """
    jobs = max(1, min(jobs, len(texts)))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    pending = [list(texts[j::jobs]) for j in range(jobs)]
    done: dict[str, Parse] = {}
    failures: list[str] = []
    remove_stale_folders()
    procs: list[subprocess.Popen[bytes]] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp,
        ExitStack() as files,
        work(len(texts), "captions parsed") as advance,
    ):
        try:
            for attempt in range(RETRIES + 1):
                pending = [shard for shard in pending if shard]
                if not pending:
                    break
                runs = []
                for j, shard in enumerate(pending):
                    in_file, out_file = (
                        Path(tmp) / f"in-{attempt}-{j}.json",
                        Path(tmp) / f"out-{attempt}-{j}.jsonl",
                    )
                    in_file.write_text(json.dumps(shard), encoding="utf-8")
                    err = files.enter_context(open(Path(tmp) / f"err-{attempt}-{j}.txt", "w+b"))
                    try:
                        build = command_for if attempt == 0 else retry_command_for or command_for
                        proc = subprocess.Popen(
                            build(threads, in_file, out_file),
                            cwd=tmp,
                            env=java_env(),
                            stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL,
                            stderr=err,
                        )
                    except OSError as error:
                        raise MetricError(f"spice: cannot start java: {error}") from None
                    procs.append(proc)
                    runs.append((shard, out_file, proc, err))
                _wait_counting(
                    [(out_file, proc) for _, out_file, proc, _ in runs],
                    time.monotonic() + timeout,
                    timeout,
                    advance,
                    stop,
                )
                failures, left = [], []
                for shard, out_file, proc, err in runs:
                    parsed = read_lines(out_file, shard)
                    if parsed:
                        store(parsed)
                        done.update(parsed)
                    rest = [t for t in shard if t not in parsed]
                    if rest:
                        err.seek(0)
                        tail = err.read().decode("utf-8", "replace").strip().splitlines()[-6:]
                        failures.append(
                            f"exit code {proc.returncode}, first caption not parsed: {rest[0]!r}: "
                            + " | ".join(tail)
                        )
                        left.append(rest)
                pending = left
        finally:  # no JVM is left parsing into a deleted folder, whatever stopped this
            _kill(procs)
    if any(pending):
        raise MetricError(f"spice: the parser failed {RETRIES + 1} times: {failures[0]}")
    return done
