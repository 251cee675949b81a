"""`wm import` as an operator runs it: a subprocess of the real CLI reading a legacy
worker-manager stand-in (wmsim/legacy) through the real `taskcluster` client, into Postgres."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from tests.support.legacy_deployment import (
    AZURE_LOCATION,
    LEGACY_PROVIDERS,
    legacy_pools,
    legacy_providers,
)
from tests.support.real_pools import definitions as real_definitions
from tests.support.real_pools import raw_config
from tests.support.stack import REPO, to_toml
from wm.db import pools as pool_store
from wm.db import tasks as task_store
from wm.db.workers import list_workers
from wm.kinds import KINDS
from wm.pools.definition import derive_launch_config_id
from wm.take_over.marks import IMPORTED_FROM, imported_worker_id
from wmsim.agent import AgentSettings
from wmsim.legacy.auth import PermanentClient
from wmsim.legacy.manager import LegacyWorkerManager
from wmsim.legacy.stack import LegacyStack

ISSUER = ("static/taskcluster/worker-manager", "issuer-token-" + "x" * 30)
OPERATOR = ("wm-operator", "operator-token-" + "o" * 29)
STANDIN_PROVIDERS = {"legacy-aws": "aws", "other-aws": "aws", "hand": "static"}
CONFIG: dict[str, Any] = {
    "deployment_id": "import-test",
    "providers": [
        {"id": "legacy-aws", "kind": "aws", "regions": ["us-east-1"], "adopt_legacy": True},
        {"id": "other-aws", "kind": "aws", "regions": ["us-east-1"], "adopt_legacy": True},
        {"id": "plain-aws", "kind": "aws", "regions": ["us-east-1"]},
        {"id": "hand", "kind": "static"},
    ],
}


def definition(pool_id: str, provider: str = "legacy-aws", image: str = "ami-1", **top: Any):
    config: dict[str, Any] = {
        "minCapacity": 0,
        "maxCapacity": 8,
        "launchConfigs": [
            {
                "region": "us-east-1",
                "launchConfig": {"ImageId": image, "InstanceType": "m5.large"},
                "workerManager": {"launchConfigId": f"lc-{image}"},
            }
        ],
    }
    return {
        "workerPoolId": pool_id,
        "providerId": provider,
        "description": "a legacy pool",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {"workerConfig": {}} if provider == "hand" else config,
        **top,
    }


@pytest.fixture
def legacy() -> Iterator[LegacyWorkerManager]:
    manager = LegacyWorkerManager(None, *ISSUER, providers=STANDIN_PROVIDERS)
    manager.add_client(
        *OPERATOR, ["worker-manager:list-worker-pools", "worker-manager:list-workers:*"]
    )
    manager.start()
    yield manager
    manager.stop()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(to_toml(CONFIG))
    return path


def run_import(
    db_url: str,
    config: Path,
    *args: str,
    credentials: tuple[str, str] | None = OPERATOR,
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TASKCLUSTER_") and k not in ("DATABASE_URL", "WM_CONFIG")
    }
    env |= {"DATABASE_URL": db_url, "WM_CONFIG": str(config)}
    if credentials:
        env |= {"TASKCLUSTER_CLIENT_ID": credentials[0], "TASKCLUSTER_ACCESS_TOKEN": credentials[1]}
    return subprocess.run(
        [sys.executable, "-m", "wm", "import", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
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


def fleet(legacy: LegacyWorkerManager) -> None:
    """Two pools of the provider moving, one of another provider, a static pool; workers in
    every state."""
    legacy.load_pools(
        [
            definition("proj/a"),
            definition("proj/b", image="ami-2"),
            definition("proj/other", "other-aws"),
            definition("proj/rack", "hand"),
        ]
    )
    legacy.add_worker("proj/a", "us-east-1", "i-1", state="running", launch_config_id="lc-ami-1")
    legacy.add_worker("proj/a", "us-east-1", "i-2", state="requested", launch_config_id="lc-ami-1")
    legacy.add_worker("proj/a", "us-east-1", "i-3", state="stopped", launch_config_id="lc-ami-1")
    legacy.add_worker("proj/b", "us-east-1", "i-4", state="stopping")  # no launchConfigId
    legacy.add_worker("proj/other", "us-east-1", "i-5", state="running")
    legacy.add_worker("proj/rack", "rack", "box-1", state="running", provider_id="hand")


def test_a_dry_run_prints_the_plan_and_writes_nothing(legacy, db_url, config_path):
    fleet(legacy)
    done = run_import(
        db_url, config_path, "--from", legacy.base_url, "--provider", "legacy-aws", "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"importing from {legacy.base_url}: providers legacy-aws",
        "pool proj/a (legacy-aws): new; workers new: requested 1, running 1; already known: none",
        "pool proj/b (legacy-aws): new; workers new: stopping 1; already known: none",
        "2 pools: 2 new, 0 changed, 0 unchanged; workers: 3 new, 0 already known, 0 static left",
        "dry run: nothing written",
    ]
    assert held(db_url) == ([], [])


def test_import_then_import_again_adds_only_what_changed(legacy, db_url, config_path):
    fleet(legacy)
    args = ("--from", legacy.base_url, "--provider", "legacy-aws", "--provider", "hand")
    first = run_import(db_url, config_path, *args)
    assert first.returncode == 0, first.stderr
    assert (
        first.stdout.splitlines()[-1]
        == "written: 6 pool and launch config change(s), 3 worker row(s)"
    )
    assert (
        "pool proj/rack (hand): new; workers new: none; already known: none; static workers left: "
        "1 (rack/box-1): worker-manager keeps their staticSecret; make each again with "
        "createWorker"
    ) in first.stdout
    assert held(db_url) == (
        ["proj/a", "proj/b", "proj/rack"],
        [
            ("proj/a/us-east-1/i-1", "running"),
            ("proj/a/us-east-1/i-2", "requested"),
            ("proj/b/us-east-1/i-4", "stopping"),
        ],
    )
    engine = create_engine(db_url)
    try:
        (i4,) = [w for w in list_workers(engine, limit=None) if w.tc_worker_id == "i-4"]
    finally:
        engine.dispose()
    assert (i4.launch_config_id, i4.provider_data[IMPORTED_FROM]) == ("lc-ami-2", legacy.base_url)

    legacy.add_worker("proj/a", "us-east-1", "i-6", state="running", launch_config_id="lc-ami-1")
    legacy.load_pools([definition("proj/b", image="ami-2", description="renamed")])
    again = run_import(db_url, config_path, *args, "--json")
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert answer["workers_written"] == 1 and answer["pool_changes"] == ["update pool proj/b"]
    verdicts = {
        p["pool_id"]: (p["verdict"], p["new_workers"], p["known_workers"]) for p in answer["pools"]
    }
    assert verdicts == {
        "proj/a": ("unchanged", {"running": 1}, {"requested": 1, "running": 1}),
        "proj/b": ("changed", {}, {"stopping": 1}),
        "proj/rack": ("unchanged", {}, {}),
    }
    assert len(held(db_url)[1]) == 4


def test_pools_of_other_providers_stay_where_they_are(legacy, db_url, config_path):
    fleet(legacy)
    done = run_import(db_url, config_path, "--from", legacy.base_url, "--provider", "legacy-aws")
    assert done.returncode == 0, done.stderr
    pools, workers = held(db_url)
    assert "proj/other" not in pools and all("i-5" not in w for w, _ in workers)
    # The legacy deployment still has its pool of the other provider, and its worker.
    assert [w.worker_id for w in legacy.workers() if w.worker_pool_id == "proj/other"] == ["i-5"]


@pytest.mark.parametrize(
    ("scenario", "providers", "stderr"),
    [
        (
            "a provider wm's config does not have",
            ["legacy-aws", "azure2"],
            "--provider azure2: wm's config has no provider 'azure2'",
        ),
        (
            "a cloud provider without adopt_legacy",
            ["plain-aws"],
            "--provider plain-aws: providers.plain-aws.adopt_legacy is not true",
        ),
    ],
)
def test_a_provider_that_cannot_be_imported_is_refused(
    legacy, db_url, config_path, scenario, providers, stderr
):
    fleet(legacy)
    flags = [arg for p in providers for arg in ("--provider", p)]
    done = run_import(db_url, config_path, "--from", legacy.base_url, *flags)
    assert done.returncode == 2
    assert "wm import (nothing written)" in done.stderr and stderr in done.stderr
    assert held(db_url) == ([], [])


def test_a_bad_legacy_definition_is_refused_with_pool_and_key_path(legacy, db_url, config_path):
    fleet(legacy)
    legacy.load_pools([definition("proj/bad", owner="nobody")])
    done = run_import(db_url, config_path, "--from", legacy.base_url, "--provider", "legacy-aws")
    assert done.returncode == 2
    assert "  pool proj/bad: owner" in done.stderr
    assert held(db_url) == ([], [])


def test_a_worker_whose_launch_config_wm_cannot_resolve_is_refused(legacy, db_url, config_path):
    fleet(legacy)
    legacy.add_worker("proj/a", "us-east-1", "i-9", state="running", launch_config_id="lc-gone")
    done = run_import(db_url, config_path, "--from", legacy.base_url, "--provider", "legacy-aws")
    assert done.returncode == 2
    assert "worker proj/a/us-east-1/i-9: its launchConfigId 'lc-gone'" in done.stderr
    assert held(db_url) == ([], [])


def test_a_refusing_legacy_api_is_named_with_its_answer(legacy, db_url, config_path):
    fleet(legacy)
    done = run_import(
        db_url,
        config_path,
        "--from",
        legacy.base_url,
        "--provider",
        "legacy-aws",
        credentials=(OPERATOR[0], "wrong-token-" + "w" * 32),
    )
    assert done.returncode == 2
    assert (
        f"error: {legacy.base_url}/api/worker-manager/v1/worker-pools: worker-manager "
        "answered 401" in done.stderr
    )
    assert done.stderr.rstrip().endswith("(nothing written)")
    assert held(db_url) == ([], [])


def test_an_unreachable_legacy_api_is_named(db_url, config_path):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    done = run_import(db_url, config_path, "--from", url, "--provider", "legacy-aws")
    assert done.returncode == 2
    assert f"error: {url}/api/worker-manager/v1/worker-pools: cannot be reached" in done.stderr
    assert held(db_url) == ([], [])


def legacy_workers(manager, served, providers) -> tuple[int, int]:
    """A running worker in the first pool of each provider, as worker-manager records one it
    launched (its launch config's derived id, worker group and capacity); a static one made
    with createWorker. Returns (cloud workers, static workers)."""
    kinds = {p["id"]: p["kind"] for p in providers}
    cloud = static = 0
    for provider_id, kind in kinds.items():
        pool = next(d for d in served if d["providerId"] == provider_id)
        if KINDS[kind].hand_made:
            manager.add_worker(pool["workerPoolId"], "rack", "box-1", state="running")
            static += 1
            continue
        launch_config = pool["config"]["launchConfigs"][0]
        manager_part = launch_config.get("workerManager") or {}
        manager.add_worker(
            pool["workerPoolId"],
            KINDS[kind].worker_group(launch_config),
            f"vm-{provider_id}",
            state="running",
            capacity=manager_part.get("capacityPerInstance", 1),
            # The id the definition gives, else the one worker-manager derives (db 0105).
            launch_config_id=manager_part.get("launchConfigId")
            or derive_launch_config_id(pool["workerPoolId"], launch_config),
        )
        cloud += 1
    return cloud, static


@pytest.mark.parametrize(("deployment", "pools"), [("firefoxci", 384), ("community-tc", 54)])
def test_the_import_takes_the_real_deployments_pools(tmp_path, db_url, deployment, pools):
    # The deployment's own pool definitions, served by a stand-in, into a wm configured with
    # the deployment's providers (each cloud one adopting legacy VMs).
    data = raw_config(deployment)
    providers = [
        {**p, "adopt_legacy": True} if KINDS[p["kind"]].scanned else p for p in data["providers"]
    ]
    config = tmp_path / "config.toml"
    config.write_text(to_toml({**data, "providers": providers}))
    tc_types = {"aws": "aws", "gcp": "google", "azure": "azure", "static": "static"}
    manager = LegacyWorkerManager(
        None, *ISSUER, providers={p["id"]: tc_types[p["kind"]] for p in providers}
    )
    manager.add_client(*OPERATOR, ["*"])
    served = real_definitions(deployment)
    manager.load_pools(served)
    cloud, static = legacy_workers(manager, served, providers)
    flags = [arg for p in providers for arg in ("--provider", p["id"])]
    with manager:
        first = run_import(db_url, config, "--from", manager.base_url, *flags)
        assert first.returncode == 0, first.stderr
        assert first.stdout.splitlines()[-2] == (
            f"{pools} pools: {pools} new, 0 changed, 0 unchanged; workers: {cloud} new, "
            f"0 already known, {static} static left"
        )
        pool_ids, workers = held(db_url)
        assert pool_ids == sorted(d["workerPoolId"] for d in served)
        assert len(workers) == cloud
        again = run_import(db_url, config, "--from", manager.base_url, *flags)
    assert again.returncode == 0, again.stderr
    assert (
        f"{pools} pools: 0 new, 0 changed, {pools} unchanged; workers: 0 new, {cloud} already known"
    ) in again.stdout
    assert again.stdout.splitlines()[-1] == (
        "written: 0 pool and launch config change(s), 0 worker row(s)"
    )


def test_the_import_takes_a_live_legacy_fleets_azure_workers(
    tmp_path, engine, db_url, sim_ec2, sim_gce, sim_arm
):
    # A legacy deployment on the three simulated clouds with a worker busy on each; wm is
    # configured with the Azure provider alone, adopting worker-manager's VMs.
    providers = legacy_providers(sim_ec2, sim_gce, sim_arm)
    for _, _, _, pool_id, _ in LEGACY_PROVIDERS:
        task_store.submit_tasks(engine, pool_id, 1, 60.0)  # long: the workers stay running
    config = tmp_path / "config.toml"
    config.write_text(
        to_toml(
            {
                "deployment_id": "import-live",
                "providers": [
                    {
                        "id": "azure2",
                        "kind": "azure",
                        "subscription_id": "sub",
                        "resource_group": "rg",
                        "regions": [AZURE_LOCATION],
                        "adopt_legacy": True,
                    }
                ],
            }
        )
    )
    with LegacyStack.start(
        engine=engine,
        providers=providers,
        issuer_client_id=ISSUER[0],
        issuer_access_token=ISSUER[1],
        pools=legacy_pools(max_capacity=1),
        agent_settings=AgentSettings(idle_timeout_s=30, poll_s=0.05),
        clients={OPERATOR[0]: PermanentClient(OPERATOR[1], ("worker-manager:list-*",))},
    ) as legacy:
        manager = legacy.manager
        deadline = time.monotonic() + 60
        while len(manager.workers(state="running")) < 3:
            assert time.monotonic() < deadline, "three legacy workers running"
            time.sleep(0.1)
        (azure,) = [w for w in manager.workers() if w.provider_id == "azure2"]
        done = run_import(db_url, config, "--from", manager.base_url, "--provider", "azure2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "pool proj-legacy/win-azure (azure2): new; workers new: running 1; already known: none",
        "1 pools: 1 new, 0 changed, 0 unchanged; workers: 1 new, 0 already known, 0 static left",
        "written: 2 pool and launch config change(s), 1 worker row(s)",
    ]
    (row,) = list_workers(engine, limit=None)
    assert (row.worker_id, row.tc_worker_id, row.state.value, row.launch_config_id) == (
        imported_worker_id(*azure.key),
        azure.worker_id,
        "running",
        azure.launch_config_id,
    )
    # As the API tells them: to the millisecond.
    assert (row.created, row.registered_at) == (ms(azure.created), ms(azure.last_modified))


def ms(moment):
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
