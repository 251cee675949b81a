"""The endpoint table is worker-manager's API reference: every entry of Taskcluster's
`generated/references.json` (vendored: tests/fixtures/tc_api), in its order, with its method,
route, scope expression, query-string parameters and whether it takes a body; and the app's
routes are its rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from wm.api.endpoint import PREFIX, app_path
from wm.api.endpoint_table import BY_NAME, ENDPOINTS
from wm.api.routers import errors, health, pools, providers, workers

ENTRIES = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "tc_api" / "worker-manager-entries.json").read_text()
)["entries"]
ROUTERS = (health.router, workers.router, errors.router, pools.router, providers.router)
# The reference's endpoints wm has no route for: during a take-over they are forwarded.
NOT_SERVED = {"listWorkers", "getWorker"}


def test_the_table_holds_every_endpoint_of_the_reference_once_in_its_order():
    assert [e.name for e in ENDPOINTS] == [e["name"] for e in ENTRIES]
    assert len(BY_NAME) == len(ENDPOINTS)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_each_row_says_what_the_reference_says(entry):
    row = BY_NAME[entry["name"]]

    assert (row.method, row.route) == (entry["method"], entry["route"])
    assert row.scopes == entry["scopes"]
    assert list(row.query) == entry["query"]
    assert (row.body is not None) == (entry["input"] is not None)


def test_each_route_of_the_app_is_its_rows_method_and_path():
    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]

    served = {r.name: (r.methods, r.path) for r in routes}

    assert set(served) == set(BY_NAME) - NOT_SERVED
    for name, (methods, path) in served.items():
        row = BY_NAME[name]
        assert (methods, path) == ({row.method}, PREFIX + app_path(row.route)), name


def test_a_route_names_a_pool_by_the_pool_id_convertor_and_other_parameters_as_segments():
    assert app_path("/workers/<workerPoolId>/<workerGroup>") == (
        "/workers/{workerPoolId:poolid}/{workerGroup}"
    )
    assert app_path("/worker/register") == "/worker/register"
