"""A real uvicorn server on a free loopback port in a background thread, and a tiny stdlib client.

Shared by tests/test_http.py, tests/test_web.py and bench/interfaces_http.py.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any

import uvicorn


def free_port() -> int:
    """A port nobody listens on right now (for servers started by other processes)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LiveServer:
    """``with LiveServer(app) as server: server.port`` — serves until the block ends."""

    def __init__(self, app: Any) -> None:
        # uvicorn binds port 0 itself (handing it a socket of ours made every request ~40 ms slower)
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            ws="none",
            http="h11",
            access_log=False,
            server_header=False,
            timeout_keep_alive=300,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class Reply:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    def __repr__(self) -> str:
        return f"<Reply {self.status} {self.raw[:300]!r}>"


class Client:
    """HTTP/1.1 keep-alive client for one server, optionally with one user's key."""

    def __init__(self, port: int, key: str | None = None, header: str = "bearer") -> None:
        self.port = port
        self.key = key
        self.header = header
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def headers(self) -> dict[str, str]:
        if self.key is None:
            return {}
        if self.header == "x-api-key":
            return {"X-API-Key": self.key}
        return {"Authorization": f"Bearer {self.key}"}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | Iterable[bytes] | None = None,
        headers: dict[str, str] | None = None,
        chunked: bool = False,
    ) -> Reply:
        sent = {**self.headers(), **(headers or {})}
        payload: Any = raw
        if body is not None:
            payload = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        elif raw is not None and not chunked:
            sent.setdefault("Content-Type", "application/json")
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=payload, headers=sent, encode_chunked=chunked)
                response = self.conn.getresponse()
                data = response.read()
                reply = Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
                if reply.headers.get("connection", "").lower() == "close":
                    self.conn.close()
                return reply
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt or method not in ("GET", "HEAD"):  # only safe requests are sent twice
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str) -> Reply:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None) -> Reply:
        return self.call("POST", path, body if body is not None else {})

    def patch(self, path: str, body: Any) -> Reply:
        return self.call("PATCH", path, body)

    def delete(self, path: str) -> Reply:
        return self.call("DELETE", path)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
