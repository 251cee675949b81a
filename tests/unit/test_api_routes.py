"""Every worker-manager route is named as its endpoint in the endpoint table and passes the one
endpoint dependency (wm/api/endpoint.py): none authorizes, or forgets to, on its own."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute
from sqlalchemy import create_engine

from wm.api.app import create_app
from wm.api.authn import Authenticator, IssuerSource
from wm.api.endpoint import PREFIX
from wm.api.endpoint_table import BY_NAME
from wm.api.routers import errors, health, pools, providers, workers

ROUTERS = (health.router, workers.router, errors.router, pools.router, providers.router)


def dependency_names(route: APIRoute) -> set[str]:
    found, todo = set(), list(route.dependant.dependencies)
    while todo:
        dependant = todo.pop()
        found.add(getattr(dependant.call, "__qualname__", ""))
        todo += dependant.dependencies
    return found


def test_every_worker_manager_route_passes_the_endpoint_dependency():
    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) == 27 - 2  # /healthz and /metrics are wm's own
    for route in routes:
        assert route.path.startswith(PREFIX), route.path
        assert route.name in BY_NAME, route.name
        assert "endpoint.<locals>.authorized" in dependency_names(route), route.name


def app_never_connected() -> FastAPI:
    engine = create_engine("postgresql+psycopg2://nobody@localhost/none")  # never connected
    issuer = IssuerSource(engine)
    return create_app(
        engine,
        {},
        provider_kinds={},
        deployment_id="d",
        root_url="http://wm.test",
        authenticator=Authenticator(issuer, operator_token=None, auth_service=None),
        issuer=issuer,
    )


def test_the_app_serves_every_router():
    app = app_never_connected()
    operations = {
        operation["operationId"].split("_")[0]
        for path in app.openapi()["paths"].values()
        for operation in path.values()
    }
    assert {r.name for router in ROUTERS for r in router.routes} <= operations


def test_wms_own_routes_beside_the_endpoint_table_answer_too():
    # /metrics is no worker-manager endpoint: the route class must not look it up as one.
    answer = asyncio.run(get(app_never_connected(), "/metrics"))

    assert answer.status_code == 200
    assert "wm_api_requests_total" in answer.text


async def get(app: FastAPI, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://wm.test") as client:
        return await client.get(path)
