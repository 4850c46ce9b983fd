"""Checks that run before a request reaches a route: bearer-token auth (401), the body size limit
(413) and the body read deadline (408).

A pure ASGI middleware rather than FastAPI dependencies because the size limit must hold before the
body is parsed (a 2 GB body must not be read into a pydantic model first), and because chunked
uploads carry no Content-Length: we count what arrives and stop at the limit. The deadline is for
slow-body ("slowloris") clients: each one holds an API replica slot while it trickles bytes, so a
hundred of them would starve every other caller; past ``body_timeout_s`` the slot is freed with 408.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

# Reachable without a token: load-balancer probes and the API documentation (it holds no data).
OPEN_PATHS = frozenset({"/healthz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})


@dataclass
class GuardSettings:
    token: str | None = None  # None: no auth
    max_request_bytes: int = 8 * 1024 * 1024
    body_timeout_s: float = 10.0  # the whole body must arrive within this; else 408


async def send_error(send: Callable[..., Awaitable[None]], status: int, kind: str, message: str,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": {"code": status, "message": message, "type": kind}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """ASGI middleware; ``settings`` is read per request, so a replica can set it after import."""

    def __init__(self, app: Any, settings: Callable[[], GuardSettings]):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        # Under a route prefix (Serve's route_prefix) the path carries it; compare the app's own path.
        path = scope.get("path", "").removeprefix(scope.get("root_path", "")) or "/"
        if settings.token and path not in OPEN_PATHS and not _authorized(scope, settings.token):
            await send_error(send, 401, "unauthorized", "missing or wrong bearer token: send "
                             "'Authorization: Bearer <token>' (the token the service was started with)",
                             [(b"www-authenticate", b"Bearer")])
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = settings.max_request_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await send_error(send, 413, "too_large", f"request body is {declared} bytes; the limit is {limit} bytes "
                             "(send less, or split a batch)")
            return
        # Read the whole body (bounded) before the app sees it, then replay it: a body without
        # Content-Length is still cut off at the limit.
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.body_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:  # asyncio.wait_for's, on Python >= 3.11
                await send_error(send, 408, "timeout", f"the request body did not arrive within "
                                 f"{settings.body_timeout_s:g} s (received {size} bytes); send it at once",
                                 [(b"connection", b"close")])
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await send_error(send, 413, "too_large", f"request body exceeds the limit of {limit} bytes "
                                 "(send less, or split a batch)")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as Starlette expects

        await self.app(scope, replay, send)


def _header(scope: dict, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value
    return None


def _content_length(scope: dict) -> int | None:
    raw = _header(scope, b"content-length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _authorized(scope: dict, token: str) -> bool:
    raw = _header(scope, b"authorization") or b""
    scheme, _, given = raw.decode("latin-1").partition(" ")
    # compare_digest: the answer time must not tell how much of a guessed token was right.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
