"""A provider removed from the legacy worker-manager while its provisioner is launching for it
gets no further VM from that loop: worker-manager restarted without the provider launches
nothing more for it, and a VM launched after the removal would be one no `wm import` took."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.legacy_deployment import ISSUER, LEGACY_PROVIDERS, legacy_pools, legacy_providers
from wm.db import tasks as task_store
from wmsim.cloud import LegacyLaunch, LegacyVm
from wmsim.legacy.provisioner import LegacyProvider
from wmsim.legacy.stack import LegacyStack


@dataclass(frozen=True)
class RemovedAfterFirstLaunch(LegacyProvider):
    """The provider's launcher as it is; the operator removes the provider from the legacy
    while its first VM is being made."""

    stack: list[LegacyStack] | None = None

    def launch(self, launch: LegacyLaunch) -> LegacyVm:
        made = super().launch(launch)
        assert self.stack
        self.stack[0].manager.remove_provider(self.provider_id)
        return made


def test_a_provider_removed_mid_loop_gets_no_further_launch(engine, sim_ec2, sim_gce, sim_arm):
    aws, *others = legacy_providers(sim_ec2, sim_gce, sim_arm)
    holder: list[LegacyStack] = []
    removed = RemovedAfterFirstLaunch(
        aws.provider_id, aws.provider_type, aws.kind, aws.settings, holder
    )
    aws_pool = next(
        pool_id for provider_id, *_, pool_id, _ in LEGACY_PROVIDERS if provider_id == "aws"
    )
    task_store.submit_tasks(engine, aws_pool, 4, 30.0)  # demand for four VMs in one loop
    legacy = LegacyStack.create(
        engine=engine,
        providers=[removed, *others],
        issuer_client_id=ISSUER[0],
        issuer_access_token=ISSUER[1],
        pools=legacy_pools(max_capacity=4),
    )
    holder.append(legacy)
    try:
        legacy.provisioner.run_once()
        legacy.provisioner.run_once()
    finally:
        legacy.stop()

    launched = [w for w in legacy.manager.workers() if w.provider_id == "aws"]
    assert len(launched) == 1
    assert [vm.state for vm in sim_ec2.instances()] in (["pending"], ["running"])
    assert any("unknown providerId aws" in w for w in legacy.provisioner.warnings)
