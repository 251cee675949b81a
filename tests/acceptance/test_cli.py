"""The `wm` command as a user runs it: a subprocess, real Postgres, exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from sqlalchemy import text

from wm.db import pools as pool_store
from wm.db.workers import NewWorker, insert_intents

REPO = Path(__file__).resolve().parents[2]
WM = [sys.executable, "-m", "wm"]
TABLES = ("worker_pools", "launch_configs", "workers", "worker_pool_errors", "tasks", "scan_units")


def run_wm(*args: str, db_url: str | None = None, config: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WM_CONFIG")}
    if db_url:
        env["DATABASE_URL"] = db_url
    if config:
        env["WM_CONFIG"] = str(config)
    return subprocess.run(
        [*WM, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )


@pytest.fixture
def example_config(tmp_path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text((REPO / "config.toml").read_text())
    return path


@pytest.fixture
def broken_config(tmp_path) -> Path:
    source = (REPO / "config.toml").read_text()
    broken = source.replace("capacity_per_worker = 2", "capacity_per_worker = 0", 1)
    broken = broken.replace('provider = "gcp-sim"', 'provider = "gcp-nowhere"', 1)
    broken = broken.replace("max_capacity = 40", "max_capacity = -1", 1)
    path = tmp_path / "broken.toml"
    path.write_text(broken)
    return path


def row_counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


def test_config_check_accepts_the_example(example_config):
    done = run_wm("config", "check", config=example_config)
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout


def test_a_broken_config_lists_every_error_exits_2_and_touches_nothing(
    broken_config, db_url, engine
):
    run_wm("pools", "sync", db_url=db_url, config=broken_config)  # may not write anything either
    before = row_counts(engine)
    for command in (("config", "check"), ("pools", "sync"), ("db", "upgrade")):
        done = run_wm(*command, db_url=db_url, config=broken_config)
        assert done.returncode == 2, (command, done.stderr)
        assert "pools[1].launch_configs[0].capacity_per_worker: must be >= 1" in done.stderr
        assert "pools[2].provider: no provider with id 'gcp-nowhere'" in done.stderr
        assert "pools[3].max_capacity: must be >= 0" in done.stderr
        assert "Traceback" not in done.stderr
    assert row_counts(engine) == before == dict.fromkeys(TABLES, 0)


def test_upgrade_and_sync_are_idempotent_and_status_shows_every_pool(example_config, db_url):
    assert run_wm("db", "upgrade", db_url=db_url, config=example_config).returncode == 0
    again = run_wm("db", "upgrade", db_url=db_url, config=example_config)
    assert "already at revision" in again.stdout

    first = run_wm("pools", "sync", db_url=db_url, config=example_config)
    second = run_wm("pools", "sync", db_url=db_url, config=example_config)
    assert first.returncode == second.returncode == 0
    assert "create pool proj-ci/linux-large" in first.stdout
    assert "nothing to do" in second.stdout

    submitted = run_wm(
        "tasks", "submit", "proj-ci/gce-linux", "--count", "7", db_url=db_url, config=example_config
    )
    assert submitted.returncode == 0, submitted.stderr
    status = json.loads(run_wm("status", "--json", db_url=db_url, config=example_config).stdout)
    configured = [p["id"] for p in tomllib.loads(example_config.read_text())["pools"]]
    assert sorted(s["pool_id"] for s in status) == sorted(configured)
    assert next(s for s in status if s["pool_id"] == "proj-ci/gce-linux")["pending"] == 7


def test_dry_run_prints_the_plan_and_changes_nothing(example_config, db_url, engine):
    done = run_wm("pools", "sync", "--dry-run", db_url=db_url, config=example_config)
    assert done.returncode == 0
    assert "create pool proj-ci/azure-win" in done.stdout and "dry run" in done.stdout
    assert row_counts(engine)["worker_pools"] == 0


def test_unknown_pool_is_a_clear_error(example_config, db_url):
    for args in (("tasks", "submit", "no/such", "--count", "1"), ("pools", "errors", "no/such")):
        done = run_wm(*args, db_url=db_url, config=example_config)
        assert done.returncode == 2
        assert "no/such" in done.stderr and "Traceback" not in done.stderr


def test_without_database_url_commands_say_what_is_missing(example_config):
    done = run_wm("status", config=example_config)
    assert done.returncode == 2
    assert "DATABASE_URL is not set" in done.stderr


def test_every_command_has_help():
    for args in (
        (),
        ("db", "upgrade"),
        ("config", "check"),
        ("pools", "sync"),
        ("pools", "list"),
        ("pools", "errors"),
        ("workers", "list"),
        ("tasks", "submit"),
        ("tasks", "list"),
        ("status",),
    ):
        done = run_wm(*args, "--help")
        assert done.returncode == 0 and "Usage:" in done.stdout, args
    for args in ((), ("serve",), ("demo",)):
        done = subprocess.run(
            [sys.executable, "-m", "wmsim", *args, "--help"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert done.returncode == 0 and "Usage:" in done.stdout, ("wmsim", *args)


def test_status_shows_each_pools_slowest_stage_and_every_stage_of_one_pool(
    example_config, db_url, engine
):
    assert run_wm("pools", "sync", db_url=db_url, config=example_config).returncode == 0
    (lc_id,) = [
        lc.launch_config_id
        for lc in pool_store.load_launch_configs(engine)
        if lc.pool_id == "proj-ci/azure-win"
    ]
    insert_intents(
        engine,
        [
            NewWorker(
                "w-slow", "proj-ci/azure-win", "eastus", "azure-sim", 1, lc_id, "t", "b", 0, 60
            )
        ],
    )
    with engine.begin() as conn:  # booted slowly: 90 s from accepted to running
        conn.execute(
            text(
                "UPDATE workers SET accepted_at = created + interval '2 seconds', "
                "cloud_running_at = created + interval '92 seconds', "
                "registered_at = created + interval '95 seconds' WHERE worker_id = 'w-slow'"
            )
        )

    overview = run_wm("status", db_url=db_url, config=example_config)
    one = run_wm("status", "--pool", "proj-ci/azure-win", db_url=db_url, config=example_config)
    as_json = run_wm("status", "--json", db_url=db_url, config=example_config)

    assert overview.returncode == one.returncode == as_json.returncode == 0, one.stderr
    line = next(x for x in overview.stdout.splitlines() if x.startswith("proj-ci/azure-win"))
    assert "cloud accepted -> cloud running (90.0 s)" in line
    slowest = next(x for x in one.stdout.splitlines() if "<- slowest" in x)
    assert slowest.startswith("cloud accepted -> cloud running")
    assert "registered -> first task claimed" in one.stdout
    pools = {p["pool_id"]: p for p in json.loads(as_json.stdout)}
    stages = {s["stage"]: s for s in pools["proj-ci/azure-win"]["stages"]}
    assert stages["accepted_to_running"]["p95_s"] == 90.0
    assert stages["running_to_registered"]["p95_s"] == 3.0
