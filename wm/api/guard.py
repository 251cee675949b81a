"""What every request of the web process passes before the API sees it.

- Load shedding: at most `max_in_flight` API requests are handled at once; the next one is
  answered 429 with Retry-After at once, before its body is read, so a boot storm costs a
  refused request a few microseconds and never a queue that grows until clients time out.
  `max_in_flight` is at most the database pool's size (procs/web.py), so a request in flight
  never waits for a connection. Health and metrics are exempt: a platform probing a busy
  process must see it alive.
- Bounded bodies: each request's limit comes from `body_limit(method, path)` (the API's
  choice: pool definitions may be large, worker bodies are small). A declared Content-Length
  over it is refused before reading, and a body sent without one (chunked) is cut off once it
  passes it: 413 either way. A body must also arrive within `body_timeout_s` (408 otherwise):
  a client that sends its headers and then trickles or stalls would hold a place in flight for
  ever, and a handful of them would shed every genuine worker.
- Not ready, not served: until the database's schema is the one wm needs (a process started
  beside `release`), API requests are answered 503 with Retry-After, as when the database is
  down; the health routes say why.
- Nothing unexpected escapes: an error no handler answered becomes a 500, logged by
  its type and place only (never its message, which may quote a request) and sent to Sentry.

It is plain ASGI, not a `BaseHTTPMiddleware`, so that it can count a streamed body as it is
received and answer before the application starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any
from urllib.parse import unquote

from prometheus_client import Counter
from starlette.exceptions import HTTPException

from wm.api.errors import error_json
from wm.ops.telemetry import log

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

API_REQUESTS = Counter("wm_api_requests_total", "Worker API requests.", ["route", "status"])
UNMATCHED = "unmatched"  # the route label of requests answered before any route matched


class BodyTooLarge(HTTPException):
    """Raised from `receive` once a body passes the limit. An HTTPException, because FastAPI
    re-raises those from its body reader (any other error there becomes a 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"bodies are limited to {limit} bytes")


class BodyTimeout(HTTPException):
    """Raised from `receive` when a body is not all there by its deadline."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(408, f"the body did not arrive within {timeout_s:g} seconds")


class Guard:
    def __init__(
        self,
        app: Asgi,
        *,
        max_in_flight: int,
        body_limit: Callable[[str, str], int],
        retry_after_s: int,
        body_timeout_s: float,
        exempt_paths: Collection[str],
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.app = app
        self.ready = ready
        self.body_timeout_s = body_timeout_s
        self.max_in_flight = max_in_flight
        self.body_limit = body_limit
        self.retry_after_s = retry_after_s
        self.exempt_paths = frozenset(exempt_paths)
        # One event loop runs every request: a plain counter, checked and changed with no
        # await in between, is exact.
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.body_limit(scope["method"], scope["path"])
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await self._answer(send, 413, "InputTooLarge", BodyTooLarge(limit).detail)
            API_REQUESTS.labels(UNMATCHED, "413").inc()
            return
        if scope["path"] in self.exempt_paths:
            await self._handle(scope, receive, send, limit)
            return
        if not self.ready():
            # The schema is not there yet (a web process started beside `release`): what
            # would fail on a missing table is asked to come back, as when the database is down.
            await self._come_back(
                send,
                503,
                "ServiceUnavailable",
                "the database's schema is not ready yet; retry shortly",
            )
            return
        if self.in_flight >= self.max_in_flight:
            await self._come_back(
                send,
                429,
                "TooManyRequests",
                "too many requests at once; retry after the Retry-After delay",
            )
            return
        self.in_flight += 1
        try:
            await self._handle(scope, receive, send, limit)
        finally:
            self.in_flight -= 1

    async def _handle(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        started = time.monotonic()
        received = 0
        body_complete = False
        status = 0

        async def limited_receive() -> Message:
            nonlocal received, body_complete
            if body_complete:  # what comes after the body (a disconnect) has no deadline
                return await receive()
            remaining_s = started + self.body_timeout_s - time.monotonic()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(remaining_s, 0.0))
            except TimeoutError:
                raise BodyTimeout(self.body_timeout_s) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
                body_complete = not message.get("more_body", False)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except Exception as exc:
            if status:  # the answer already started: nothing more can be said
                raise
            status = 500
            _report(scope, exc)
            await self._answer(send, 500, "InternalServerError", "the server failed; retry later")
        path = getattr(scope.get("route"), "path", UNMATCHED)
        API_REQUESTS.labels(path, str(status)).inc()
        log(
            "api-request",
            method=scope["method"],
            route=path,
            status=status,
            duration_s=round(time.monotonic() - started, 4),
        )

    async def _come_back(self, send: Send, status: int, code: str, message: str) -> None:
        """Refused before it is read: asked to come back after Retry-After."""
        retry_after = [(b"retry-after", str(self.retry_after_s).encode())]
        await self._answer(send, status, code, message, headers=retry_after)
        API_REQUESTS.labels(UNMATCHED, str(status)).inc()

    @staticmethod
    async def _answer(
        send: Send,
        status: int,
        code: str,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        body = json.dumps(
            error_json(
                code=code, status=status, message=message, method="unknown", params={}, payload={}
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *(headers or []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class KeepEscapedSlashes:
    """Routes API paths with `%2F` left escaped, so a pool id stays one path segment.

    Starlette routes on the decoded path, in which `proj-x%2Fci` has become two segments; here
    the path is decoded from the raw one except for `%2F`, which the `poolid` convertor
    (wm/api/endpoint.py) unescapes. Other paths are left alone.
    """

    def __init__(self, app: Asgi, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and scope["path"].startswith(self.prefix):
            text = raw.decode("latin-1").split("?", 1)[0]
            kept = text.replace("%2F", "%252F").replace("%2f", "%252F")
            # In place: the guard reads the matched route back from this same scope.
            scope["path"] = unquote(kept)
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return None


def _report(scope: Scope, exc: Exception) -> None:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown"
    route = getattr(scope.get("route"), "path", UNMATCHED)
    # The type and the place, never str(exc): messages can quote a request's values.
    log(
        "api-error",
        logging.ERROR,
        exc_info=exc,
        trace_in_log=False,
        route=route,
        error=type(exc).__name__,
        where=where,
    )
