"""A SPICE parser that stays running between runs (``capmetrics spice-server start``).

Every run that parses new captions otherwise starts a JVM: 2.6-2.8 s to load CoreNLP, then a
parse at the speed of a JVM that has not compiled its hot code yet (~1.7x slower per caption for
the first few hundred). ``start`` runs ``CapmetricsSpiceParse --serve`` detached: it listens on
127.0.0.1 at a free port and writes ``parser-server.json`` (port, a random token, pid, parser
version; owner-readable) into SPICE's cache folder, and exits after ``idle`` seconds without a
client, deleting the file. While it runs, ``spice`` sends its new captions there (one client at
a time; the tuples are the same lines the per-run JVMs write) and falls back to its own JVMs for
whatever the server did not answer (not running, another parser version, a dropped connection).
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from capmetrics.errors import MetricError
from capmetrics.plugins.java import java_env
from capmetrics.plugins.spice._parse import CHUNK, helper_command, helper_dir, read_line
from capmetrics.plugins.spice._parse_cache import Parse
from capmetrics.plugins.spice._resources import cache_root

#: Seconds without a client after which a server exits.
IDLE_SECONDS = 3600
#: Seconds to wait for a starting server to write its address.
START_TIMEOUT = 180.0


class ServerError(MetricError):
    """The parser server could not be reached or stopped answering."""


@dataclass(frozen=True)
class ServerInfo:
    """Where a running server listens, and which parser it runs."""

    port: int
    token: str
    pid: int
    version: str


def info_path() -> Path:
    """``parser-server.json`` in SPICE's cache folder."""
    return cache_root() / "parser-server.json"


def server_version(parser_version: str) -> str:
    """The parser version plus the helper classes' checksum: a server is used only by runs of the
    same parser and helper."""
    digest = hashlib.sha256()
    for path in sorted(helper_dir().glob("*.class")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{parser_version}:helper-{digest.hexdigest()[:16]}"


def read_info() -> ServerInfo | None:
    """The address file's contents, or None (absent or unreadable)."""
    try:
        data = json.loads(info_path().read_text(encoding="utf-8"))
        return ServerInfo(int(data["port"]), str(data["token"]), int(data["pid"]), str(data["version"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _connect(info: ServerInfo, request: str, timeout: float) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", info.port), timeout=timeout)
    connection.sendall(f"{info.token}\n{request}\n".encode())
    return connection


def ping(info: ServerInfo, timeout: float = 2.0) -> bool:
    """Whether the server answers (and runs the version it wrote)."""
    try:
        with _connect(info, "PING", timeout) as connection, connection.makefile("rb") as lines:
            return json.loads(lines.readline() or b"{}").get("version") == info.version
    except (OSError, ValueError):
        return False


def running(version: str) -> ServerInfo | None:
    """The running server of parser ``version`` (see :func:`server_version`), else None."""
    info = read_info()
    return info if info is not None and info.version == version and ping(info) else None


def start(java: str, corenlp_jars: Sequence[Path], memory: str, threads: int, version: str,
          idle: int = IDLE_SECONDS) -> ServerInfo:
    """Start a detached server (or return the running one); its messages go to
    ``parser-server.log`` next to the address file.

    Raises:
        ServerError: the JVM exited or wrote no address within :data:`START_TIMEOUT` seconds.
    """
    found = running(version)
    if found is not None:
        return found
    folder = cache_root()
    folder.mkdir(parents=True, exist_ok=True)
    cmd = helper_command(java, corenlp_jars, memory, ["--serve", str(info_path()), str(threads), str(idle), version])
    with open(folder / "parser-server.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=folder, env=java_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        info = read_info()
        if info is not None and info.pid == proc.pid:
            return info
        if proc.poll() is not None:
            tail = (folder / "parser-server.log").read_text("utf-8", "replace").strip().splitlines()[-3:]
            raise ServerError(f"spice: the parser server exited with code {proc.returncode}: {' | '.join(tail)}")
        time.sleep(0.1)
    proc.kill()
    raise ServerError(f"spice: the parser server wrote no address within {START_TIMEOUT:g} s")


def stop() -> bool:
    """Ask the running server to exit; False when none answered."""
    info = read_info()
    if info is None:
        return False
    try:
        with _connect(info, "STOP", 5.0) as connection, connection.makefile("rb") as lines:
            stopped = b"stopped" in lines.readline()
    except OSError:
        stopped = False
    if not stopped:  # a stale file: no server behind it
        info_path().unlink(missing_ok=True)
    return stopped


def parse(info: ServerInfo, texts: Sequence[str], store: Callable[[dict[str, Parse]], None],
          timeout: float) -> dict[str, Parse]:
    """Parse ``texts`` on the server; ``store`` gets every chunk of :data:`CHUNK` parses as it
    comes. Returns what was parsed, which is all of ``texts`` unless the connection failed part
    way (then the caller parses the rest itself).

    Raises:
        ServerError: the server could not be reached at all.
    """
    try:
        connection = _connect(info, json.dumps(list(texts)), 5.0)
    except OSError as err:
        raise ServerError(f"spice: cannot reach the parser server on port {info.port}: {err}") from None
    found: dict[str, Parse] = {}
    chunk: dict[str, Parse] = {}
    deadline = time.monotonic() + timeout
    try:
        with connection, connection.makefile("rb") as lines:
            connection.settimeout(max(1.0, deadline - time.monotonic()))
            for raw in lines:
                entry = read_line(raw, texts)
                if entry is None:
                    break  # {"done": n} or a broken line
                chunk[entry[0]] = entry[1]
                if len(chunk) == CHUNK:
                    store(chunk)
                    found.update(chunk)
                    chunk = {}
    except OSError:
        pass  # a dropped connection or a timeout: what came back is kept
    if chunk:
        store(chunk)
        found.update(chunk)
    return found

