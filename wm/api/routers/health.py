"""Health: Taskcluster's ping and Dockerflow routes, and wm's own /healthz and /metrics."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from wm.api.endpoint import (
    ApiContext,
    Call,
    EndpointRouter,
    TaskclusterRoute,
    api_context,
    endpoint,
    reply,
    run,
)
from wm.api.models import Ping
from wm.db.engine import ping as ping_database

router = EndpointRouter()
# wm's own, outside Taskcluster's prefix.
own = APIRouter(route_class=TaskclusterRoute)
Public = Annotated[Call, endpoint()]


@router.declare("ping", response_model=Ping)
async def ping(call: Public) -> JSONResponse:
    return reply(Ping(alive=True, uptime=round(time.monotonic() - call.api.started, 3)))


@router.declare("lbheartbeat")
async def lbheartbeat(call: Public) -> JSONResponse:
    return JSONResponse({})


@router.declare("version")
async def version_info(call: Public) -> JSONResponse:
    # Dockerflow's version object; wm knows its package version only.
    return JSONResponse({"source": "wm", "version": call.api.version, "commit": "", "build": ""})


@router.declare("heartbeat")
async def heartbeat(call: Public) -> JSONResponse:
    if not call.api.schema.ready:
        return not_ready(call.api)
    await run(ping_database, call.api.engine)
    return JSONResponse({})


@own.get("/healthz")
def healthz(api: Annotated[ApiContext, Depends(api_context)]) -> JSONResponse:
    """200 when the database answers with the schema wm needs; 503 saying why until then."""
    if not api.schema.ready:
        return not_ready(api)
    ping_database(api.engine)
    return JSONResponse({"status": "ok"})


def not_ready(api: ApiContext) -> JSONResponse:
    # The process's schema watcher's last finding: no query here.
    return JSONResponse({"status": "not ready", "problem": api.schema.problem}, status_code=503)


@own.get("/metrics")
def metrics() -> PlainTextResponse:
    return PlainTextResponse(generate_latest().decode(), media_type=CONTENT_TYPE_LATEST)
