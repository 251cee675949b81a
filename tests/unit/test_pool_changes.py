"""Applying a definition, as the API and `wm pools apply` both ask for it: a table of the pools
the database holds, the change asked for, and the refusal (Taskcluster's code and words) or what
the plan writes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from wm.pools.apply_plan import plan_apply
from wm.pools.changes import (
    ApplyDefinitions,
    ApplyRefused,
    CreatePool,
    DeletePool,
    UpdatePool,
    plan_change,
)
from wm.pools.definition import PoolDefinition, parse_pool_definition

PROVIDERS = {"aws-a": "aws", "aws-b": "aws"}
POOL, OTHER = "proj/linux", "proj/other"


def definition(image: str = "a", pool_id: str = POOL, **fields: Any) -> PoolDefinition:
    body = {
        "providerId": "aws-a",
        "description": "linux",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": 4,
            "launchConfigs": [
                {
                    "region": "us-east-1",
                    "launchConfig": {"ImageId": image, "InstanceType": "m5.large"},
                    "workerManager": {"launchConfigId": f"lc-{image}"},
                }
            ],
        },
        **fields,
    }
    return parse_pool_definition(pool_id, copy.deepcopy(body), PROVIDERS)


def holding(*definitions: PoolDefinition):
    """The pools and launch configs of a database where `definitions` were applied."""
    plan = plan_apply(list(definitions), [], [])
    return list(plan.create_pools), list(plan.create_launch_configs)


# The launch config lc-a again, describing another machine: worker-manager's 409.
MOVED_LC = definition("a").launch_configs[0].body | {"region": "us-west-2"}
CONFLICTING = parse_pool_definition(
    POOL,
    {
        "providerId": "aws-a",
        "description": "linux",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 4, "launchConfigs": [MOVED_LC]},
    },
    PROVIDERS,
)
CONFLICT = (f"{POOL}: launch config with ID `lc-a` already exists with different configuration",)


@pytest.mark.parametrize(
    ("scenario", "held", "change", "refusal"),
    [
        (
            "create a pool that exists with another definition",
            holding(definition("a")),
            CreatePool(definition("a", description="other")),
            ApplyRefused("RequestConflict", "Worker pool already exists"),
        ),
        (
            "update a pool that does not exist",
            holding(definition("a", OTHER)),
            UpdatePool(definition("a")),
            ApplyRefused("ResourceNotFound", "Worker pool does not exist"),
        ),
        (
            "delete a pool that does not exist",
            holding(),
            DeletePool(POOL),
            ApplyRefused("ResourceNotFound", "Worker pool does not exist"),
        ),
        (
            "update a launch config into another machine under its id",
            holding(definition("a")),
            UpdatePool(CONFLICTING),
            ApplyRefused("RequestConflict", CONFLICT[0], CONFLICT),
        ),
        (
            "apply files that change a launch config's machine under its id",
            holding(definition("a")),
            ApplyDefinitions((CONFLICTING,)),
            ApplyRefused("RequestConflict", CONFLICT[0], CONFLICT),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_a_change_is_refused_as_a_value(scenario, held, change, refusal):
    pools, lcs = held
    assert plan_change(change, pools, lcs, workers_register={}) == refusal, scenario


@pytest.mark.parametrize(
    ("scenario", "held", "change", "lines"),
    [
        (
            "create a new pool",
            holding(),
            CreatePool(definition("a")),
            [f"create pool {POOL} on aws-a", f"create launch config {POOL} lc-a (us-east-1)"],
        ),
        ("create a pool again as it is", holding(definition("a")), CreatePool(definition("a")), []),
        (
            "update a pool to a new launch config",
            holding(definition("a")),
            UpdatePool(definition("b")),
            [
                f"update pool {POOL}",  # its config holds its launch configs
                f"create launch config {POOL} lc-b (us-east-1)",
                f"archive launch config {POOL} lc-a (its workers stop)",
            ],
        ),
        (
            "delete a pool",
            holding(definition("a")),
            DeletePool(POOL),
            [f"delete pool {POOL} (its workers are drained)", f"archive launch config {POOL} lc-a"],
        ),
        (
            "apply files that leave another pool alone",
            holding(definition("a"), definition("a", OTHER)),
            ApplyDefinitions((definition("a"),)),
            [],
        ),
        (
            "apply files, pruning the pool they do not name",
            holding(definition("a"), definition("a", OTHER)),
            ApplyDefinitions((definition("a"),), prune=True),
            [
                f"delete pool {OTHER} (its workers are drained)",
                f"archive launch config {OTHER} lc-a",
            ],
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_an_accepted_change_is_the_plan_of_what_it_writes(scenario, held, change, lines):
    pools, lcs = held
    plan = plan_change(change, pools, lcs, workers_register={})
    assert not isinstance(plan, ApplyRefused), scenario
    assert list(plan.lines) == lines, scenario
