import pytest
from sqlalchemy.exc import IntegrityError

from tests.support.configs import build, raw
from wm.db import pools as store
from wm.pool_sync import plan_sync


def sync(engine, config):
    return store.sync_from_config(engine, config)


def test_sync_twice_changes_nothing_the_second_time(engine):
    first = sync(engine, build())
    second = sync(engine, build())
    assert not first.empty and second.empty
    assert [p.pool_id for p in store.load_pools(engine)] == ["proj/gce", "proj/linux"]


def test_edits_keep_launch_config_ids_and_removals_archive(engine):
    sync(engine, build())
    ids_before = {lc.launch_config_id for lc in store.load_launch_configs(engine)}
    data = raw()
    data["pools"][0]["launch_configs"][0]["weight"] = 4.0
    del data["pools"][0]["launch_configs"][1]
    sync(engine, build(data))
    after = {lc.launch_config_id: lc for lc in store.load_launch_configs(engine)}
    assert set(after) == ids_before
    assert sorted(
        (lc.weight, lc.archived) for lc in after.values() if lc.pool_id == "proj/linux"
    ) == [
        (1.0, True),
        (4.0, False),
    ]


def test_removed_pool_is_kept_with_its_previous_provider(engine):
    sync(engine, build())
    data = raw()
    del data["pools"][1]
    sync(engine, build(data))
    gce = next(p for p in store.load_pools(engine) if p.pool_id == "proj/gce")
    assert (gce.provider_id, gce.previous_provider_ids, gce.removed) == (None, ("gcp-a",), True)
    assert sync(engine, build(data)).empty


def test_a_failing_sync_writes_nothing(engine):
    sync(engine, build())
    data = raw()
    data["pools"].append(
        {
            "id": "proj/new",
            "provider": "aws-a",
            "max_capacity": 1,
            "launch_configs": [{"region": "us-east-1", "machine_type": "m", "image": "i"}],
        }
    )
    plan = plan_sync(build(data), store.load_pools(engine), store.load_launch_configs(engine))
    # A launch config for a pool that the plan does not create: the foreign key fails late.
    broken = plan.__class__(
        create_pools=(),
        create_launch_configs=plan.create_launch_configs,
        update_pools=plan.update_pools,
    )
    with pytest.raises(IntegrityError):
        store.apply_sync(engine, broken)
    assert [p.pool_id for p in store.load_pools(engine)] == ["proj/gce", "proj/linux"]
    assert all(lc.pool_id != "proj/new" for lc in store.load_launch_configs(engine))
