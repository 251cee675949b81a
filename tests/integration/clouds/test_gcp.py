"""The GCP provider against the simulated GCE, through the real google-cloud-compute client.

Every call below is a real HTTP request from the SDK to wmsim.gcp.gce on 127.0.0.1; nothing is
patched. Request counts come from the simulation's own counter.
"""

from __future__ import annotations

import json
import logging
import math
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from werkzeug.test import Client

from tests.fixtures.sim_gce import (
    GCE_DEPLOYMENT,
    GCE_OTHER_ZONE,
    GCE_PROJECT,
    GCE_ROOT_URL,
    GCE_WORKER_ACCOUNT,
    GCE_ZONE,
    gcp_config,
)
from wm.errors import CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec, WorkerRef, WorkerState
from wm.providers.base import TAG_DEPLOYMENT, TAG_WORKER, LaunchBatch, LaunchIntent, TerminateResult
from wm.providers.gcp.errors import error_scope
from wm.providers.gcp.provider import GcpProvider, make
from wmsim.config import SimCloudConfig
from wmsim.gcp.gce import SimGce, serve
from wmsim.gcp.launch_config import example_launch_config

POOL = "proj-ci/linux-large"  # has "/", so its label is sanitised and metadata keeps it
IMAGE = "projects/debian-cloud/global/images/family/debian-12"
LC_ID = "lc-0123456789abcdef"
WORKER_CONFIG = {"queue": "linux-large"}


def spec(*, zone: str = GCE_ZONE, spot: bool = False, machine_type: str = "e2-small") -> LaunchSpec:
    return LaunchSpec(
        launch_config_id=LC_ID,
        region=zone,
        capacity_per_worker=1,
        launch_config=example_launch_config(
            zone,
            machine_type=machine_type,
            spot=spot,
            launch_config_id=LC_ID,
            worker_config=WORKER_CONFIG,
        ),
        worker_config=WORKER_CONFIG,
        pool_owner="CI Team <ci@example.com>",
        pool_description="Linux CI workers",
    )


def batch(count: int, *, prefix: str = "w", token: str = "t", **spec_args: Any) -> LaunchBatch:
    intents = tuple(
        LaunchIntent(f"{prefix}-{i:04d}", f"{token}-{prefix}-{i}") for i in range(count)
    )
    return LaunchBatch(POOL, spec(**spec_args), intents, batch_token=f"batch-{prefix}-{token}")


def refs(results: Any, zone: str = GCE_ZONE) -> list[WorkerRef]:
    return [WorkerRef(r.worker_id, zone, cloud_id=r.cloud_id) for r in results]


def raw_client(sim: SimGce) -> compute_v1.InstancesClient:
    return compute_v1.InstancesClient(
        credentials=AnonymousCredentials(), client_options=ClientOptions(api_endpoint=sim.endpoint)
    )


def raw_insert(sim: SimGce, name: str, labels: dict[str, str]) -> None:
    """Someone else's VM, made with the plain SDK."""
    instance = compute_v1.Instance(
        name=name,
        machine_type=f"zones/{GCE_ZONE}/machineTypes/e2-micro",
        labels=labels,
        disks=[
            compute_v1.AttachedDisk(
                boot=True,
                initialize_params=compute_v1.AttachedDiskInitializeParams(source_image=IMAGE),
            )
        ],
    )
    raw_client(sim).insert_unary(project=GCE_PROJECT, zone=GCE_ZONE, instance_resource=instance)


@pytest.fixture
def second_sim() -> Iterator[SimGce]:
    sim = SimGce().start()
    try:
        yield sim
    finally:
        sim.stop()


# 1 ------------------------------------------------------------------------------------------------


