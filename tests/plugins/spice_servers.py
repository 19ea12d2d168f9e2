"""Stand-in SPICE parser servers for the client's tests: one that speaks the protocol and knows
the token (each word of a caption becomes a tuple; its answers can be made wrong), and an
impostor that accepts anything and answers ``[["thing"]]``."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import threading
from collections.abc import Callable
from typing import Any


def words(texts: list[str]) -> list[dict[str, Any]]:
    """The honest answer: every word of a caption is an object tuple."""
    return [{"i": i, "t": [[w] for w in t.split()]} for i, t in enumerate(texts)]


def serve(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """Listen on a free 127.0.0.1 port and hand each connection, one at a time, to ``handle``
    (closed after it) on a daemon thread; returns the listener (close it to stop) and the port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed
                return
            with conn:
                handle(conn)

    threading.Thread(target=loop, daemon=True).start()
    return listener, listener.getsockname()[1]


class FakeServer:
    """A parser server on 127.0.0.1 that knows ``token``; ``answer(texts)`` gives its answer lines
    (default :func:`words`), and ``done`` whether ``{"done": n}`` follows them."""

    def __init__(
        self,
        version: str,
        token: str = "secret",
        answer: Callable[[list[str]], list[Any]] = words,
        done: bool = True,
    ) -> None:
        self.version, self.token, self.answer, self.done = version, token, answer, done
        self.requests: list[list[str]] = []
        self.listener, self.port = serve(self._handle)

    def _mac(self, *parts: str) -> str:
        return hmac.new(self.token.encode(), ":".join(parts).encode(), hashlib.sha256).hexdigest()

    def _handle(self, conn: socket.socket) -> None:
        with conn.makefile("rwb") as f:
            hello = f.readline().decode().split()
            nonce = secrets.token_hex(16)
            f.write(f"{nonce} {self._mac('server', hello[1], nonce)}\n".encode())
            f.flush()
            if f.readline().decode().strip() != self._mac("client", nonce, hello[1]):
                return
            request = f.readline().strip().decode()
            if request == "PING":
                f.write(json.dumps({"version": self.version}).encode() + b"\n")
                return
            texts = json.loads(f.read(int(request.split()[1])))
            self.requests.append(texts)
            for line in self.answer(texts):
                f.write((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n")
            if self.done:
                f.write(json.dumps({"done": len(texts)}).encode() + b"\n")

    def register(self, version: str | None = None, token: str | None = None) -> None:
        """Write ``parser-server.json`` naming this server."""
        from capmetrics.plugins.spice import _server

        _server.info_path().parent.mkdir(parents=True, exist_ok=True)
        _server.info_path().write_text(
            json.dumps(
                {
                    "port": self.port,
                    "token": token or self.token,
                    "pid": os.getpid(),
                    "version": version or self.version,
                }
            )
        )


class Impostor:
    """Any program on a stale address file's port: accepts any token, answers every line with
    the version the client wants and ``[["thing"]]`` tuples, and records what it was sent."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.received = b""
        self.listener, self.port = serve(self._handle)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        answer = (
            f"{'0' * 32} {'0' * 64}\n"
            + json.dumps({"version": self.version})
            + "\n"
            + "".join(json.dumps({"i": i, "t": [["thing"]]}) + "\n" for i in range(50))
        )
        try:
            conn.sendall(answer.encode())
            while chunk := conn.recv(65536):
                self.received += chunk
        except OSError:
            pass
