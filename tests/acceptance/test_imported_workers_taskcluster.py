"""Workers imported from a legacy worker-manager keep working at `wm run web` (issue 27, item 3).

wm runs behind a Taskcluster deployment (tests/support/fake_tc_deployment.py) whose
worker-manager client, the issuer of every worker's credentials, is the client wm is given. An
imported worker's row (wm.take_over.marks: `importedFrom`, no secret: worker-manager gave it one wm
never saw) is written by the import's writer (`adopt_workers`), and the worker holds credentials
minted as worker-manager mints them (`taskcluster.createTemporaryCredentials` with the issuer's
token). Every call goes through the real `taskcluster` client.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import taskcluster
from sqlalchemy import text

from tests.support.api_stack import ApiStack, module_api, secret_hash
from tests.support.fake_tc_deployment import FakeClient, FakeTaskcluster
from tests.support.tc_client import refused
from tests.support.tc_schemas import check
from wm.db.imported_workers import AdoptedWorker, adopt_workers
from wm.model import WorkerRecord, WorkerState
from wm.take_over.marks import imported_worker_id
from wmsim.fleet import proof_fetcher

ISSUER = "static/taskcluster/worker-manager"
ISSUER_TOKEN = "worker-manager-access-token-of-the-deployment-0123456789"
ADMIN = {"clientId": "project/admin", "accessToken": "admin-token"}
LEGACY = "https://legacy-tc.example.com"
UNKNOWN_SECRET = "SecretWorkerManagerGaveItThatWmNeverSaw00000"  # 44, as slugids make
REFUSED_SECRET = (400, "InputError")


@pytest.fixture(scope="module")
def deployment() -> Iterator[FakeTaskcluster]:
    clients = {ADMIN["clientId"]: FakeClient(ADMIN["accessToken"], ("worker-manager:*",))}
    with FakeTaskcluster(clients, roles={"anonymous": []}) as tc:
        yield tc


@pytest.fixture(scope="module")
def api(
    deployment: FakeTaskcluster, pg_server, template_db, sim_arm_server, tmp_path_factory
) -> Iterator[ApiStack]:
    env = {
        "TASKCLUSTER_ROOT_URL": deployment.root_url,
        "TASKCLUSTER_CLIENT_ID": ISSUER,
        "TASKCLUSTER_ACCESS_TOKEN": ISSUER_TOKEN,
        "WM_OPERATOR_TOKEN": "",
    }
    tmp = tmp_path_factory.mktemp("imported-workers")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp, env=env) as stack:
        deployment.upstream = stack.base_url
        yield stack
        deployment.upstream = None


def client(deployment: FakeTaskcluster, credentials: dict[str, str] | None = None) -> Any:
    options: dict[str, Any] = {"rootUrl": deployment.root_url, "maxRetries": 0}
    if credentials:
        options["credentials"] = dict(credentials)
    return taskcluster.WorkerManager(options)


def minted(worker: WorkerRecord) -> dict[str, str]:
    """The credentials worker-manager gave the worker when it registered there: temporary
    credentials of its issuer client, named for the worker, with worker-manager's ten scopes."""
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    scopes = [
        f"assume:worker-type:{pool}",
        f"assume:worker-pool:{pool}",
        f"assume:worker-id:{group}/{name}",
        f"queue:worker-id:{group}/{name}",
        f"secrets:get:worker-type:{pool}",
        f"secrets:get:worker-pool:{pool}",
        f"queue:claim-work:{pool}",
        f"worker-manager:remove-worker:{pool}/{group}/{name}",
        f"worker-manager:reregister-worker:{pool}/{group}/{name}",
        f"worker-manager:should-worker-terminate:{pool}/{group}/{name}",
    ]
    now = datetime.now(UTC)
    return taskcluster.createTemporaryCredentials(
        ISSUER,
        ISSUER_TOKEN,
        now - timedelta(minutes=15),
        now + timedelta(hours=1),
        scopes,
        name=f"worker/{worker.provider_id}/{pool}/{group}/{name}",
    )


def imported(
    api: ApiStack, state: WorkerState = WorkerState.RUNNING, kind: str = "aws"
) -> WorkerRecord:
    """A worker as `wm import` writes it: worker-manager's names, no cloud id, no secret, and
    none of what worker-manager recorded of its VM (its API shows none of it). Its VM is a real
    one of the simulated cloud, so its proof is genuine."""
    (launched,) = api.launch(kind, 1)
    with api.engine.begin() as conn:  # the VM was worker-manager's: wm has no row of its own
        conn.execute(text("DELETE FROM workers WHERE worker_id = :w"), {"w": launched.worker_id})
        assert launched.tc_worker_id is not None
        (row,) = adopt_workers(
            conn,
            [
                AdoptedWorker(
                    worker_id=imported_worker_id(
                        launched.pool_id, launched.worker_group, launched.tc_worker_id
                    ),
                    pool_id=launched.pool_id,
                    worker_group=launched.worker_group,
                    tc_worker_id=launched.tc_worker_id,
                    provider_id=launched.provider_id,
                    state=state,
                    capacity=1,
                    launch_config_id=launched.launch_config_id,
                    created=launched.created,
                    last_modified=launched.created,
                    expires=datetime.now(UTC) + timedelta(hours=1),
                    registered_at=launched.created if state is WorkerState.RUNNING else None,
                    provider_data={"importedFrom": LEGACY},
                )
            ],
        )
    assert row.cloud_id is None and api.row(row.worker_id)["secret_hash"] is None
    return replace(row, cloud_id=launched.cloud_id)  # what the proof is fetched by


