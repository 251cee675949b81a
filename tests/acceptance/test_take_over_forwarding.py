"""One rootUrl for both during a take-over (issue 27, item 4): `wm run web` with
`[take_over] legacy_url` pointed at a legacy worker-manager (tests/support/recording_upstream.py:
a real HTTP server that records each request exactly and answers as worker-manager does).

wm has three providers and their pools (chaos/aws, chaos/gcp, chaos/azure); the legacy has two
other providers' pools, and still lists its old copy of chaos/azure (exported to wm) under a
provider it no longer has. Every call goes through the real `taskcluster` client, or, where the
exact bytes matter, through a request signed as the client signs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import mohawk
import pytest

from tests.support.api_stack import (
    OPERATOR_CLIENT,
    OPERATOR_TOKEN,
    POOLS,
    PREFIX,
    ApiStack,
    module_api,
)
from tests.support.recording_upstream import Recorded, RecordingUpstream, error, legacy_pool
from tests.support.tc_client import refused

ISSUER = "static/taskcluster/worker-manager"
ISSUER_TOKEN = "worker-manager-access-token-of-the-deployment-0123456789"
OPERATOR = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
LEGACY_POOLS = ("legacy/linux", "legacy/win")
LEGACY_PROVIDERS = [
    {"providerId": "legacy-aws", "providerType": "aws"},
    {"providerId": "legacy-gcp", "providerType": "google"},
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[RecordingUpstream]:
    # Like a real deployment, it refuses worker-manager's own client the list scopes (TC auth
    # static-scopes.json); its anonymous role grants them, as community-tc's does.
    with RecordingUpstream(providers=LEGACY_PROVIDERS, refused_clients={ISSUER}) as legacy:
        yield legacy


@pytest.fixture(scope="module")
def api(upstream, pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    env = {"TASKCLUSTER_CLIENT_ID": ISSUER, "TASKCLUSTER_ACCESS_TOKEN": ISSUER_TOKEN}
    tmp = tmp_path_factory.mktemp("take-over")
    top = {"take_over": {"legacy_url": upstream.url}}
    with module_api(
        pg_server.url, template_db, sim_arm_server, tmp, env=env, config_top=top
    ) as stack:
        azure = stack.stack.config().provider_kinds()
        azure_id = next(pid for pid, kind in azure.items() if kind == "azure")
        upstream.pools = [
            legacy_pool(LEGACY_POOLS[0], "legacy-aws"),
            legacy_pool(POOLS["azure"], azure_id),  # exported to wm: the legacy's stale copy
            legacy_pool(LEGACY_POOLS[1], "legacy-gcp"),
        ]
        yield stack


def verifies(record: Recorded, credentials: dict[str, str], base_url: str) -> bool:
    """The forwarded request still carries the client's valid Hawk signature for wm's host and
    port: the legacy, behind the same rootUrl, checks it as if the client had called it."""
    mohawk.Receiver(
        lambda _id: {
            "id": credentials["clientId"],
            "key": credentials["accessToken"],
            "algorithm": "sha256",
        },
        record.header("Authorization") or "",
        base_url + record.target,
        record.method,
        content=record.body,
        content_type=record.header("Content-Type") or "",
    )
    return True


def test_a_legacy_pool_is_answered_by_the_legacy_with_the_clients_own_request(api, upstream):
    answer = api.operator().workerPool(LEGACY_POOLS[0])

    assert answer == legacy_pool(LEGACY_POOLS[0], "legacy-aws")
    (record,) = upstream.recorded("GET", "/worker-pool/legacy")
    assert record.target == f"{PREFIX}/worker-pool/legacy%2Flinux"
    assert record.header("Host") == api.base_url.removeprefix("http://")
    assert verifies(record, OPERATOR, api.base_url)


def test_a_body_reaches_the_legacy_byte_for_byte_and_its_answer_comes_back(api, upstream):
    body = (
        b'{ "workerPoolId":"legacy/win",  "providerId": "legacy-gcp", "workerGroup": "us-c1",\n'
        b'"workerId": "123", "workerIdentityProof": {"token": "t"}}'
    )
    credentials = {
        "expires": "2026-12-31T00:00:00.000Z",
        "clientId": "worker/x",
        "accessToken": "a",
        "certificate": "",
    }
    upstream.answers[("POST", "/worker/register")] = (
        200,
        {
            "expires": "2026-12-31T00:00:00.000Z",
            "credentials": credentials,
            "workerConfig": {},
            "secret": "s" * 44,
        },
        {"X-Request-Id": "legacy-1"},
    )

    reply = api.signed(OPERATOR, "POST", f"{PREFIX}/worker/register", raw=body)

    (record,) = upstream.recorded("POST", "/worker/register")
    assert record.body == body
    assert record.header("Content-Type") == "application/json"
    assert verifies(record, OPERATOR, api.base_url)
    assert reply.status == 200 and reply.json()["secret"] == "s" * 44
    assert (reply.headers["x-request-id"], reply.headers["x-legacy"]) == ("legacy-1", "yes")


def test_a_pool_definition_for_a_legacy_provider_goes_to_the_legacy(api, upstream):
    definition = {
        "providerId": "legacy-aws",
        "description": "",
        "config": {},
        "owner": "a@b.c",
        "emailOnError": False,
    }
    upstream.answers[("PUT", "/worker-pool/legacy/new")] = (
        200,
        legacy_pool("legacy/new", "legacy-aws"),
        {},
    )

    answer = api.operator().createWorkerPool("legacy/new", definition)

    (record,) = upstream.recorded("PUT", "/worker-pool/legacy%2Fnew")
    assert json.loads(record.body) == definition and answer["workerPoolId"] == "legacy/new"
    assert verifies(record, OPERATOR, api.base_url)


def test_wms_pools_and_providers_are_never_forwarded(api, upstream):
    before = len(upstream.requests)
    client = api.operator()
    azure = client.workerPool(POOLS["azure"])
    (worker,) = api.launch("aws", 1)
    registered = client.registerWorker(api.register_body(worker, api.proof(worker)))
    mine = api.client(registered["credentials"])
    assert (
        mine.shouldWorkerTerminate(worker.pool_id, worker.worker_group, worker.tc_worker_id)[
            "terminate"
        ]
        is False
    )
    unknown = {
        **api.register_body(worker, {"document": "x", "signature": "y"}),
        "workerId": "i-none",
    }
    assert refused(lambda: client.registerWorker(unknown)) == (404, "ResourceNotFound")

    assert azure["providerId"] != "legacy-aws" and azure["description"] != "legacy"
    assert len(upstream.requests) == before


def test_the_legacys_refusal_comes_back_as_it_gave_it(api, upstream):
    status, code = refused(lambda: api.operator().workerPool("legacy/none"))

    assert (status, code) == (404, "ResourceNotFound")
    reply = api.signed(OPERATOR, "GET", f"{PREFIX}/worker-pool/legacy%2Fnone")
    assert reply.json() == error("ResourceNotFound", "Worker pool does not exist")


def every_page(call: Any, key: str) -> tuple[list[dict[str, Any]], int]:
    rows: list[dict[str, Any]] = []
    query: dict[str, Any] = {"limit": 1}
    pages = 0
    while True:
        page = call(query=query)
        pages += 1
        assert len(page[key]) <= 1
        rows += page[key]
        if "continuationToken" not in page:
            return rows, pages
        query = {"limit": 1, "continuationToken": page["continuationToken"]}


def test_pools_are_listed_from_both_sides_a_page_at_a_time_wms_copy_winning(api, upstream):
    client = api.operator()

    pools, pages = every_page(client.listWorkerPools, "workerPools")
    stats, _ = every_page(client.listWorkerPoolsStats, "workerPoolsStats")

    listed = sorted(p["workerPoolId"] for p in pools)
    assert listed == sorted([*POOLS.values(), *LEGACY_POOLS])
    assert pages >= len(listed)
    (azure,) = [p for p in pools if p["workerPoolId"] == POOLS["azure"]]
    assert azure["description"] != "legacy"  # wm's, not the legacy's stale copy
    assert sorted(s["workerPoolId"] for s in stats) == listed
    # The legacy's side was read as wm's own client (the caller's signature covers its own
    # query, not the legacy's page of it), then, refused, as anonymous.
    reads = upstream.recorded("GET", "/worker-pools")
    signed = [r for r in reads if f'id="{ISSUER}"' in (r.header("Authorization") or "")]
    assert signed and len(reads) == 2 * len(signed)


def test_providers_are_listed_from_both_sides(api, upstream):
    providers, _ = every_page(api.operator().listProviders, "providers")

    ids = [p["providerId"] for p in providers]
    mine = sorted(api.stack.config().provider_kinds())
    assert ids == [*mine, "legacy-aws", "legacy-gcp"]


def test_every_pools_error_stats_count_both_sides(api, upstream):
    upstream.error_totals = {"total": 4, "code": {"legacy-code": 4}}

    stats = api.operator().workerPoolErrorStats()

    assert stats["totals"]["total"] >= 4 and stats["totals"]["code"]["legacy-code"] == 4


def test_a_token_neither_side_made_is_refused(api):
    assert refused(lambda: api.operator().listWorkerPools(query={"continuationToken": "junk"})) == (
        400,
        "InputError",
    )


def test_a_legacy_that_drops_the_request_is_a_5xx_naming_it(api, upstream):
    upstream.dropped.add("/worker-pool/legacy/gone")

    reply = api.signed(OPERATOR, "GET", f"{PREFIX}/worker-pool/legacy%2Fgone")

    assert reply.status == 500
    body = reply.json()
    assert body["code"] == "InternalServerError" and upstream.url in body["message"]
    assert body["requestInfo"]["method"] == "workerPool"


def test_a_legacy_workers_reregistration_goes_to_the_legacy_on_its_own_credentials(api, upstream):
    ids = {"workerPoolId": LEGACY_POOLS[1], "workerGroup": "us-c1", "workerId": "123"}
    renewed = {"expires": "2026-12-31T00:00:00.000Z", "credentials": {}, "secret": "n" * 44}
    upstream.answers[("POST", "/worker/reregister")] = (200, renewed, {})
    worker = {"clientId": "worker/legacy-gcp/legacy/win/us-c1/123", "accessToken": "legacy-token"}

    answer = api.client(worker).reregisterWorker({**ids, "secret": "o" * 44})

    assert answer == renewed
    (record,) = upstream.recorded("POST", "/worker/reregister")
    assert json.loads(record.body) == {**ids, "secret": "o" * 44}
    assert verifies(record, worker, api.base_url)


def test_an_unpaged_list_holds_both_sides_at_once(api):
    answer = api.operator().listWorkerPools()

    assert sorted(p["workerPoolId"] for p in answer["workerPools"]) == sorted(
        [*POOLS.values(), *LEGACY_POOLS]
    )
    assert "continuationToken" not in answer