def test_a_created_batch_is_listed_back_across_pages(sim_gce: SimGce, gcp_provider: GcpProvider):
    sim_gce.faults.behaviour.update(page_size_max=3)

    results = gcp_provider.create(batch(7))
    listed = gcp_provider.list_instances(GCE_ZONE)

    assert [r.error for r in results] == [None] * 7
    assert [r.launch_index for r in results] == list(range(7))
    assert sim_gce.faults.counts()["instances.list"] == 3  # 3 + 3 + 1
    by_worker = {i.worker_id: i for i in listed}
    assert sorted(by_worker) == [f"w-{i:04d}" for i in range(7)]
    for result in results:
        seen = by_worker[result.worker_id]
        assert seen.cloud_id == result.cloud_id
        assert seen.pool_id == POOL  # the original, from metadata: the label had to lose "/"
        assert seen.launch_config_id == "lc-0123456789abcdef"
        assert seen.batch_token == "batch-w-t"
        assert seen.region == GCE_ZONE
        assert seen.state is WorkerState.RUNNING
        assert seen.launched_at is not None
    assert gcp_provider.list_instances(GCE_OTHER_ZONE) == []


def test_the_instance_carries_labels_taskcluster_metadata_service_account_and_spot(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    (result,) = gcp_provider.create(batch(1, spot=True))

    instance = raw_client(sim_gce).get(project=GCE_PROJECT, zone=GCE_ZONE, instance="w-0000")

    assert str(instance.id) == result.cloud_id
    # worker-runner's workerId is the numeric instance id (metadata instance/id).
    assert result.tc_worker_id == str(instance.id)
    assert dict(instance.labels) == {
        "wm-deployment": GCE_DEPLOYMENT,
        "wm-provider": "gcp-test",
        "wm-pool": "proj-ci_linux-large",
        "wm-worker": "w-0000",
        "wm-launch-config": "lc-0123456789abcdef",
        "wm-batch": "batch-w-t",
        "created-by": "taskcluster-wm-gcp-test",
        "managed-by": "taskcluster",
        "worker-pool-id": "proj-ci-linux-large",
        "owner": "ci-team--ci-example-com-",
        "launch-config-id": "lc-0123456789abcdef",
    }
    metadata = {item.key: item.value for item in instance.metadata.items}
    # Exactly what worker-manager writes (google.js); worker-runner reads this item.
    assert json.loads(metadata["taskcluster"]) == {
        "workerPoolId": POOL,
        "providerId": "gcp-test",
        "workerGroup": GCE_ZONE,
        "rootUrl": GCE_ROOT_URL,
        "workerConfig": {"queue": "linux-large"},
    }
    assert metadata["wm-pool"] == POOL
    # The account its identity tokens are minted for, with worker-manager's one scope.
    [account] = instance.service_accounts
    assert account.email == GCE_WORKER_ACCOUNT
    assert list(account.scopes) == ["https://www.googleapis.com/auth/cloud-platform"]
    assert instance.scheduling.provisioning_model == "SPOT"
    assert instance.machine_type.endswith(f"zones/{GCE_ZONE}/machineTypes/e2-small")


# 2 ------------------------------------------------------------------------------------------------


def eventually(check: Any, timeout_s: float = 3.0) -> Any:
    """Poll `check` until it returns something truthy (timings on a busy machine vary)."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)
    return result


def test_states_move_from_booting_to_running_and_from_deleting_to_gone(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    sim_gce.faults.behaviour.update(boot_s=0.6, delete_s=0.6)
    results = gcp_provider.create(batch(2))

    def states() -> set[WorkerState]:
        return {i.state for i in gcp_provider.list_instances(GCE_ZONE)}

    assert states() == {WorkerState.REQUESTED}  # PROVISIONING, then STAGING
    eventually(lambda: states() == {WorkerState.RUNNING})

    first = gcp_provider.terminate(refs(results))
    assert [t.gone for t in first] == [False, False]  # GCE has not finished deleting
    assert states() == {WorkerState.STOPPING}
    assert [vm.state for vm in sim_gce.instances()] == ["stopping", "stopping"]

    def all_gone() -> list[TerminateResult] | None:
        again = gcp_provider.terminate(refs(results))
        return again if all(t.gone for t in again) else None

    second = eventually(all_gone)
    assert [t.error for t in second] == [None, None]
    assert gcp_provider.list_instances(GCE_ZONE) == []
    assert sim_gce.instances() == []


def test_a_delete_that_finishes_at_once_is_confirmed_gone_in_the_same_call(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    results = gcp_provider.create(batch(2))

    terminated = gcp_provider.terminate(refs(results))

    assert [t.gone for t in terminated] == [True, True]
    assert sim_gce.instances() == []
    # One ownership check and one delete per worker.
    assert sim_gce.faults.counts()["instances.get"] == 2
    assert sim_gce.faults.counts()["instances.delete"] == 2


# 3 ------------------------------------------------------------------------------------------------


def test_lookup_finds_existing_workers_and_leaves_missing_ones_out(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    (created,) = gcp_provider.create(batch(1))
    missing = WorkerRef("w-never-made", GCE_ZONE)
    no_cloud_id_yet = WorkerRef("w-0000", GCE_ZONE)  # an intent whose create never returned

    found = gcp_provider.lookup([missing, no_cloud_id_yet])

    assert list(found) == ["w-0000"]
    assert found["w-0000"].cloud_id == created.cloud_id
    assert found["w-0000"].state is WorkerState.RUNNING
    assert found["w-0000"].pool_id == POOL


def test_a_vm_removed_out_of_band_is_not_found_and_counts_as_gone(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    results = gcp_provider.create(batch(1))
    sim_gce.remove(results[0].cloud_id)

    assert gcp_provider.lookup(refs(results)) == {}
    assert [t.gone for t in gcp_provider.terminate(refs(results))] == [True]
    assert "instances.delete" not in sim_gce.faults.counts()


# 4 ------------------------------------------------------------------------------------------------


def seed(sim: SimGce, count: int) -> None:
    """Insert `count` labelled instances through the simulation's WSGI app, in process.

    Same request path as the SDK's inserts, minus HTTP and the SDK: 0.3 ms an instance instead
    of ~3 ms, so 2000 instances take under a second.
    """
    client = Client(sim)
    for i in range(count):
        body = {
            "name": f"s-{i:05d}",
            "machineType": f"zones/{GCE_ZONE}/machineTypes/e2-small",
            "disks": [{"boot": True, "initializeParams": {"sourceImage": IMAGE}}],
            "labels": {TAG_DEPLOYMENT: GCE_DEPLOYMENT, TAG_WORKER: f"s-{i:05d}"},
        }
        path = f"/compute/v1/projects/{GCE_PROJECT}/zones/{GCE_ZONE}/instances"
        assert client.post(path, json=body).status_code == 200
    sim.faults.reset_counts()


@pytest.mark.parametrize(("page_size_max", "count"), [(None, 2000), (300, 2000), (None, 1001)])
def test_listing_costs_one_call_per_page_at_the_largest_page_size(
    sim_gce: SimGce, gcp_provider: GcpProvider, page_size_max: int | None, count: int
):
    seed(sim_gce, count)
    sim_gce.faults.behaviour.update(page_size_max=page_size_max)

    listed = gcp_provider.list_instances(GCE_ZONE)

    assert len(listed) == count
    page = page_size_max or 500  # GCE's own maximum, which the provider asks for
    assert sim_gce.faults.counts() == {"instances.list": math.ceil(count / page)}


# 5 ------------------------------------------------------------------------------------------------


def test_a_repeated_create_makes_no_second_vm(sim_gce: SimGce, gcp_provider: GcpProvider):
    again = batch(3)

    first = gcp_provider.create(again)
    second = gcp_provider.create(again)  # e.g. the provisioner crashed before recording ids

    assert [r.cloud_id for r in second] == [r.cloud_id for r in first]
    assert all(r.error is None for r in second)
    assert len(sim_gce.instances()) == 3
    assert sim_gce.faults.counts()["instances.insert"] == 6


def test_a_create_whose_request_id_was_forgotten_adopts_the_existing_vm(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    first = gcp_provider.create(batch(2))

    # Same workers, new tokens: GCE answers 409 alreadyExists; the VM is ours, so it is used.
    second = gcp_provider.create(batch(2, token="new"))

    assert [(r.cloud_id, r.error) for r in second] == [(r.cloud_id, None) for r in first]
    assert len(sim_gce.instances()) == 2


# 6 ------------------------------------------------------------------------------------------------


def test_other_deployments_and_unlabelled_vms_are_never_seen_or_touched(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    ours = gcp_provider.create(batch(1))
    raw_insert(sim_gce, "w-0001", {TAG_DEPLOYMENT: "other-deploy", TAG_WORKER: "w-0001"})
    raw_insert(sim_gce, "w-0002", {})
    theirs = [WorkerRef("w-0001", GCE_ZONE), WorkerRef("w-0002", GCE_ZONE)]

    listed = gcp_provider.list_instances(GCE_ZONE)
    found = gcp_provider.lookup(theirs)
    terminated = gcp_provider.terminate(theirs)
    # Creating a worker whose name a foreign VM holds fails instead of adopting that VM.
    (clash,) = gcp_provider.create(
        LaunchBatch(POOL, spec(), (LaunchIntent("w-0001", "t-clash"),), "batch-clash")
    )

    assert [i.worker_id for i in listed] == [ours[0].worker_id]
    assert found == {}
    assert [t.gone for t in terminated] == [True, True]  # nothing of *this* deployment is left
    assert "instances.delete" not in sim_gce.faults.counts()
    assert sorted(vm.name for vm in sim_gce.instances()) == ["w-0000", "w-0001", "w-0002"]
    assert clash.cloud_id is None
    assert clash.error is not None and clash.error.code == "alreadyExists"


# 7 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("throttle_status", [403, 429])
def test_a_throttling_burst_is_absorbed_by_the_gate(sim_gce: SimGce, throttle_status: int):
    # Half the calls throttled (the sim's draws are seeded, so the run repeats); attempts enough
    # that a page needs no luck to get through.
    config = gcp_config(sim_gce.endpoint)
    gate = config.gate.model_copy(update={"max_attempts": 8, "pause_after_failures": 20})
    provider = make(config.model_copy(update={"gate": gate}), GCE_DEPLOYMENT)
    provider.create(batch(5))
    sim_gce.throttle_status = throttle_status
    sim_gce.faults.reset_counts()
    sim_gce.faults.behaviour.update(page_size_max=1, throttle_rate=0.5, retry_after_s=0.01)

    listed = provider.list_instances(GCE_ZONE)

    assert len(listed) == 5
    made = sim_gce.faults.counts()["instances.list"]
    assert made > 5  # 5 pages, plus the throttled attempts that were retried
    assert provider.gate.attempts["instances.list"] == made
    provider.close()


def test_a_5xx_storm_pauses_this_provider_only(
    sim_gce: SimGce,
    second_sim: SimGce,
    gcp_provider: GcpProvider,
    caplog: pytest.LogCaptureFixture,
):
    other = make(gcp_config(second_sim.endpoint, "gcp-other"), GCE_DEPLOYMENT)
    other.create(batch(1))
    sim_gce.faults.behaviour.update(failure_rate=1.0)
    caplog.set_level(logging.WARNING, logger="wm")

    with pytest.raises(CloudError) as storm:
        gcp_provider.list_instances(GCE_ZONE)
    calls_in_storm = sim_gce.faults.counts()["instances.list"]
    with pytest.raises(CloudError) as refused:
        gcp_provider.list_instances(GCE_ZONE)

    assert storm.value.category in (ErrorCategory.TRANSIENT, ErrorCategory.PAUSED)
    assert refused.value.category is ErrorCategory.PAUSED
    assert sim_gce.faults.counts()["instances.list"] == calls_in_storm  # refused, not sent
    paused = [r for r in caplog.records if r.getMessage() == "cloud-api-paused"]
    assert [r.wm_fields["provider"] for r in paused] == ["gcp-test"]
    # Another provider against a healthy cloud is unaffected.
    assert [i.worker_id for i in other.list_instances(GCE_ZONE)] == ["w-0000"]
    other.close()
    # Once the cloud recovers and the pause is over, calls flow again.
    sim_gce.faults.behaviour.update(failure_rate=0.0)
    while gcp_provider.gate.paused:  # the pause runs out on its own clock
        time.sleep(0.05)
    assert gcp_provider.list_instances(GCE_ZONE) == []


def test_a_5xx_answer_is_transient_and_not_retried_by_the_sdk(sim_gce: SimGce):
    config = gcp_config(sim_gce.endpoint)
    gate = config.gate.model_copy(update={"max_attempts": 1})
    provider = make(config.model_copy(update={"gate": gate}), GCE_DEPLOYMENT)
    sim_gce.faults.behaviour.update(failure_rate=1.0, fault_operations=("instances.get",))

    with pytest.raises(CloudError) as failed:
        provider.lookup([WorkerRef("w-0000", GCE_ZONE)])

    assert (failed.value.category, failed.value.code) == (ErrorCategory.TRANSIENT, "backendError")
    # One attempt allowed, one request made: google-api-core's own retry of GETs on 503 is off.
    assert sim_gce.faults.counts()["instances.get"] == 1
    provider.close()


def test_a_call_that_hangs_is_cut_at_the_gate_timeout(sim_gce: SimGce):
    config = gcp_config(sim_gce.endpoint)
    gate = config.gate.model_copy(update={"max_attempts": 1, "timeout_s": 0.3})
    provider = make(config.model_copy(update={"gate": gate}), GCE_DEPLOYMENT)
    sim_gce.faults.behaviour.update(hang_rate=1.0, hang_s=30.0)

    started = time.monotonic()
    with pytest.raises(CloudError) as hung:
        provider.list_instances(GCE_ZONE)

    assert hung.value.category is ErrorCategory.TRANSIENT
    # Far below the hang, whatever else the machine is doing.
    assert time.monotonic() - started < 10
    sim_gce.faults.cut_hangs()
    provider.close()


# 8 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quota_style", "code"), [("operation", "QUOTA_EXCEEDED"), ("http", "quotaExceeded")]
)
def test_a_quota_error_comes_back_as_data(
    sim_gce: SimGce, gcp_provider: GcpProvider, quota_style: str, code: str
):
    sim_gce.quota_style = quota_style  # type: ignore[assignment]
    sim_gce.faults.behaviour.update(quota_instances=2)

    launched = batch(3)
    results = gcp_provider.create(launched)

    failed = [r for r in results if r.error is not None]
    assert len(failed) == 1
    assert failed[0].cloud_id is None
    assert failed[0].error.category is ErrorCategory.QUOTA
    assert failed[0].error.code == code
    assert "Quota 'INSTANCES' exceeded" in failed[0].error.message
    assert len(sim_gce.instances()) == 2
    # An INSTANCES quota holds for every type and market in the region.
    error = failed[0].error
    assert error_scope(error.code, error.message, launched.spec) == ErrorScope(
        ErrorCategory.QUOTA, GCE_ZONE.rsplit("-", 1)[0]
    )


def test_an_unknown_machine_type_is_a_config_error_as_data(gcp_provider: GcpProvider):
    (result,) = gcp_provider.create(batch(1, machine_type="no-such-type"))

    assert result.error is not None
    assert result.error.category is ErrorCategory.BAD_CONFIG
    assert "no-such-type" in result.error.message


# 9 ------------------------------------------------------------------------------------------------


def test_a_preempted_spot_vm_shows_as_stopped_with_a_reason(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    spot = gcp_provider.create(batch(2, spot=True))
    standard = gcp_provider.create(batch(1, prefix="std"))
    sim_gce.kill(spot[0].cloud_id)
    sim_gce.kill(standard[0].worker_id, reason="host-error")

    seen = {i.worker_id: i for i in gcp_provider.list_instances(GCE_ZONE)}

    assert (seen["w-0000"].state, seen["w-0000"].reason) == (WorkerState.STOPPED, "preempted")
    assert (seen["w-0001"].state, seen["w-0001"].reason) == (WorkerState.RUNNING, None)
    assert (seen["std-0000"].state, seen["std-0000"].reason) == (WorkerState.STOPPED, "terminated")
    # GCE records the pre-emption as a system operation in the zone.
    ops = compute_v1.ZoneOperationsClient(
        credentials=AnonymousCredentials(), client_options={"api_endpoint": sim_gce.endpoint}
    ).list(project=GCE_PROJECT, zone=GCE_ZONE)
    types = {op.operation_type for op in ops}
    assert {"compute.instances.preempted", "compute.instances.hostError"} <= types
    # The dead VM still exists until wm deletes it.
    assert [t.gone for t in gcp_provider.terminate(refs(spot[:1]))] == [True]


# 10 -----------------------------------------------------------------------------------------------


def test_a_raw_sdk_call_works_against_the_simulation(sim_gce: SimGce, gcp_provider: GcpProvider):
    (created,) = gcp_provider.create(batch(1))

    # What a user of `wm sim serve` types, with the endpoint it printed:
    endpoint = sim_gce.endpoint
    client = compute_v1.InstancesClient(
        credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint}
    )
    names = [i.name for i in client.list(project="any-project-id", zone=GCE_ZONE)]
    names_in_project = [i.name for i in client.list(project=GCE_PROJECT, zone=GCE_ZONE)]

    assert names == []  # projects are separate, as in GCE
    assert names_in_project == ["w-0000"]
    operations = compute_v1.ZoneOperationsClient(
        credentials=AnonymousCredentials(), client_options={"api_endpoint": sim_gce.endpoint}
    )
    done = operations.wait(
        project=GCE_PROJECT, zone=GCE_ZONE, operation=created.provider_data["operation"]
    )
    assert done.status.name == "DONE"
    assert str(done.target_id) == created.cloud_id


def test_the_control_endpoints_work_over_http_and_are_not_counted(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    (created,) = gcp_provider.create(batch(1, spot=True))

    def control(path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            sim_gce.endpoint + path, data=data, method="GET" if data is None else "POST"
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    assert control("/_sim/requests") == {"instances.insert": 1}
    control("/_sim/behaviour", {"latency_ms": 1})
    assert sim_gce.faults.behaviour.latency_ms == 1
    control("/_sim/kill", {"id": created.cloud_id, "reason": "preempted"})
    (vm,) = control("/_sim/instances")
    assert (vm["name"], vm["state"], vm["spot"]) == ("w-0000", "stopped", True)
    control("/_sim/remove", {"id": "w-0000"})
    assert control("/_sim/instances") == []
    control("/_sim/requests/reset", {})
    assert control("/_sim/requests") == {}
    control("/_sim/reset", {})
    assert sim_gce.faults.behaviour.latency_ms == 0


def test_request_ids_must_be_uuids_as_in_gce(sim_gce: SimGce):
    from google.api_core.exceptions import BadRequest

    instance = compute_v1.Instance(name="x")
    with pytest.raises(BadRequest, match="requestId"):
        raw_client(sim_gce).insert_unary(
            request=compute_v1.InsertInstanceRequest(
                project=GCE_PROJECT, zone=GCE_ZONE, instance_resource=instance, request_id="nope"
            )
        )


def test_aggregated_list_spans_zones_like_gce(sim_gce: SimGce, gcp_provider: GcpProvider):
    gcp_provider.create(batch(3))
    gcp_provider.create(batch(2, prefix="eu", zone=GCE_OTHER_ZONE))

    pages = raw_client(sim_gce).aggregated_list(
        request=compute_v1.AggregatedListInstancesRequest(project=GCE_PROJECT, max_results=2)
    )
    by_zone: dict[str, list[str]] = {}
    for scope, scoped in pages:
        by_zone.setdefault(scope, []).extend(i.name for i in scoped.instances)

    assert by_zone == {
        f"zones/{GCE_OTHER_ZONE}": ["eu-0000", "eu-0001"],
        f"zones/{GCE_ZONE}": ["w-0000", "w-0001", "w-0002"],
    }
    assert sim_gce.faults.counts()["instances.aggregatedList"] == 3


def test_serve_starts_the_simulation_from_config(tmp_path):
    sim = serve(SimCloudConfig(boot_s=2.0, page_size_max=10), tmp_path)
    try:
        assert sim.faults.behaviour.boot_s == 2.0
        assert list(raw_client(sim).list(project=GCE_PROJECT, zone=GCE_ZONE)) == []
    finally:
        sim.stop()
