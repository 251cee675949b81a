"""Worker pool definitions through the API, with the real `taskcluster` client against `wm run
web`: createWorkerPool / updateWorkerPool / deleteWorkerPool / listWorkerPoolLaunchConfigs as
worker-manager answers them, and every refusal in Taskcluster's error body with nothing written."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import taskcluster

from tests.support.api_stack import OPERATOR_CLIENT, OPERATOR_TOKEN, ApiStack, module_api
from tests.support.definitions import documents
from tests.support.tc_schemas import check
from wm.db.pools import load_launch_configs, load_pools

OPERATOR = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
UPDATABLE = {
    *("workerPoolId", "providerId", "description", "config", "owner", "emailOnError"),
    *("created", "lastModified"),
}


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("pool-definitions")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


def definition(api: ApiStack, pool_id: str, kind: str, launch_configs: int = 1) -> dict[str, Any]:
    """A definition on the stack's provider of `kind` (body only: the id goes in the path)."""
    config = api.stack.config()
    provider = next(p for p in config.providers if p.kind == kind)
    machines = MACHINE_TYPES[kind][:launch_configs]
    old = {
        "id": pool_id,
        "provider": provider.id,
        "max_capacity": 3,
        "launch_configs": [
            {"region": provider.regions[0], "machine_type": m, "image": IMAGES[kind]}
            for m in machines
        ],
    }
    (document,) = documents(config, [old])
    return {k: v for k, v in document.items() if k != "workerPoolId"}


MACHINE_TYPES = {
    "aws": ["m5.large", "m5.xlarge"],
    "gcp": ["e2-small", "e2-medium"],
    "azure": ["Standard_D2s_v5", "Standard_D4s_v5"],
}
IMAGES = {
    "aws": "ami-0abcdef1234567890",
    "gcp": "projects/debian-cloud/global/images/family/debian-12",
    "azure": "Canonical:ubuntu-24_04-lts:server:latest",
}


def refusal(call) -> tuple[int, str, str]:
    with pytest.raises(taskcluster.TaskclusterRestFailure) as caught:
        call()
    error = caught.value
    return error.status_code, error.body["code"], error.body["message"]


def launch_config_ids(pool: dict[str, Any]) -> list[str]:
    return [lc["workerManager"]["launchConfigId"] for lc in pool["config"]["launchConfigs"]]


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_a_created_pool_answers_its_definition_and_creating_it_again_changes_nothing(api, kind):
    pool_id = f"defs/created-{kind}"
    body = definition(api, pool_id, kind)
    operator = api.client(OPERATOR)

    created = operator.createWorkerPool(pool_id, copy.deepcopy(body))
    again = operator.createWorkerPool(pool_id, copy.deepcopy(body))

    assert created["workerPoolId"] == pool_id
    for key in ("providerId", "description", "owner", "emailOnError"):
        assert created[key] == body[key], key
    given = body["config"]["launchConfigs"]
    assert [
        {k: v for k, v in lc.items() if k != "workerManager"}
        for lc in created["config"]["launchConfigs"]
    ] == [{k: v for k, v in lc.items() if k != "workerManager"} for lc in given]
    assert launch_config_ids(created) == [lc["workerManager"]["launchConfigId"] for lc in given]
    assert again["lastModified"] == created["lastModified"]
    assert operator.workerPool(pool_id)["config"] == created["config"]


def test_creating_an_existing_pool_with_another_definition_is_a_conflict(api):
    pool_id = "defs/conflict"
    body = definition(api, pool_id, "aws")
    operator = api.client(OPERATOR)
    operator.createWorkerPool(pool_id, copy.deepcopy(body))
    other = {**body, "description": "something else"}

    status, code, _ = refusal(lambda: operator.createWorkerPool(pool_id, other))

    assert (status, code) == (409, "RequestConflict")
    assert operator.workerPool(pool_id)["description"] == body["description"]


def test_an_update_archives_the_launch_configs_it_drops_and_lists_them_on_request(api):
    pool_id = "defs/updated"
    body = definition(api, pool_id, "gcp", launch_configs=2)
    operator = api.client(OPERATOR)
    created = operator.createWorkerPool(pool_id, copy.deepcopy(body))
    kept, dropped = launch_config_ids(created)

    # workerPool()'s answer, edited and written back (its id and times may stay).
    fetched = {k: v for k, v in operator.workerPool(pool_id).items() if k in UPDATABLE}
    fetched["config"]["launchConfigs"] = fetched["config"]["launchConfigs"][:1]
    fetched["config"]["maxCapacity"] = 7
    updated = operator.updateWorkerPool(pool_id, fetched)

    assert updated["config"]["maxCapacity"] == 7
    assert launch_config_ids(updated) == [kept]
    listed = operator.listWorkerPoolLaunchConfigs(pool_id)
    every = operator.listWorkerPoolLaunchConfigs(pool_id, query={"includeArchived": "true"})
    check("worker-pool-launch-config-list", listed)
    check("worker-pool-launch-config-list", every)
    active = listed["workerPoolLaunchConfigs"]
    assert [(c["launchConfigId"], c["isArchived"]) for c in active] == [(kept, False)]
    assert sorted(
        (c["launchConfigId"], c["isArchived"]) for c in every["workerPoolLaunchConfigs"]
    ) == sorted([(kept, False), (dropped, True)])


def test_a_deleted_pool_moves_to_the_null_provider_with_its_launch_configs_archived(api):
    pool_id = "defs/deleted"
    operator = api.client(OPERATOR)
    operator.createWorkerPool(pool_id, definition(api, pool_id, "azure"))

    deleted = operator.deleteWorkerPool(pool_id)

    assert deleted["providerId"] == "null-provider"
    assert deleted["config"]["launchConfigs"] == []
    (row,) = [p for p in load_pools(api.engine) if p.pool_id == pool_id]
    assert row.removed and row.previous_provider_ids == (api.stack.config().providers[2].id,)
    assert all(lc.archived for lc in load_launch_configs(api.engine) if lc.pool_id == pool_id)


