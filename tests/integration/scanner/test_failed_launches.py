"""A launch Azure or GCE takes and then fails for want of capacity (the VM's provisioning ends in
AllocationFailed, as Azure reports it): the scan files it as a capacity error against its
launch config, and where the pool's launch choice reads the bench, benches the offering as a
refused create would; the row keeps the refusal's class, and the launch choice's evidence counts
it as a capacity failure of its launch config. The AzureProvider against the simulated ARM
through azure-mgmt-compute, real Postgres."""

from __future__ import annotations

import time

import pytest

from tests.fixtures.sim_gce import GCE_ZONE
from tests.integration.scanner.test_scan import IMAGES, configure, scanner_for
from wm.config.launch_choice import LaunchChoiceConfig, PoolChoiceConfig
from wm.db import offering_state, pool_errors, tasks
from wm.db.workers import list_workers
from wm.model import Offering, WorkerState
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.market_sim import MarketSettings

POOL = "proj/scan"
SIZE, IMAGE = IMAGES["azure"]
OFFERING = Offering("eastus", None, SIZE, "spot")


@pytest.mark.parametrize(
    ("mode", "benched"), [("cost", True), ("shadow", True), ("weights", False)]
)
def test_an_allocation_failure_found_by_the_scan_is_a_capacity_error(
    engine, sim_arm, azure_provider, mode, benched
):
    configure(
        engine,
        azure_provider,
        "azure",
        "eastus",
        launch_configs=[{"region": "eastus", "machine_type": SIZE, "image": IMAGE, "spot": True}],
    )
    choice = LaunchChoiceConfig(pools=(PoolChoiceConfig(match="proj/*", mode=mode),))
    queue = BuiltinQueue(engine)
    tasks.submit_tasks(engine, POOL, 1, 60.0)
    Provisioner(engine, queue, {azure_provider.id: azure_provider}).run_pass(azure_provider.id)
    (worker,) = list_workers(engine)
    assert worker.cloud_id is not None

    # Azure took the PUT; the VM's provisioning then fails: no capacity for the size.
    sim_arm.fail(worker.cloud_id)
    scanner_for(engine, azure_provider, queue=queue, launch_choice=choice).scan(
        azure_provider.id, "eastus"
    )

    (after,) = list_workers(engine)
    assert after.state in (WorkerState.STOPPING, WorkerState.STOPPED)
    assert after.stop_reason == "ProvisioningState/failed/AllocationFailed"
    assert after.launch_refused == "capacity"
    assert capacity_failures(engine, worker) == pytest.approx(1.0, abs=0.01)
    (error,) = pool_errors.list_errors(engine, POOL)
    assert (error.kind, error.title) == ("capacity", "launch failed: AllocationFailed")
    assert error.launch_config_id == worker.launch_config_id
    bench = offering_state.read_bench(engine, azure_provider.id)
    if benched:
        assert bench[OFFERING].state.failures == 1
        assert bench[OFFERING].state.benched_until is not None
        assert bench[OFFERING].last_code == "AllocationFailed"
    else:
        assert bench == {}  # weights mode reads no bench: the scan writes none


GCE_TYPE = "n2-standard-4"
# us-central1-a has no n2-standard-4 to spare from the start; us-central1-b has plenty.
DRY_ZONE_A = f"""
name = "dry-a"
hours = 2
[regimes]
enabled = false
[[offerings]]
key = "gcp/us-central1/us-central1-a/{GCE_TYPE}/spot"
capacity = 50
[[offerings]]
key = "gcp/us-central1/us-central1-b/{GCE_TYPE}/spot"
capacity = 50
[[events]]
place = "gcp/us-central1/us-central1-a"
regime = "dry"
at_min = 0
for_min = 120
"""


def test_a_gce_insert_that_its_operation_fails_later_is_found_by_the_scan_and_benched(
    engine, sim_gce, gcp_provider, tmp_path
):
    """GCE accepts the insert and fails it in the operation a while later, with no instance
    made: the provisioner records a launch; the scan's look-up reads the operation."""
    scenario = tmp_path / "dry-a.toml"
    scenario.write_text(DRY_ZONE_A)
    sim_gce.use_market(MarketSettings(str(scenario), seed=3))
    # The operation runs a while: the insert's answer says nothing of how it ends.
    sim_gce.faults.behaviour.update(boot_s=2.0)
    configure(
        engine,
        gcp_provider,
        "gcp",
        GCE_ZONE,
        launch_configs=[
            {"region": GCE_ZONE, "machine_type": GCE_TYPE, "image": IMAGES["gcp"][1], "spot": True}
        ],
    )
    choice = LaunchChoiceConfig(pools=(PoolChoiceConfig(match="proj/*", mode="cost"),))
    queue = BuiltinQueue(engine)
    tasks.submit_tasks(engine, POOL, 1, 60.0)
    (report,) = Provisioner(engine, queue, {gcp_provider.id: gcp_provider}).run_pass(
        gcp_provider.id
    )
    assert (report.launched, report.failed) == (1, 0)
    (worker,) = list_workers(engine)
    assert worker.state == WorkerState.REQUESTED and worker.cloud_id

    scanner = scanner_for(engine, gcp_provider, queue=queue, launch_choice=choice)
    wait_for(lambda: scan_stopped(scanner, gcp_provider, engine))

    (after,) = list_workers(engine)
    assert after.stop_reason.startswith(
        "gce-operation-failed: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: "
    )
    assert after.launch_refused == "capacity"
    assert capacity_failures(engine, worker) == pytest.approx(1.0, abs=0.01)
    (error,) = pool_errors.list_errors(engine, POOL)
    assert error.kind == "capacity"
    (offering,) = offering_state.read_bench(engine, gcp_provider.id)
    assert offering == Offering("us-central1", GCE_ZONE, GCE_TYPE, "spot")


def capacity_failures(engine, worker) -> float:
    """The capacity failures the launch choice's evidence counts for the worker's launch config."""
    evidence = offering_state.evidence(engine, [POOL])
    return evidence[(POOL, worker.launch_config_id)].capacity_failures


def scan_stopped(scanner, provider, engine) -> bool:
    scanner.scan(provider.id, GCE_ZONE)
    return all(w.state != WorkerState.REQUESTED for w in list_workers(engine))


def wait_for(check, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.2)
