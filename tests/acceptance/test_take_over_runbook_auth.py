"""The take-over runbook's steps 1 to 4 as an operator follows them, `wm import` reading the
rootUrl at step 3 (README "Moving a deployment onto wm"; issue 38, item 2), and who decides what
a client may do there.

A Taskcluster deployment runs in the test (tests/support/fake_tc_deployment.py): its auth
service's `authenticateHawk`, answering with scopes the test changes, and the ingress routing
`<rootUrl>/api/worker-manager/`. Its live worker-manager is the stand-in (wmsim/legacy), which
asks that same auth service, as worker-manager does. wm's web runs as an OS process with the
deployment's worker-manager client, and `wm import` runs as the operator types it, both through
the real `taskcluster` client.

That client holds what Taskcluster gives it (TC services/auth/src/static-scopes.json): no list
scopes. Step 3 is then refused, naming the scopes missing and the expression required as
Taskcluster words them; once the deployment grants them, to that client or to its `anonymous`
role (which every caller holds), step 3 runs. Step 4's second import reads worker-manager's own
address: through the rootUrl the moved pool's workers are wm's answer by then.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import taskcluster
from sqlalchemy import create_engine

from tests.support.fake_tc_deployment import FakeClient, FakeTaskcluster
from tests.support.stack import REPO, START_TIMEOUT_S, WmProcess, to_toml
from wm.db import pools as pool_store
from wm.db.workers import list_workers
from wmsim.legacy.manager import LegacyWorkerManager
from wmsim.postgres import free_port

ISSUER = ("static/taskcluster/worker-manager", "issuer-token-" + "x" * 30)
OPERATOR = {"clientId": "project/relops", "accessToken": "relops-token-" + "r" * 30}
# TC services/auth/src/static-scopes.json: what the deployment gives worker-manager's client.
WORKER_MANAGER_SCOPES = (
    "assume:worker-id:*",
    "assume:worker-pool:*",
    "assume:worker-type:*",
    "auth:create-client:worker/*",
    "notify:email:*",
    "queue:claim-work:*",
    "queue:claimed-count:*",
    "queue:pending-count:*",
    "queue:worker-id:*",
    "secrets:get:worker-pool:*",
    "secrets:get:worker-type:*",
    "worker-manager:remove-worker:*",
    "worker-manager:reregister-worker:*",
    "worker-manager:should-worker-terminate:*",
)
# What `wm import` reads (listWorkerPools, listWorkersForWorkerPool) and the step 2 check.
LIST_SCOPES = ("worker-manager:list-worker-pools", "worker-manager:list-workers:*")
# What community-tc's `anonymous` role grants on worker-manager (mozilla/community-tc-config
# config/grants.yml): reads only.
ANONYMOUS_ROLE = (
    "worker-manager:get-worker-pool:*",
    "worker-manager:get-worker:*",
    "worker-manager:list-providers",
    "worker-manager:list-worker-pool-errors:*",
    "worker-manager:list-worker-pools",
    "worker-manager:list-workers:*",
)
MOVING, STAYING = "legacy-aws", "other-aws"


def definition(pool_id: str, provider_id: str) -> dict[str, Any]:
    return {
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "description": "a legacy pool",
        "owner": "relops@example.com",
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": 4,
            "launchConfigs": [
                {
                    "region": "us-east-1",
                    "launchConfig": {"ImageId": "ami-1", "InstanceType": "m5.large"},
                    "workerManager": {"launchConfigId": "lc-1"},
                }
            ],
        },
    }


@pytest.fixture
def deployment() -> Iterator[FakeTaskcluster]:
    clients = {
        ISSUER[0]: FakeClient(ISSUER[1], WORKER_MANAGER_SCOPES),
        OPERATOR["clientId"]: FakeClient(OPERATOR["accessToken"], ("worker-manager:*",)),
    }
    with FakeTaskcluster(clients, roles={"anonymous": []}) as tc:
        yield tc


@pytest.fixture
def legacy(deployment: FakeTaskcluster) -> Iterator[LegacyWorkerManager]:
    """The deployment's live worker-manager, its address behind the rootUrl (step 0)."""
    manager = LegacyWorkerManager(
        deployment.root_url,
        *ISSUER,
        providers={MOVING: "aws", STAYING: "aws"},
        auth_url=deployment.root_url,
    )
    manager.start()
    manager.load_pools([definition("proj/moving", MOVING), definition("proj/staying", STAYING)])
    manager.add_worker("proj/moving", "us-east-1", "i-1", state="running", launch_config_id="lc-1")
    manager.add_worker("proj/moving", "us-east-1", "i-2", state="requested")
    manager.add_worker("proj/staying", "us-east-1", "i-3", state="running")
    deployment.upstream = manager.base_url
    yield manager
    manager.stop()


