"""A SPICE parser that stays running between runs (``capmetrics spice-server start``).

Every run that parses new captions otherwise starts a JVM: 2.6-2.8 s to load CoreNLP, then a
parse at the speed of a JVM that has not compiled its hot code yet (~1.7x slower per caption for
the first few hundred). ``start`` runs ``CapmetricsSpiceParse --serve`` detached: it listens on
127.0.0.1 at a free port and writes ``parser-server.json`` (port, a random token, pid, parser
version; created 0600) into SPICE's cache folder (0700), and exits after ``idle`` seconds without
a client, deleting the file. While it runs, ``spice`` sends its new captions there and falls back
to its own JVMs for whatever the server did not answer (not running, another parser version, a
dropped connection, an answer of the wrong shape).

Trust goes both ways (the protocol is in the Java source's ``serve``): client and server each
prove that they know the token with an HMAC-SHA256 of the other's random nonce, so the token is
never sent, and captions go only to a server that has proven itself. A stale address file whose
port another program now holds gives a one-line warning and the run parses on its own; every
answer line is checked (a caption index of the request, each once, tuples of 1-3 strings) before
it is stored. The server reads at most 256 bytes from a client before it has authenticated, drops
one that takes more than 10 s to do so, serves clients concurrently and caps a request at 64 MiB.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from capmetrics.errors import MetricError
from capmetrics.io.digests import files_digest
from capmetrics.plugins.java import java_env
from capmetrics.plugins.spice._parse import CHUNK, JVM_OPTIONS, helper_command, helper_dir
from capmetrics.plugins.spice._parse_cache import Parse, valid_parse
from capmetrics.plugins.spice._resources import cache_root, private_cache_root, warn

#: Seconds without a client after which a server exits.
IDLE_SECONDS = 3600
#: Seconds to wait for a starting server to write its address.
START_TIMEOUT = 180.0
#: Longest protocol line read (the handshake, PING's and STOP's answers).
HEADER_BYTES = 256


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
    folder = helper_dir()
    digest = files_digest(sorted(folder.glob("*.class")), folder, b"\0")
    return f"{parser_version}:helper-{digest[:16]}"


def read_info() -> ServerInfo | None:
    """The address file's contents, or None (absent or unreadable)."""
    try:
        data = json.loads(info_path().read_text(encoding="utf-8"))
        return ServerInfo(
            int(data["port"]), str(data["token"]), int(data["pid"]), str(data["version"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Impostor(ServerError):
    """The program on the address file's port did not prove that it knows the token."""


def _mac(token: str, side: str, first: str, second: str) -> str:
    return hmac.new(token.encode(), f"{side}:{first}:{second}".encode(), hashlib.sha256).hexdigest()


def _connect(info: ServerInfo, request: str, timeout: float) -> tuple[socket.socket, BinaryIO]:
    """A connection on which the server has proven that it knows the token, and the client too,
    with ``request`` (a line; ``PARSE <n>`` is followed by its body by the caller) sent.

    Raises:
        OSError: the port could not be reached or the connection broke.
        Impostor: the program there did not prove that it knows the token.
    """
    connection = socket.create_connection(("127.0.0.1", info.port), timeout=timeout)
    try:
        lines = connection.makefile("rb")
        nonce = secrets.token_hex(16)
        connection.sendall(f"HELLO {nonce}\n".encode())
        answer = lines.readline(HEADER_BYTES).decode("ascii", "replace").split()
        if (
            len(answer) != 2
            or not re.fullmatch("[0-9a-f]{32,64}", answer[0])
            or not hmac.compare_digest(answer[1], _mac(info.token, "server", nonce, answer[0]))
        ):
            raise Impostor(
                f"spice: the program on 127.0.0.1:{info.port} (named in {info_path()}) did not "
                "prove that it is the parser server (a stale address file?); nothing was sent to it"
            )
        connection.sendall(f"{_mac(info.token, 'client', answer[0], nonce)}\n{request}\n".encode())
    except BaseException:
        connection.close()
        raise
    return connection, lines


def ping(info: ServerInfo, timeout: float = 2.0) -> bool:
    """Whether the server proves itself and runs the version it wrote.

    Raises:
        Impostor: something else answers on its port.
    """
    try:
        connection, lines = _connect(info, "PING", timeout)
        with connection, lines:
            return json.loads(lines.readline(HEADER_BYTES) or b"{}").get("version") == info.version
    except Impostor:
        raise
    except (OSError, ValueError, AttributeError):
        return False


def running(version: str) -> ServerInfo | None:
    """The running server of parser ``version`` (see :func:`server_version`), else None."""
    info = read_info()
    if info is None or info.version != version:
        return None
    try:
        return info if ping(info) else None
    except Impostor as err:
        warn(f"{err}; this run parses with its own JVMs")
        return None


def start(
    java: str,
    corenlp_jars: Sequence[Path],
    memory: str,
    threads: int,
    version: str,
    idle: int = IDLE_SECONDS,
) -> ServerInfo:
    """Start a detached server (or return the running one); its messages go to
    ``parser-server.log`` next to the address file.

    Raises:
        ServerError: the JVM exited or wrote no address within :data:`START_TIMEOUT` seconds.
    """
    found = running(version)
    if found is not None:
        return found
    folder = private_cache_root()
    cmd = helper_command(
        java,
        corenlp_jars,
        memory,
        ["--serve", str(info_path()), str(threads), str(idle), version],
        options=JVM_OPTIONS,
    )
    log_path = folder / "parser-server.log"
    with os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as log:
        os.chmod(log_path, 0o600)  # an older log made wider
        proc = subprocess.Popen(
            cmd,
            cwd=folder,
            env=java_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        info = read_info()
        if info is not None and info.pid == proc.pid:
            return info
        if proc.poll() is not None:
            tail = (
                (folder / "parser-server.log")
                .read_text("utf-8", "replace")
                .strip()
                .splitlines()[-3:]
            )
            raise ServerError(
                f"spice: the parser server exited with code {proc.returncode}: {' | '.join(tail)}"
            )
        time.sleep(0.1)
    proc.kill()
    raise ServerError(f"spice: the parser server wrote no address within {START_TIMEOUT:g} s")


def stop() -> bool:
    """Ask the running server to exit; False when none answered."""
    info = read_info()
    if info is None:
        return False
    try:
        connection, lines = _connect(info, "STOP", 5.0)
        with connection, lines:
            stopped = b"stopped" in lines.readline(HEADER_BYTES)
    except (OSError, Impostor):
        stopped = False
    if not stopped:  # a stale file: no server behind it
        info_path().unlink(missing_ok=True)
    return stopped


def parse(
    info: ServerInfo,
    texts: Sequence[str],
    store: Callable[[dict[str, Parse]], None],
    timeout: float,
) -> dict[str, Parse]:
    """Parse ``texts`` on the server; ``store`` gets every chunk of :data:`CHUNK` checked parses as
    it comes. Returns what was parsed, which is all of ``texts`` unless the connection failed or
    an answer was malformed part way (then the caller parses the rest itself).

    Raises:
        ServerError: the server could not be reached, or did not prove itself (:class:`Impostor`).
    """
    body = json.dumps(list(texts), ensure_ascii=False).encode("utf-8")
    try:
        connection, lines = _connect(info, f"PARSE {len(body)}", 5.0)
    except OSError as err:
        raise ServerError(
            f"spice: cannot reach the parser server on port {info.port}: {err}"
        ) from None
    try:
        connection.sendall(body)
    except OSError as err:
        lines.close()
        connection.close()
        raise ServerError(
            f"spice: the parser server on port {info.port} dropped the request: {err}"
        ) from None
    found: dict[str, Parse] = {}
    chunk: dict[str, Parse] = {}
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        with connection, lines:
            connection.settimeout(max(1.0, deadline - time.monotonic()))
            for raw in lines:
                entry = answer_line(raw, texts, seen)
                if entry is None:
                    if _done(raw) != len(texts) or len(seen) != len(texts):
                        warn(
                            "spice: the parser server's answer broke off or is malformed after "
                            f"{len(seen)} of {len(texts)} captions; this run parses the rest itself"
                        )
                    break
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


def answer_line(raw: bytes, texts: Sequence[str], seen: set[int]) -> tuple[str, Parse] | None:
    """A server's answer line as (caption, tuples) when it has exactly the expected shape, an
    index of ``texts`` not ``seen`` before and tuples of 1-3 strings; else None."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or set(entry) != {"i", "t"}:
        return None
    index = entry["i"]
    if (
        type(index) is not int
        or not 0 <= index < len(texts)
        or index in seen
        or not valid_parse(entry["t"])
    ):
        return None
    seen.add(index)
    return texts[index], entry["t"]


def _done(raw: bytes) -> int | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    return entry.get("done") if isinstance(entry, dict) and set(entry) == {"done"} else None
