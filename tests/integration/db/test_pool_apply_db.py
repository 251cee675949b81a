from dataclasses import replace

import pytest
from sqlalchemy.exc import IntegrityError

from tests.support.configs import build, raw
from tests.support.definitions import apply_pools, definitions
from wm.db import pools as store
from wm.pools.apply_plan import ApplyPlan, plan_apply
from wm.pools.changes import ApplyDefinitions, ApplyRefused, apply_change


def apply(engine, data, *, prune: bool = True):
    return apply_pools(engine, build(data), data["pools"], prune=prune)


def test_applying_the_same_definitions_twice_changes_nothing_the_second_time(engine):
    first = apply(engine, raw())
    second = apply(engine, raw())
    assert not first.empty and second.empty
    assert [p.pool_id for p in store.load_pools(engine)] == ["proj/gce", "proj/linux"]


def test_a_definition_keeps_its_launch_config_ids_and_a_dropped_one_is_archived(engine):
    apply(engine, raw())
    ids_before = {lc.launch_config_id for lc in store.load_launch_configs(engine)}
    data = raw()
    data["pools"][0]["launch_configs"][0]["max_capacity"] = 4  # workerManager: same id
    del data["pools"][0]["launch_configs"][1]
    apply(engine, data)
    after = {lc.launch_config_id: lc for lc in store.load_launch_configs(engine)}
    assert set(after) == ids_before
    linux = sorted(
        (lc.max_capacity or 0, lc.archived) for lc in after.values() if lc.pool_id == "proj/linux"
    )
    assert linux == [(0, True), (4, False)]


def test_a_pool_the_files_no_longer_define_is_deleted_with_its_previous_provider(engine):
    apply(engine, raw())
    data = raw()
    del data["pools"][1]
    apply(engine, data)
    gce = next(p for p in store.load_pools(engine) if p.pool_id == "proj/gce")
    assert (gce.provider_id, gce.previous_provider_ids, gce.removed) == (None, ("gcp-a",), True)
    assert all(lc.archived for lc in store.load_launch_configs(engine) if lc.pool_id == "proj/gce")
    assert apply(engine, data).empty


def test_without_prune_other_pools_are_left_alone(engine):
    apply(engine, raw())
    data = raw()
    del data["pools"][1]
    assert apply(engine, data, prune=False).empty
    assert not next(p for p in store.load_pools(engine) if p.pool_id == "proj/gce").removed


def test_a_launch_config_id_reused_for_another_machine_is_a_conflict_and_nothing_changes(engine):
    apply(engine, raw())
    before = store.load_launch_configs(engine)
    data = raw()
    old_id = next(lc.launch_config_id for lc in before if lc.region == "us-east-1")
    data["pools"][0]["launch_configs"][0]["machine_type"] = "m5.xlarge"
    linux = definitions(build(data), data["pools"])[0]
    first = linux.launch_configs[0]
    body = {
        **first.body,
        "workerManager": {**first.body["workerManager"], "launchConfigId": old_id},
    }
    changed = replace(first, launch_config_id=old_id, body=body)
    edited = replace(linux, launch_configs=(changed, *linux.launch_configs[1:]))
    refused = apply_change(engine, ApplyDefinitions((edited,)))
    assert isinstance(refused, ApplyRefused) and old_id in refused.problems[0]
    assert store.load_launch_configs(engine) == before


def test_a_plan_that_fails_half_way_writes_nothing(engine):
    apply(engine, raw())
    data = raw()
    data["pools"].append(
        {
            "id": "proj/new",
            "provider": "aws-a",
            "max_capacity": 1,
            "launch_configs": [{"region": "us-east-1", "machine_type": "m", "image": "i"}],
        }
    )
    parsed = definitions(build(data), data["pools"][-1:])
    plan = plan_apply(parsed, store.load_pools(engine), store.load_launch_configs(engine))
    # A launch config for a pool that the plan does not create: the foreign key fails late.
    broken = ApplyPlan(create_launch_configs=plan.create_launch_configs)
    with pytest.raises(IntegrityError):
        store.apply_plan(engine, broken)
    assert [p.pool_id for p in store.load_pools(engine)] == ["proj/gce", "proj/linux"]
    assert all(lc.pool_id != "proj/new" for lc in store.load_launch_configs(engine))