@pytest.fixture
def web_port() -> int:
    return free_port()


@pytest.fixture
def wm_config(
    tmp_path: Path, deployment: FakeTaskcluster, legacy: LegacyWorkerManager, web_port: int
) -> Path:
    """Step 1's config: the provider that moves, adopting worker-manager's VMs, the same
    rootUrl, forwarding what is not wm's to worker-manager's own address."""
    path = tmp_path / "config.toml"
    config = {
        "deployment_id": "runbook-test",
        "root_url": deployment.root_url,
        "web": {"port": web_port},
        "take_over": {"legacy_url": legacy.base_url},
        "providers": [
            {"id": MOVING, "kind": "aws", "regions": ["us-east-1"], "adopt_legacy": True},
        ],
    }
    path.write_text(to_toml(config))
    return path


def platform_environment(deployment: FakeTaskcluster) -> dict[str, str]:
    """What step 1 gives wm's processes: the deployment and its worker-manager client."""
    return {
        "TASKCLUSTER_ROOT_URL": deployment.root_url,
        "TASKCLUSTER_CLIENT_ID": ISSUER[0],
        "TASKCLUSTER_ACCESS_TOKEN": ISSUER[1],
        "WM_OPERATOR_TOKEN": "",
    }


@pytest.fixture
def wm_web(
    wm_config: Path, web_port: int, db_url: str, deployment: FakeTaskcluster
) -> Iterator[str]:
    """Step 1: wm's web deployed and healthy, not yet behind the rootUrl; its address."""
    web = WmProcess.start(["run", "web"], wm_config, db_url, env=platform_environment(deployment))
    url = f"http://127.0.0.1:{web_port}"
    try:
        web.wait_for(lambda: healthy(url), START_TIMEOUT_S, "wm's web to answer")
        yield url
    finally:
        web.kill()


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def operator(root_url: str) -> Any:
    return taskcluster.WorkerManager(
        {"rootUrl": root_url, "credentials": dict(OPERATOR), "maxRetries": 0}
    )


