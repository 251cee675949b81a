"""What applying definitions changes, as worker-manager's rules say: a pure plan."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from wm.pools.apply_plan import plan_apply, plan_delete, pool_record, same_definition
from wm.pools.definition import PoolDefinition, parse_pool_definition

PROVIDERS = {"aws-a": "aws", "aws-b": "aws"}
POOL = "proj/linux"


def launch_config(image: str, **manager: Any) -> dict[str, Any]:
    return {
        "region": "us-east-1",
        "launchConfig": {"ImageId": image, "InstanceType": "m5.large"},
        "workerManager": {"launchConfigId": f"lc-{image}", **manager},
    }


def body(*launch_configs: dict[str, Any], provider: str = "aws-a") -> dict[str, Any]:
    return {
        "providerId": provider,
        "description": "linux",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 4, "launchConfigs": list(launch_configs)},
    }


def parsed(given: dict[str, Any], pool_id: str = POOL) -> PoolDefinition:
    return parse_pool_definition(pool_id, copy.deepcopy(given), PROVIDERS)


def applied(given: dict[str, Any], pool_id: str = POOL):
    """The records the database holds once `given` was applied to an empty one."""
    plan = plan_apply([parsed(given, pool_id)], [], [])
    return list(plan.create_pools), list(plan.create_launch_configs)


def test_a_new_pool_and_its_launch_configs_are_created():
    plan = plan_apply([parsed(body(launch_config("a"), launch_config("b")))], [], [])
    assert [p.pool_id for p in plan.create_pools] == [POOL]
    assert [lc.launch_config_id for lc in plan.create_launch_configs] == ["lc-a", "lc-b"]
    assert plan.lines[0] == f"create pool {POOL} on aws-a"


def test_applying_what_is_there_changes_nothing():
    pools, lcs = applied(body(launch_config("a")))
    assert plan_apply([parsed(body(launch_config("a")))], pools, lcs).empty


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # workerManager may change in place: the same id, updated.
        (launch_config("a", initialWeight=0.5), ("update", "lc-a")),
        (launch_config("a", maxCapacity=2), ("update", "lc-a")),
        (launch_config("a", capacityPerInstance=2), ("update", "lc-a")),
        # Another machine under the same id: a conflict, as worker-manager's 409.
        ({**launch_config("a"), "region": "us-west-2"}, ("conflict", "lc-a")),
        (
            {
                **launch_config("a"),
                "launchConfig": {"ImageId": "ami-x", "InstanceType": "m5.large"},
            },
            ("conflict", "lc-a"),
        ),
    ],
)
def test_a_launch_config_keeps_its_id_for_life(change, expected):
    pools, lcs = applied(body(launch_config("a")))
    plan = plan_apply([parsed(body(change))], pools, lcs)
    kind, lc_id = expected
    if kind == "update":
        assert [lc.launch_config_id for lc in plan.update_launch_configs] == [lc_id]
        assert not plan.conflicts
    else:
        assert plan.conflicts and f"`{lc_id}`" in plan.conflicts[0]


def test_a_dropped_launch_config_is_archived_and_restored_when_it_comes_back():
    pools, lcs = applied(body(launch_config("a"), launch_config("b")))
    dropped = plan_apply([parsed(body(launch_config("a")))], pools, lcs)
    assert [(lc.launch_config_id, lc.archived) for lc in dropped.archive_launch_configs] == [
        ("lc-b", True)
    ]
    archived = [lc if lc.launch_config_id == "lc-a" else replace(lc, archived=True) for lc in lcs]
    back = plan_apply([parsed(body(launch_config("a"), launch_config("b")))], pools, archived)
    assert [(lc.launch_config_id, lc.archived) for lc in back.update_launch_configs] == [
        ("lc-b", False)
    ]
    assert any(line.startswith("restore launch config") for line in back.lines)


def test_a_row_from_before_definitions_takes_the_definition_that_names_its_id():
    pools, lcs = applied(body(launch_config("a")))
    legacy = [replace(lc, configuration={}) for lc in lcs]  # what migration 0009 leaves
    plan = plan_apply([parsed(body(launch_config("a")))], pools, legacy)
    assert not plan.conflicts
    assert [lc.configuration for lc in plan.update_launch_configs] == [lcs[0].configuration]


def test_moving_a_pool_to_another_provider_keeps_the_old_one_draining():
    pools, lcs = applied(body(launch_config("a")))
    plan = plan_apply([parsed(body(launch_config("a"), provider="aws-b"))], pools, lcs)
    (moved,) = plan.update_pools
    assert (moved.provider_id, moved.previous_provider_ids) == ("aws-b", ("aws-a",))
    assert "(provider aws-a -> aws-b)" in plan.lines[0]


def test_deleting_a_pool_moves_it_to_the_null_provider_and_archives_everything():
    pools, lcs = applied(body(launch_config("a"), launch_config("b")))
    plan = plan_delete(pools[0], lcs)
    (gone,) = plan.update_pools
    assert (gone.provider_id, gone.previous_provider_ids, gone.removed) == (None, ("aws-a",), True)
    assert sorted(lc.launch_config_id for lc in plan.archive_launch_configs) == ["lc-a", "lc-b"]
    assert plan_delete(gone, [replace(lc, archived=True) for lc in lcs]).empty


def test_a_definition_on_the_null_provider_is_a_deletion():
    pools, lcs = applied(body(launch_config("a")))
    deleted = body(launch_config("a"), provider="null-provider")
    plan = plan_apply([parsed(deleted)], pools, lcs)
    assert plan.update_pools[0].removed and plan.update_pools[0].provider_id is None
    assert [lc.launch_config_id for lc in plan.archive_launch_configs] == ["lc-a"]


def test_prune_deletes_only_live_pools_the_definitions_do_not_name():
    linux = applied(body(launch_config("a")))
    other = applied(body(launch_config("b")), pool_id="proj/other")
    pools, lcs = linux[0] + other[0], linux[1] + other[1]
    kept = plan_apply([parsed(body(launch_config("a")))], pools, lcs)
    pruned = plan_apply([parsed(body(launch_config("a")))], pools, lcs, prune=True)
    assert kept.empty
    assert [p.pool_id for p in pruned.update_pools] == ["proj/other"]
    assert [lc.launch_config_id for lc in pruned.archive_launch_configs] == ["lc-b"]


def test_registration_follows_the_providers_setting():
    definition = parsed(body(launch_config("a")))
    plan = plan_apply([definition], [], [], workers_register={"aws-a": False})
    assert plan.create_pools[0].requires_registration is False
    assert pool_record(definition).requires_registration is True


def test_creating_again_is_idempotent_only_with_the_very_same_definition():
    pools, _ = applied(body(launch_config("a")))
    assert same_definition(parsed(body(launch_config("a"))), pools[0])
    assert not same_definition(
        parsed({**body(launch_config("a")), "owner": "x@example.com"}), pools[0]
    )
    assert not same_definition(parsed(body(launch_config("b"))), pools[0])


def test_lifecycle_figures_follow_interpret_lifecycle():
    given = body(launch_config("a"))
    given["config"]["lifecycle"] = {"registrationTimeout": 900, "reregistrationTimeout": 600}
    record = pool_record(parsed(given))
    # registrationTimeout counts only below the reregistration one (interpretLifecycle).
    assert (record.registration_timeout_s, record.reregistration_timeout_s) == (600, 600)
    assert record.queue_inactivity_timeout_s == 7200
