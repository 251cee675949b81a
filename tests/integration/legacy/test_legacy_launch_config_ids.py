"""The stand-in derives a launch config's id as worker-manager's database does (Postgres
computing `'lc-' || left(md5(pool || (config - 'workerManager')::text), 20)`), and wm's own
reimplementation of that formula (wm/pools/definition.py) gives the same ids: the import keeps
the ids of workers the stand-in launched from definitions that name none."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from tests.support.real_pools import definitions
from wm.pools.definition import derive_launch_config_id
from wmsim.legacy.store import launch_config_id

LAUNCH_CONFIGS = [
    {"region": "us-east-1", "launchConfig": {"ImageId": "ami-1"}, "capacityPerInstance": 1},
    {"zone": "us-central1-a", "machineType": "n2-standard-4", "scheduling": {"x": 1.5}},
    {"location": "eastus", "workerManager": {"capacityPerInstance": 4}, "tags": {"ü": "ß"}},
    {"region": "eu-west-1", "launchConfig": {"Placement": {"Tenancy": "default"}}, "n": 10.0},
]


@pytest.mark.parametrize("config", LAUNCH_CONFIGS)
def test_the_stand_in_and_wm_derive_the_same_id(engine: Engine, config: dict) -> None:
    assert launch_config_id(engine, "proj-x/ci", config) == derive_launch_config_id(
        "proj-x/ci", config
    )


def test_every_real_launch_config_derives_the_same_id_in_postgres_and_in_wm(engine: Engine) -> None:
    checked = 0
    every = definitions("firefoxci") + definitions("community-tc")
    for definition in every:
        for config in definition.get("config", {}).get("launchConfigs", []):
            unnamed = {k: v for k, v in config.items() if k != "workerManager"}
            pool = definition["workerPoolId"]
            assert launch_config_id(engine, pool, unnamed) == derive_launch_config_id(pool, unnamed)
            checked += 1
    assert checked > 100