def wm_import(config: Path, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`wm import` as the runbook's step 3 types it, with step 1's client."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TASKCLUSTER_") and k not in ("DATABASE_URL", "WM_CONFIG")
    }
    env |= {"DATABASE_URL": db_url, "WM_CONFIG": str(config)}
    env |= {"TASKCLUSTER_CLIENT_ID": ISSUER[0], "TASKCLUSTER_ACCESS_TOKEN": ISSUER[1]}
    return subprocess.run(
        [sys.executable, "-m", "wm", "import", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def held(db_url: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The pool ids and (worker id, state) rows wm holds."""
    engine = create_engine(db_url)
    try:
        pools = sorted(p.pool_id for p in pool_store.load_pools(engine))
        workers = sorted((w.worker_id, w.state.value) for w in list_workers(engine, limit=None))
        return pools, workers
    finally:
        engine.dispose()


def grant_the_client(deployment: FakeTaskcluster) -> None:
    deployment.clients[ISSUER[0]] = FakeClient(ISSUER[1], WORKER_MANAGER_SCOPES + LIST_SCOPES)


def grant_the_anonymous_role(deployment: FakeTaskcluster) -> None:
    deployment.roles["anonymous"] = list(ANONYMOUS_ROLE)


def step_2(deployment: FakeTaskcluster, legacy: LegacyWorkerManager, wm_web: str) -> None:
    """The rootUrl's worker-manager routes go to wm; everything is still worker-manager's.
    Check: listWorkerPools through the rootUrl answers what worker-manager answers."""
    deployment.upstream = wm_web
    through = operator(deployment.root_url).listWorkerPools()["workerPools"]
    direct = operator(legacy.base_url).listWorkerPools()["workerPools"]
    assert sorted(p["workerPoolId"] for p in through) == ["proj/moving", "proj/staying"]
    assert through == direct


def step_3(deployment: FakeTaskcluster, wm_config: Path, db_url: str) -> None:
    """`wm import --from <rootUrl> --provider P --dry-run`, then without --dry-run: the moving
    provider's pool and its live workers are wm's, the other pool is still worker-manager's."""
    args = ("--from", deployment.root_url, "--provider", MOVING)
    dry = wm_import(wm_config, db_url, *args, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "proj/moving" in dry.stdout and "proj/staying" not in dry.stdout
    assert held(db_url) == ([], [])

    done = wm_import(wm_config, db_url, *args)

    assert done.returncode == 0, done.stdout + done.stderr
    assert held(db_url) == (
        ["proj/moving"],
        [("proj/moving/us-east-1/i-1", "running"), ("proj/moving/us-east-1/i-2", "requested")],
    )
    assert operator(deployment.root_url).workerPool("proj/moving")["providerId"] == MOVING


def step_4(legacy: LegacyWorkerManager, wm_config: Path, db_url: str) -> None:
    """worker-manager lets the provider go, having launched one more VM in between; the
    import again, from worker-manager's own address, takes its worker."""
    legacy.add_worker("proj/moving", "us-east-1", "i-9", state="requested")
    legacy.remove_provider(MOVING)

    again = wm_import(wm_config, db_url, "--from", legacy.base_url, "--provider", MOVING)

    assert again.returncode == 0, again.stdout + again.stderr
    assert ("proj/moving/us-east-1/i-9", "requested") in held(db_url)[1]


def test_the_runbook_runs_through_the_rootUrl_on_what_the_anonymous_role_grants(
    deployment, legacy, wm_config, wm_web, db_url
):
    # The issue's deployment: worker-manager's client as Taskcluster makes it, the anonymous
    # role granting the lists (community-tc's). Step 1 is the fixtures.
    grant_the_anonymous_role(deployment)

    step_2(deployment, legacy, wm_web)
    step_3(deployment, wm_config, db_url)
    step_4(legacy, wm_config, db_url)


@pytest.mark.parametrize("grant", [grant_the_client, grant_the_anonymous_role])
def test_step_3_refused_names_the_scopes_missing_until_the_deployment_grants_them(
    deployment, legacy, wm_config, wm_web, db_url, grant
):
    deployment.upstream = wm_web  # step 2
    args = ("--from", deployment.root_url, "--provider", MOVING, "--dry-run")

    refused = wm_import(wm_config, db_url, *args)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = refused.stderr
    assert "403 InsufficientScopes" in said
    assert (
        f"Client ID {ISSUER[0]} does not have sufficient scopes and is missing the following "
        "scopes:\n\n```\nworker-manager:list-worker-pools\n```" in said
    ), said
    assert (
        "This request requires the client to satisfy the following scope expression:\n\n"
        "```\nworker-manager:list-worker-pools\n```" in said
    ), said
    assert held(db_url) == ([], [])

    grant(deployment)

    step_2(deployment, legacy, wm_web)
    step_3(deployment, wm_config, db_url)
    step_4(legacy, wm_config, db_url)


def test_behind_a_deployment_the_web_process_refuses_an_operator_token_of_its_own(
    wm_config, db_url, deployment
):
    env = {**platform_environment(deployment), "WM_OPERATOR_TOKEN": "a-token-of-wms-own"}
    web = WmProcess.start(["run", "web"], wm_config, db_url, env=env)
    try:
        code = web.popen.wait(timeout=START_TIMEOUT_S)
    finally:
        web.kill()

    assert code == 2
    said = "".join(web.raw)
    assert "WM_OPERATOR_TOKEN (environment): standalone only" in said, said
    assert "a-token-of-wms-own" not in said