def test_updating_or_deleting_an_unknown_pool_is_not_found(api):
    operator = api.client(OPERATOR)
    body = definition(api, "defs/nowhere", "aws")
    assert refusal(lambda: operator.updateWorkerPool("defs/nowhere", body))[:2] == (
        404,
        "ResourceNotFound",
    )
    assert refusal(lambda: operator.deleteWorkerPool("defs/nowhere"))[:2] == (
        404,
        "ResourceNotFound",
    )


def test_a_body_naming_another_pool_is_refused(api):
    pool_id = "defs/named"
    operator = api.client(OPERATOR)
    body = definition(api, pool_id, "aws")
    operator.createWorkerPool(pool_id, copy.deepcopy(body))
    status, code, message = refusal(
        lambda: operator.updateWorkerPool(pool_id, {**body, "workerPoolId": "defs/other"})
    )
    assert (status, code) == (400, "InputError") and "workerPoolId" in message


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda b: b["config"]["launchConfigs"][0]["launchConfig"].pop("ImageId"), "ImageId"),
        (lambda b: b["config"].pop("maxCapacity"), "config.maxCapacity"),
        (lambda b: b["config"].update(scalingRatio=2), "config.scalingRatio"),
        (
            lambda b: b["config"]["launchConfigs"][0]["workerManager"].update(initialWeight=3),
            "config.launchConfigs[0].workerManager.initialWeight",
        ),
        (
            lambda b: b["config"]["launchConfigs"][0].update(region="eu-north-1"),
            "config.launchConfigs[0]",
        ),
    ],
)
def test_a_definition_the_schemas_refuse_names_its_key_path_and_writes_nothing(api, edit, path):
    pool_id = "defs/refused"
    body = definition(api, pool_id, "aws")
    edit(body)
    operator = api.client(OPERATOR)

    status, code, message = refusal(lambda: operator.createWorkerPool(pool_id, body))

    assert (status, code) == (400, "InputValidationError")
    assert path in message, message
    assert all(p.pool_id != pool_id for p in load_pools(api.engine))


def test_an_unknown_provider_is_refused_naming_the_valid_ones(api):
    body = {**definition(api, "defs/unknown", "aws"), "providerId": "no-such-cloud"}
    status, code, message = refusal(
        lambda: api.client(OPERATOR).createWorkerPool("defs/unknown", body)
    )
    assert (status, code) == (400, "InputError")
    assert all(p.id in message for p in api.stack.config().providers) and "null-provider" in message


def test_creating_needs_both_the_pool_scope_and_the_provider_scope(api):
    pool_id = "defs/scoped"
    body = definition(api, pool_id, "aws")
    only_the_pool = taskcluster.WorkerManager(
        {
            "rootUrl": api.base_url,
            "maxRetries": 0,
            "credentials": dict(OPERATOR),
            "authorizedScopes": [f"worker-manager:manage-worker-pool:{pool_id}"],
        }
    )
    status, code, message = refusal(lambda: only_the_pool.createWorkerPool(pool_id, body))
    assert (status, code) == (403, "InsufficientScopes")
    assert f"worker-manager:provider:{body['providerId']}" in message
    assert all(p.pool_id != pool_id for p in load_pools(api.engine))


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_a_worker_whose_launch_config_was_dropped_is_told_to_terminate(api, kind):
    pool_id = f"defs/archive-{kind}"
    body = definition(api, pool_id, kind)
    operator = api.client(OPERATOR)
    operator.createWorkerPool(pool_id, copy.deepcopy(body))
    (worker,) = api.launch(kind, 1, pool_id=pool_id)
    reply = api.register(worker, api.proof(worker))
    assert reply.status == 200, reply.body
    own = api.client(reply.json()["credentials"])
    before = own.shouldWorkerTerminate(pool_id, worker.worker_group, worker.tc_worker_id)

    replaced = definition(api, pool_id, kind, launch_configs=2)
    replaced["config"]["launchConfigs"] = replaced["config"]["launchConfigs"][1:]
    operator.updateWorkerPool(pool_id, replaced)
    after = own.shouldWorkerTerminate(pool_id, worker.worker_group, worker.tc_worker_id)

    assert before == {"terminate": False, "reason": "none"}
    assert after == {"terminate": True, "reason": "launch config archived"}


def test_a_max_capacity_below_the_min_is_accepted_as_worker_manager_does_and_logged(api):
    pool_id = "defs/min-over-max"
    body = definition(api, pool_id, "aws")
    body["config"].update(minCapacity=3, maxCapacity=1)
    operator = api.client(OPERATOR)

    created = operator.createWorkerPool(pool_id, copy.deepcopy(body))
    body["config"].update(minCapacity=4)
    updated = operator.updateWorkerPool(pool_id, copy.deepcopy(body))

    # The answers are worker-manager's, nothing added; the web process's log says it.
    check("worker-pool-full", created)
    check("worker-pool-full", updated)
    expected = [
        (
            pool_id,
            [
                f"config.maxCapacity (1) is below config.minCapacity ({n}): the pool keeps "
                f"minCapacity ({n}) running anyway, as worker-manager does"
            ],
        )
        for n in (3, 4)
    ]

    def warned() -> list[tuple[str, list[str]]]:
        events = api.web.events("worker-pool-warnings")
        return [(e["pool"], e["warnings"]) for e in events if e["pool"] == pool_id]

    api.web.wait_for(lambda: warned() == expected, 30, "both warnings in the log")
