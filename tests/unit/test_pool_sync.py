from dataclasses import replace

from tests.support.configs import build, raw
from wm.model import LaunchConfigRecord, PoolRecord
from wm.pool_sync import plan_sync


def current_state(data=None):
    """The database state after syncing `data` (or the base config) once."""
    plan = plan_sync(build(data), [], [])
    return list(plan.create_pools), list(plan.create_launch_configs)


def test_an_empty_database_gets_every_pool_launch_config_and_scan_unit():
    plan = plan_sync(build(), [], [])
    assert [p.pool_id for p in plan.create_pools] == ["proj/linux", "proj/gce"]
    assert len(plan.create_launch_configs) == 3
    assert ("aws-a", "us-west-2") in plan.scan_units


def test_syncing_the_same_config_again_plans_nothing():
    pools, lcs = current_state()
    units = [(p.id, r) for p in build().providers for r in p.regions]
    assert plan_sync(build(), pools, lcs, units).empty


def test_a_weight_edit_updates_the_launch_config_in_place():
    pools, lcs = current_state()
    data = raw()
    data["pools"][0]["launch_configs"][0]["weight"] = 3.0
    plan = plan_sync(build(data), pools, lcs)
    assert [lc.launch_config_id for lc in plan.update_launch_configs] == [lcs[0].launch_config_id]
    assert plan.create_launch_configs == plan.archive_launch_configs == ()


def test_a_removed_launch_config_is_archived_not_deleted():
    pools, lcs = current_state()
    data = raw()
    del data["pools"][0]["launch_configs"][1]
    plan = plan_sync(build(data), pools, lcs)
    assert [(lc.launch_config_id, lc.archived) for lc in plan.archive_launch_configs] == [
        (lcs[1].launch_config_id, True)
    ]


def test_a_launch_config_brought_back_is_unarchived():
    pools, lcs = current_state()
    archived = [lcs[0], replace(lcs[1], archived=True), lcs[2]]
    plan = plan_sync(build(), pools, archived)
    assert [(lc.launch_config_id, lc.archived) for lc in plan.update_launch_configs] == [
        (lcs[1].launch_config_id, False)
    ]


def test_a_pool_moved_to_another_provider_remembers_the_old_one():
    pools, lcs = current_state()
    data = raw()
    data["pools"][0]["provider"] = "azure-a"
    data["pools"][0]["launch_configs"] = [
        {"region": "eastus", "machine_type": "Standard_D2s_v5", "image": "img"}
    ]
    plan = plan_sync(build(data), pools, lcs)
    (moved,) = plan.update_pools
    assert (moved.provider_id, moved.previous_provider_ids) == ("azure-a", ("aws-a",))
    assert len(plan.archive_launch_configs) == 2


def test_a_pool_removed_from_the_config_keeps_its_provider_for_draining():
    pools, lcs = current_state()
    data = raw()
    del data["pools"][1]
    plan = plan_sync(build(data), pools, lcs)
    (removed,) = plan.update_pools
    assert (removed.provider_id, removed.previous_provider_ids, removed.removed) == (
        None,
        ("gcp-a",),
        True,
    )
    assert [lc.pool_id for lc in plan.archive_launch_configs] == ["proj/gce"]


def test_a_pool_moved_back_drops_its_provider_from_previous():
    old = PoolRecord.from_config(build().pool("proj/linux"), previous=("aws-a",))
    old = replace(old, provider_id="azure-a")
    lc = LaunchConfigRecord.from_config("proj/linux", build().pool("proj/linux").launch_configs[0])
    plan = plan_sync(build(), [old], [lc])
    moved = next(p for p in plan.update_pools if p.pool_id == "proj/linux")
    assert (moved.provider_id, moved.previous_provider_ids) == ("aws-a", ("azure-a",))
