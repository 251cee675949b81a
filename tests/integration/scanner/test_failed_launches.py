"""A launch Azure takes and then fails for want of capacity (the VM's provisioning ends in
AllocationFailed, as Azure reports it): the scan files it as a capacity error against its
launch config, and where the pool's launch choice reads the bench, benches the offering as a
refused create would. The AzureProvider against the simulated ARM through azure-mgmt-compute,
real Postgres."""

from __future__ import annotations

import pytest

from tests.integration.scanner.test_scan import IMAGES, configure, scanner_for
from wm.config.launch_choice import LaunchChoiceConfig, PoolChoiceConfig
from wm.db import offering_state, pool_errors, tasks
from wm.db.workers import list_workers
from wm.model import Offering, WorkerState
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue

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
