"""Pre-emption on all three clouds: noticed from the list, tasks back to pending, replaced at
once, and the launch config that keeps losing VMs weighs less for a while."""

from __future__ import annotations

import pytest

from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_ZONE
from tests.integration.scanner.test_scan import IMAGES, configure, scanner_for
from wm.db import tasks
from wm.db.workers import list_workers, recent_preemption_counts
from wm.model import WorkerState
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue

CLOUDS = {
    "aws": ("sim_ec2", "aws_provider", EC2_REGION),
    "gcp": ("sim_gce", "gcp_provider", GCE_ZONE),
    "azure": ("sim_arm", "azure_provider", "eastus"),
}


@pytest.mark.parametrize("kind", sorted(CLOUDS))
def test_a_preempted_worker_gives_back_its_tasks_and_is_replaced_at_once(request, engine, kind):
    sim_name, provider_name, region = CLOUDS[kind]
    sim = request.getfixturevalue(sim_name)
    provider = request.getfixturevalue(provider_name)
    machine, image = IMAGES[kind]
    configure(
        engine,
        provider,
        kind,
        region,
        launch_configs=[
            {"region": region, "machine_type": machine, "image": image, "spot": True},
            {"region": region, "machine_type": machine, "image": image, "weight": 0.6},
        ],
    )
    queue = BuiltinQueue(engine)
    provisioner = Provisioner(engine, queue, {provider.id: provider})
    scanner = scanner_for(engine, provider, queue=queue)
    tasks.submit_tasks(engine, "proj/scan", 1, 60.0)
    provisioner.run_pass(provider.id)
    (worker,) = list_workers(engine)
    spot_config = worker.launch_config_id
    scanner.scan(provider.id, region)  # the cloud runs it: running (no registration needed)
    (claimed,) = queue.claim("proj/scan", worker.worker_id)

    # The cloud takes the spot VM back.
    sim.faults.behaviour.update(preempt_share=1.0, preempt_within_s=0.0)
    sim.kill(worker.cloud_id or worker.worker_id, "preempted")
    sim.faults.reset_counts()
    report = scanner.scan(provider.id, region)

    # Noticed from the list alone, with the cloud's reason; its task is pending again.
    assert report is not None and report.preempted == 1
    (after,) = list_workers(engine)
    assert after.state in (WorkerState.STOPPING, WorkerState.STOPPED)
    assert after.preempted_at is not None and after.stop_reason
    assert [t.task_id for t in tasks.list_tasks(engine, state="pending")] == [claimed.task_id]
    assert recent_preemption_counts(engine, ["proj/scan"]) == {("proj/scan", spot_config): 1}

    # The next pass replaces it, preferring the launch config that was not pre-empted.
    (pass_report,) = provisioner.run_pass(provider.id)
    assert pass_report.launched == 1
    replacement = next(w for w in list_workers(engine) if w.worker_id != worker.worker_id)
    assert replacement.launch_config_id != spot_config
    assert replacement.demand_at is not None and replacement.accepted_at is not None
