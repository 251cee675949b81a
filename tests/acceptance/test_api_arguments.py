"""Query strings and body sizes on `wm run web`, as Taskcluster's API library takes them: every
route refuses a query-string parameter it does not declare (400 `InvalidRequestArguments`,
Taskcluster's words, nothing done), declared ones must match their patterns, pool definitions
may be as large as Taskcluster allows (10 MB) and every other body stays small.

Sources: TC `libraries/api/src/middleware/queries.js` (the check), `generated/references.json`
(each endpoint's `query` names, copied below as the expectation), WM `src/api.js` and
`libraries/api/src/pagination.js` (the patterns), `libraries/api/src/api.js` (`inputLimit`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.api_stack import (
    OPERATOR_CLIENT,
    OPERATOR_TOKEN,
    PREFIX,
    ApiStack,
    module_api,
    send_chunked,
)
from tests.support.definitions import aws_create_body
from tests.support.tc_schemas import check
from wm.db.pools import load_launch_configs, load_pools

OPERATOR = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
POOL, GROUP, WORKER = "chaos/aws", "us-east-1", "i-0123456789abcdef0"
TEN_MB = 10 * 1024 * 1024  # body-parser's '10mb'
SMALL_BYTES = 64 * 1024

# generated/references.json → references/worker-manager/v1/api.json: each entry's `query`.
REFERENCE_QUERIES = {
    "ping": [],
    "lbheartbeat": [],
    "version": [],
    "heartbeat": [],
    "listProviders": ["continuationToken", "limit"],
    "createWorkerPool": [],
    "updateWorkerPool": [],
    "deleteWorkerPool": [],
    "listWorkerPoolLaunchConfigs": ["continuationToken", "limit", "includeArchived"],
    "workerPoolStats": [],
    "workerPool": [],
    "listWorkerPools": ["continuationToken", "limit"],
    "listWorkerPoolsStats": ["continuationToken", "limit"],
    "reportWorkerError": [],
    "workerPoolErrorStats": ["workerPoolId"],
    "listWorkerPoolErrors": ["continuationToken", "limit", "launchConfigId", "errorId"],
    "listWorkersForWorkerGroup": ["continuationToken", "limit"],
    "worker": [],
    "removeWorker": [],
    "shouldWorkerTerminate": [],
    "listWorkersForWorkerPool": ["continuationToken", "limit", "launchConfigId", "state"],
    "registerWorker": [],
    "reregisterWorker": [],
    "createWorker": [],
    "updateWorker": [],
}


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("api-arguments")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


def definition(api: ApiStack, pool_id: str) -> dict[str, Any]:
    return aws_create_body(api.stack.config(), pool_id)


def routes(api: ApiStack) -> list[tuple[str, str, str, Any]]:
    """Every route of the API: (endpoint, method, path template as OpenAPI names it, a body
    its schema accepts, so that only the query can be refused)."""
    report = {
        "workerGroup": GROUP,
        "workerId": WORKER,
        "kind": "worker-error",
        "title": "t",
        "description": "",
        "extra": {},
    }
    register = {
        "workerPoolId": POOL,
        "providerId": "aws-sim",
        "workerGroup": GROUP,
        "workerId": WORKER,
        "workerIdentityProof": {"document": "d", "signature": "s"},
    }
    reregister = {
        "workerPoolId": POOL,
        "workerGroup": GROUP,
        "workerId": WORKER,
        "secret": "s" * 44,
    }
    hand_made = {"expires": "2099-01-01T00:00:00.000Z", "providerInfo": {"staticSecret": "s" * 44}}
    pool, worker = "/worker-pool/{workerPoolId}", "/workers/{workerPoolId}/{workerGroup}/{workerId}"
    return [
        ("ping", "GET", "/ping", None),
        ("lbheartbeat", "GET", "/__lbheartbeat__", None),
        ("version", "GET", "/__version__", None),
        ("heartbeat", "GET", "/__heartbeat__", None),
        ("listProviders", "GET", "/providers", None),
        ("createWorkerPool", "PUT", pool, definition(api, POOL)),
        ("updateWorkerPool", "POST", pool, definition(api, POOL)),
        ("deleteWorkerPool", "DELETE", pool, None),
        ("listWorkerPoolLaunchConfigs", "GET", pool + "/launch-configs", None),
        ("workerPoolStats", "GET", pool + "/stats", None),
        ("workerPool", "GET", pool, None),
        ("listWorkerPools", "GET", "/worker-pools", None),
        ("listWorkerPoolsStats", "GET", "/worker-pools/stats", None),
        ("reportWorkerError", "POST", "/worker-pool-errors/{workerPoolId}", report),
        ("workerPoolErrorStats", "GET", "/worker-pool-errors/stats", None),
        ("listWorkerPoolErrors", "GET", "/worker-pool-errors/{workerPoolId}", None),
        ("listWorkersForWorkerGroup", "GET", "/workers/{workerPoolId}/{workerGroup}", None),
        ("worker", "GET", worker, None),
        ("removeWorker", "DELETE", worker, None),
        ("shouldWorkerTerminate", "GET", worker + "/should-terminate", None),
        ("listWorkersForWorkerPool", "GET", "/workers/{workerPoolId}", None),
        ("registerWorker", "POST", "/worker/register", register),
        ("reregisterWorker", "POST", "/worker/reregister", reregister),
        ("createWorker", "PUT", worker, hand_made),
        ("updateWorker", "POST", worker, hand_made),
    ]


def concrete(template: str) -> str:
    return PREFIX + template.format(
        workerPoolId=quote(POOL, safe=""), workerGroup=GROUP, workerId=WORKER
    )


def snapshot(api: ApiStack) -> tuple[Any, ...]:
    return (
        load_pools(api.engine),
        load_launch_configs(api.engine, include_archived=True),
        api.all_stored_text(),
    )


def test_the_route_table_is_every_route_wm_serves_with_taskclusters_query_names(api):
    served = {
        (method.upper(), path)
        for path, methods in api.call("GET", "/api/openapi.json").json()["paths"].items()
        if path.startswith(PREFIX)
        for method in methods
    }
    table = routes(api)
    assert {(method, PREFIX + template) for _, method, template, _ in table} == served
    from wm.api.endpoint_table import BY_NAME

    for name, *_ in table:
        assert sorted(BY_NAME[name].query) == sorted(REFERENCE_QUERIES[name]), name


def test_every_route_refuses_a_parameter_it_does_not_declare_and_does_nothing(api):
    before = snapshot(api)
    for name, method, template, body in routes(api):
        reply = api.operator_call(method, concrete(template) + "?foo=bar", body)
        assert reply.refusal()[:2] == (400, "InvalidRequestArguments"), (name, reply.body)
        assert reply.refusal()[2] == "Query-string parameter: foo is not supported!", name
        assert reply.json()["requestInfo"]["method"] == name
    assert snapshot(api) == before


@pytest.mark.parametrize(
    ("scenario", "path", "message"),
    [
        (
            "a limit that is not digits",
            "/worker-pools?limit=ten",
            'Query-string parameter: limit="ten" does not match expression: /^[0-9]+$/',
        ),
        (
            "digits then a newline ($ is the end of the value, not of a line)",
            "/worker-pools?limit=5%0A",
            'Query-string parameter: limit="5\n" does not match expression: /^[0-9]+$/',
        ),
        (
            "an empty continuation token",
            "/worker-pools/stats?continuationToken=",
            'Query-string parameter: continuationToken="" does not match expression: /./',
        ),
        (
            "a parameter given twice",
            "/worker-pools?limit=1&limit=2",
            "Query-string parameter: limit must be a string!",
        ),
        (
            "a providers token that is not an offset",
            "/providers?continuationToken=abc",
            'Query-string parameter: continuationToken="abc" does not match expression: /^[0-9]+$/',
        ),
        (
            "includeArchived other than true or false",
            "/worker-pool/chaos%2Faws/launch-configs?includeArchived=yes",
            'Query-string parameter: includeArchived="yes" does not match expression: '
            "/^(true|false)$/",
        ),
        (
            "a state workers are never in",
            "/workers/chaos%2Faws?state=lost",
            'Query-string parameter: state="lost" does not match expression: '
            "/^(requested|running|stopping|stopped|standalone)$/",
        ),
        (
            "a launch config id of 39 characters",
            "/workers/chaos%2Faws?launchConfigId=" + "a" * 39,
            f'Query-string parameter: launchConfigId="{"a" * 39}" does not match expression: '
            "/^[a-zA-Z0-9-]{1,38}$/",
        ),
        (
            "an error id with a dot",
            "/worker-pool-errors/chaos%2Faws?errorId=a.b",
            'Query-string parameter: errorId="a.b" does not match expression: /^[a-zA-Z0-9-_]+$/',
        ),
        (
            "every problem, one line each, in the order given",
            "/worker-pools?zeta=1&limit=x",
            "Query-string parameter: zeta is not supported!\n"
            'Query-string parameter: limit="x" does not match expression: /^[0-9]+$/',
        ),
    ],
)
def test_declared_parameters_must_match_their_patterns(api, scenario, path, message):
    reply = api.operator_call("GET", PREFIX + path)

    assert reply.refusal() == (400, "InvalidRequestArguments", message), scenario


def test_the_scopes_come_first_where_taskcluster_checks_them_first(api):
    # Scopes from the path alone: authorized before the query is looked at.
    assert api.call("GET", f"{PREFIX}/worker-pools?foo=1").refusal()[:2] == (
        403,
        "InsufficientScopes",
    )
    # Scopes from the body: the handler authorizes, after the query check.
    body = {"workerPoolId": POOL, "workerGroup": GROUP, "workerId": WORKER, "secret": "s" * 44}
    reply = api.post(f"{PREFIX}/worker/reregister?foo=1", body)
    assert reply.refusal()[:2] == (400, "InvalidRequestArguments")


def test_a_bewit_is_never_an_unknown_parameter(api):
    assert api.call("GET", f"{PREFIX}/ping?bewit=abc").status == 200


def test_providers_page_by_plain_offsets_as_worker_manager_pages_them(api):
    operator = api.client(OPERATOR)
    seen, token, tokens = [], None, []
    while True:
        query = {"limit": "1", **({"continuationToken": token} if token else {})}
        page = check("provider-list", operator.listProviders(query=query))
        seen += [p["providerId"] for p in page["providers"]]
        token = page.get("continuationToken")
        if not token:
            break
        tokens.append(token)
    assert sorted(seen) == sorted(
        p["providerId"] for p in check("provider-list", operator.listProviders())["providers"]
    )
    assert tokens == [str(n) for n in range(1, len(seen))]


def big_definition(api: ApiStack, pool_id: str, launch_configs: int) -> dict[str, Any]:
    """A definition of many launch configs, each with a few KiB of worker config: the size
    real pools with many instance types and images reach."""
    body = definition(api, pool_id)
    (template,) = body["config"]["launchConfigs"]
    configs = []
    for n in range(launch_configs):
        lc = copy.deepcopy(template)
        lc["launchConfig"]["InstanceType"] = ("m5.large", "m5.xlarge", "c5.2xlarge")[n % 3]
        lc["workerConfig"] = {"genericWorker": {"config": {"n": n, "notes": "x" * 4000}}}
        lc["workerManager"]["launchConfigId"] = f"lc-{n:04d}"
        configs.append(lc)
    body["config"]["launchConfigs"] = configs
    return body


def test_a_large_pool_definition_loads(api):
    body = big_definition(api, "defs/large", launch_configs=150)
    assert len(json.dumps(body)) > 8 * SMALL_BYTES  # 600 KB
    operator = api.client(OPERATOR)

    created = operator.createWorkerPool("defs/large", copy.deepcopy(body))

    check("worker-pool-full", created)
    assert len(created["config"]["launchConfigs"]) == 150
    body["description"] = "updated"
    assert operator.updateWorkerPool("defs/large", body)["description"] == "updated"
    assert check("worker-pool-full", operator.workerPool("defs/large"))["config"] == body["config"]


def test_definitions_up_to_ten_mb_are_read_and_larger_ones_are_refused(api):
    path = f"{PREFIX}/worker-pool/defs%2Fhuge"
    before = snapshot(api)
    # Exactly 10 MB is read and judged (unsigned, so: no scopes); one byte more is too large.
    padding = " " * (TEN_MB - 2)
    judged = api.call("PUT", path, raw=("{" + padding + "}").encode())
    assert judged.refusal()[:2] == (400, "InputValidationError")
    too_large = api.call("PUT", path, raw=("{" + padding + " }").encode())
    assert too_large.refusal()[:2] == (413, "InputTooLarge")
    assert api.operator_call("POST", path, raw=b"{" + b" " * TEN_MB + b"}").status == 413
    status, body = send_chunked(api.base_url, "PUT", path, b"{", TEN_MB + 8192)
    assert (status, json.loads(body)["code"]) == (413, "InputTooLarge")  # no Content-Length
    assert snapshot(api) == before


@pytest.mark.parametrize(
    ("endpoint", "method", "path"),
    [
        ("registerWorker", "POST", "/worker/register"),
        ("reregisterWorker", "POST", "/worker/reregister"),
        ("reportWorkerError", "POST", "/worker-pool-errors/chaos%2Faws"),
    ],
)
def test_worker_bodies_stay_small(api, endpoint, method, path):
    reply = api.call(method, PREFIX + path, raw=b"{" + b" " * SMALL_BYTES + b"}")

    assert reply.refusal()[:2] == (413, "InputTooLarge"), endpoint
