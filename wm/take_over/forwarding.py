"""The web process during a take-over: each worker-manager request goes to the side that has its
pool (wm/take_over/routes.py decides; this reads the request and the pool's row and forwards).

Only in the app when `[take_over] legacy_url` is set: without it, nothing here runs and the API
is what it always was. The request is read whole before it is decided (registerWorker and the
pool definitions name their provider in the body), inside the guard, so the guard's shedding,
body limits and body deadline hold for forwarded requests too; a request wm serves gets the
same bytes replayed.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any
from urllib.parse import parse_qsl

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wm.api.endpoint import UNKNOWN_METHOD
from wm.api.errors import DATABASE_DOWN, database_down_response, error_response
from wm.db import api_reads
from wm.ops.telemetry import log
from wm.take_over.legacy_forwarder import LegacyForwarder, LegacyUnavailable
from wm.take_over.routes import Decision, Subject, decide, subject, wms_pool


class Forwarding:
    def __init__(
        self,
        app: ASGIApp,
        *,
        prefix: str,
        legacy: LegacyForwarder,
        providers: Collection[str],
        engine: Engine,
    ) -> None:
        self.app = app
        self.prefix = prefix
        self.legacy = legacy
        self.providers = frozenset(providers)
        self.engine = engine

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        path = raw.decode("latin-1").split("?", 1)[0] if raw else ""
        if not path.startswith(self.prefix + "/"):
            await self.app(scope, receive, send)
            return
        try:
            body, more = await _read_body(receive)
        except HTTPException as refused:  # the guard's 413 or 408: the app answers it
            await self.app(scope, _raising(refused), send)
            return
        query_string = scope.get("query_string", b"")
        query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
        about = subject(scope["method"], path[len(self.prefix) :], query, body)
        name = about.endpoint.name if about.endpoint else UNKNOWN_METHOD
        try:
            pool_is_wms = await self._pool_is_wms(about)
        except DATABASE_DOWN as down:  # as the app answers it: retry shortly
            await database_down_response(down, name, {}, {})(scope, receive, send)
            return
        decision = decide(about, self.providers, pool_is_wms)
        if decision is not Decision.FORWARD:
            await self.app(scope, _replay(body, more, receive), send)
            return
        target = path + (f"?{query_string.decode('latin-1')}" if query_string else "")
        try:
            answer = await self.legacy.forward(scope["method"], target, scope["headers"], body)
        except LegacyUnavailable as error:
            log("legacy-unavailable", logging.WARNING, endpoint=name, error=error.message)
            response = error_response(error, method=name, params={}, payload={})
            await response(scope, receive, send)
            return
        await send(
            {"type": "http.response.start", "status": answer.status, "headers": answer.headers}
        )
        await send({"type": "http.response.body", "body": answer.body})

    async def _pool_is_wms(self, about: Subject) -> bool:
        """The pool named is in wm's database under a provider wm has, or under none (a
        deleted pool wm still drains)."""
        if about.pool_id is None:
            return False
        exists, provider_id = await run_in_threadpool(
            api_reads.pool_provider, self.engine, about.pool_id
        )
        return wms_pool(exists, provider_id, self.providers)


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole body, and any message that came after it (a disconnect)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [message]
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), []


def _raising(error: HTTPException) -> Receive:
    async def raising() -> Message:
        raise error

    return raising


def _replay(body: bytes, after: list[Message], receive: Receive) -> Receive:
    pending: list[Any] = [{"type": "http.request", "body": body, "more_body": False}, *after]

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
