"""A real HTTP server on 127.0.0.1 for the tests of HTTP clients (stdlib only): a scripted handler
serves in a daemon thread on a free port, and ``close`` frees the port; ``free_port`` for servers a
test starts otherwise."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    """A port nothing listens on now (for a server the test starts itself: Serve, vLLM, squeez's own)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class JsonHandler(BaseHTTPRequestHandler):
    """A handler base: read the JSON body, answer JSON, and keep the test output quiet."""

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class LoopbackServer:
    """``handler`` served on 127.0.0.1 at ``url`` until ``close`` (also a context manager)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "LoopbackServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