def ids(worker: WorkerRecord) -> dict[str, Any]:
    return {
        "workerPoolId": worker.pool_id,
        "workerGroup": worker.worker_group,
        "workerId": worker.tc_worker_id,
    }


def test_an_imported_worker_reregisters_on_its_own_credentials_then_with_wms_secret(
    api, deployment
):
    worker = imported(api)
    mine = client(deployment, minted(worker))

    renewed = check(
        "reregister-worker-response",
        mine.reregisterWorker({**ids(worker), "secret": UNKNOWN_SECRET}),
    )

    row = api.row(worker.worker_id)
    assert row["secret_hash"] == secret_hash(renewed["secret"])
    assert renewed["credentials"]["clientId"] == minted(worker)["clientId"]
    # From now on it is like any other worker: wm's secret, and only wm's secret.
    again = check(
        "reregister-worker-response",
        client(deployment, renewed["credentials"]).reregisterWorker(
            {**ids(worker), "secret": renewed["secret"]}
        ),
    )
    assert api.row(worker.worker_id)["secret_hash"] == secret_hash(again["secret"])
    stale = {**ids(worker), "secret": UNKNOWN_SECRET}
    assert refused(lambda: mine.reregisterWorker(stale)) == REFUSED_SECRET
    assert api.row(worker.worker_id)["secret_hash"] == secret_hash(again["secret"])


def test_an_imported_worker_that_registered_with_worker_manager_after_the_import_reregisters(
    api, deployment
):
    # The import read it as requested; it registered with worker-manager before the switch,
    # so it holds worker-manager's credentials and never calls registerWorker again. Those
    # credentials are worker-manager's word that it registered: wm renews it, now running.
    worker = imported(api, WorkerState.REQUESTED)
    mine = client(deployment, minted(worker))

    renewed = check(
        "reregister-worker-response",
        mine.reregisterWorker({**ids(worker), "secret": UNKNOWN_SECRET}),
    )

    row = api.row(worker.worker_id)
    assert row["state"] == "running" and row["registered_at"] is not None
    assert row["secret_hash"] == secret_hash(renewed["secret"])


def test_anyone_else_is_refused_as_today(api, deployment):
    worker, other = imported(api), imported(api)
    body = {**ids(worker), "secret": UNKNOWN_SECRET}

    by_operator = refused(lambda: client(deployment, ADMIN).reregisterWorker(body))
    by_other_worker = refused(lambda: client(deployment, minted(other)).reregisterWorker(body))
    unsigned = refused(lambda: client(deployment).reregisterWorker(body))

    assert by_operator == REFUSED_SECRET
    assert by_other_worker == (403, "InsufficientScopes")
    assert unsigned == (403, "InsufficientScopes")
    assert api.row(worker.worker_id)["secret_hash"] is None


def test_a_worker_wm_launched_still_needs_its_secret(api, deployment):
    (worker,) = api.launch("aws", 1)
    answer = client(deployment).registerWorker(api.register_body(worker, api.proof(worker)))
    mine = client(deployment, answer["credentials"])

    assert (
        refused(lambda: mine.reregisterWorker({**ids(worker), "secret": UNKNOWN_SECRET}))
        == REFUSED_SECRET
    )


@pytest.mark.parametrize("kind", ["aws", "gcp"])
def test_an_imported_worker_that_had_not_registered_registers_with_its_genuine_proof(
    api, deployment, kind
):
    # Before any scan adopted its VM: wm knows it by the names worker-manager gave it.
    worker = imported(api, WorkerState.REQUESTED, kind)
    proof = proof_fetcher(
        api.stack.config().provider(worker.provider_id),
        worker.worker_id,
        worker.worker_group,
        worker.cloud_id or "",
        deployment.root_url,  # the rootUrl wm serves (TASKCLUSTER_ROOT_URL): GCE's audience
    )()

    answer = check(
        "register-worker-response",
        client(deployment).registerWorker(api.register_body(worker, proof)),
    )

    row = api.row(worker.worker_id)
    assert row["state"] == "running" and row["secret_hash"] == secret_hash(answer["secret"])


def test_an_imported_worker_asks_reports_and_removes_itself(api, deployment):
    worker = imported(api)
    mine = client(deployment, minted(worker))
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id

    assert mine.shouldWorkerTerminate(pool, group, name) == {"terminate": False, "reason": "none"}
    report = {
        "workerGroup": group,
        "workerId": name,
        "kind": "worker-error",
        "title": "disk full",
        "description": "",
        "extra": {},
    }
    check("worker-pool-error", mine.reportWorkerError(pool, report))
    assert mine.removeWorker(pool, group, name) == {}

    assert api.row(worker.worker_id)["state"] == "stopping"
    assert mine.shouldWorkerTerminate(pool, group, name)["terminate"] is True


def test_an_imported_azure_worker_not_yet_adopted_is_refused_until_its_vm_is_recorded(
    api, deployment
):
    # Azure's proof names the VM by its vmId, which only ARM (by the VM's resource id) or a
    # scan's record gives: before the scan adopts the VM, wm has neither. Refused cleanly,
    # with Azure's words, and no verifier failure.
    worker = imported(api, WorkerState.REQUESTED, "azure")
    proof = proof_fetcher(
        api.stack.config().provider(worker.provider_id),
        worker.worker_id,
        worker.worker_group,
        worker.cloud_id or "",
        deployment.root_url,
    )()

    status = refused(lambda: client(deployment).registerWorker(api.register_body(worker, proof)))

    assert status == (400, "InputError")
    assert api.row(worker.worker_id)["state"] == "requested"
    assert not api.events("identity-verifier-failed")
