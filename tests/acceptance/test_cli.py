"""The `wm` command as a user runs it: a subprocess, real Postgres, exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import text

from wm.cli.main import cli as wm_cli
from wm.db import imported_workers
from wm.db import pools as pool_store
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker
from wm.model import WorkerState
from wm.pools.config_tables import OldLaunchConfig
from wm.take_over.marks import IMPORTED_FROM, imported_worker_id
from wmsim.cli import cli as wmsim_cli

REPO = Path(__file__).resolve().parents[2]
WM = [sys.executable, "-m", "wm"]
WM_BIN = Path(sys.executable).parent / "wm"  # the console script pyproject installs
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
    broken = source.replace("scan_interval_s = 10", "scan_interval_s = -1", 1)
    broken = broken.replace('kind = "gcp"', 'kind = "ibm"', 1)
    broken = broken.replace('regions = ["eastus"]', "regions = []", 1)
    path = tmp_path / "broken.toml"
    path.write_text(broken)
    return path


EXAMPLE_POOLS = REPO / "pools" / "proj-ci.yml"
REAL_POOLS = REPO / "tests" / "fixtures" / "real_pools"  # the public deployments' configs
OLD_CONFIG = """
deployment_id = "old-deploy"

[[providers]]
id = "aws-old"
kind = "aws"
regions = ["us-east-1"]

[[providers]]
id = "azure-old"
kind = "azure"
subscription_id = "sub"
resource_group = "rg"
subnet_id = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/vnets/s"
regions = ["eastus"]

[[pools]]
id = "proj-old/linux"
provider = "aws-old"
max_capacity = 10
requires_registration = false

  [[pools.launch_configs]]
  region = "us-east-1"
  machine_type = "m5.large"
  image = "ami-0123456789abcdef0"
  weight = 2.0

  [[pools.launch_configs]]
  region = "us-east-1"
  machine_type = "m5.xlarge"
  image = "ami-0123456789abcdef0"
  spot = true

[[pools]]
id = "proj-old/win"
provider = "azure-old"
max_capacity = 5

  [[pools.launch_configs]]
  region = "eastus"
  machine_type = "Standard_D4s_v5"
  image = "MicrosoftWindowsServer:WindowsServer:2022-datacenter-azure-edition:latest"
"""


def row_counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


# The files the example config names, which `wmsim serve` writes beside it.
SIM_FILES = (
    "ec2-identity-certificate.pem",
    "gce-identity-jwks.json",
    "arm-cert.pem",
    "arm-identity-root.pem",
)


def test_config_check_accepts_the_example(example_config):
    (example_config.parent / ".wm-sim").mkdir()
    for name in SIM_FILES:
        (example_config.parent / ".wm-sim" / name).write_text("x")
    done = run_wm("config", "check", config=example_config)
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout


def test_config_check_names_each_file_the_config_names_that_is_not_beside_it(example_config):
    # Run from the repository, whose own .wm-sim/ may hold these files: only the config's
    # directory counts.
    done = run_wm("config", "check", config=example_config)
    assert done.returncode == 2
    where = example_config.parent / ".wm-sim"
    assert f"providers[0].identity_certificate: no file {where}/{SIM_FILES[0]}" in done.stderr
    assert f"providers[1].identity_jwks: no file {where}/{SIM_FILES[1]}" in done.stderr
    assert f"providers[2].ca_bundle: no file {where}/{SIM_FILES[2]}" in done.stderr
    assert f"providers[2].identity_roots[0]: no file {where}/{SIM_FILES[3]}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "providers"),
    [
        ("firefoxci.toml", 5),  # azure_trusted among them
        ("community-tc.toml", 4),  # its static provider among them
    ],
)
def test_config_check_accepts_the_public_deployments_provider_ids(name, providers):
    done = run_wm("config", "check", config=REAL_POOLS / name)
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout and f"{providers} providers" in done.stdout


def test_a_provider_id_taskcluster_would_refuse_is_named_with_the_pattern(tmp_path):
    path = tmp_path / "dotted.toml"
    source = (REAL_POOLS / "firefoxci.toml").read_text()
    path.write_text(source.replace('id = "azure_trusted"', 'id = "azure.trusted"'))
    done = run_wm("config", "check", config=path)
    assert done.returncode == 2
    assert "providers[2].id: must match ^[a-zA-Z0-9-_]{1,38}$" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_config_lists_every_error_exits_2_and_touches_nothing(
    broken_config, db_url, engine
):
    apply = ("pools", "apply", str(EXAMPLE_POOLS))
    run_wm(*apply, db_url=db_url, config=broken_config)  # may not write anything either
    before = row_counts(engine)
    for command in (("config", "check"), apply, ("db", "upgrade")):
        done = run_wm(*command, db_url=db_url, config=broken_config)
        assert done.returncode == 2, (command, done.stderr)
        assert "providers[0].scan_interval_s: must be > 0" in done.stderr
        assert "providers[1].kind: must be one of" in done.stderr
        assert "providers[2].regions: must not be empty" in done.stderr
        assert "Traceback" not in done.stderr
    assert row_counts(engine) == before == dict.fromkeys(TABLES, 0)


def test_upgrade_and_apply_are_idempotent_and_status_shows_every_pool(example_config, db_url):
    assert run_wm("db", "upgrade", db_url=db_url, config=example_config).returncode == 0
    again = run_wm("db", "upgrade", db_url=db_url, config=example_config)
    assert "already at revision" in again.stdout

    first = run_wm("pools", "apply", str(EXAMPLE_POOLS), db_url=db_url, config=example_config)
    second = run_wm("pools", "apply", str(EXAMPLE_POOLS), db_url=db_url, config=example_config)
    assert first.returncode == second.returncode == 0, first.stderr
    assert "create pool proj-ci/linux-large" in first.stdout
    assert "nothing to do" in second.stdout

    submitted = run_wm(
        "tasks", "submit", "proj-ci/gce-linux", "--count", "7", db_url=db_url, config=example_config
    )
    assert submitted.returncode == 0, submitted.stderr
    status = json.loads(run_wm("status", "--json", db_url=db_url, config=example_config).stdout)
    defined = [d["workerPoolId"] for d in yaml.safe_load_all(EXAMPLE_POOLS.read_text())]
    assert sorted(s["pool_id"] for s in status) == sorted(defined)
    assert next(s for s in status if s["pool_id"] == "proj-ci/gce-linux")["pending"] == 7


def test_dry_run_prints_the_plan_and_changes_nothing(example_config, db_url, engine):
    args = ("pools", "apply", "--dry-run", str(EXAMPLE_POOLS))
    done = run_wm(*args, db_url=db_url, config=example_config)
    assert done.returncode == 0, done.stderr
    assert "create pool proj-ci/azure-win" in done.stdout and "dry run" in done.stdout
    assert row_counts(engine)["worker_pools"] == 0


def test_definitions_with_problems_in_two_files_list_them_all_and_apply_none(
    example_config, db_url, engine, tmp_path
):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(next(yaml.safe_load_all(EXAMPLE_POOLS.read_text()))))
    bad = tmp_path / "bad.yml"
    documents = list(yaml.safe_load_all(EXAMPLE_POOLS.read_text()))[1:3]
    documents[0]["config"]["launchConfigs"][0]["launchConfig"].pop("ImageId")
    documents[1]["config"]["minCapacity"] = -1
    bad.write_text(yaml.safe_dump_all(documents))

    done = run_wm("pools", "apply", str(good), str(bad), db_url=db_url, config=example_config)

    assert done.returncode == 2, done.stdout
    assert "proj-ci/linux-gpu" in done.stderr and "ImageId" in done.stderr
    assert "proj-ci/gce-linux" in done.stderr and "config.minCapacity" in done.stderr
    assert "Traceback" not in done.stderr
    assert row_counts(engine)["worker_pools"] == 0


def test_apply_warns_of_a_max_capacity_below_the_min_naming_the_pool(
    example_config, db_url, engine, tmp_path
):
    definition = next(yaml.safe_load_all(EXAMPLE_POOLS.read_text()))
    definition["config"].update(minCapacity=3, maxCapacity=1)
    path = tmp_path / "pool.yml"
    path.write_text(yaml.safe_dump(definition))
    done = run_wm("pools", "apply", str(path), db_url=db_url, config=example_config)
    assert done.returncode == 0, done.stderr
    assert (
        f"warning: {definition['workerPoolId']}: config.maxCapacity (1) is below "
        "config.minCapacity (3): the pool keeps minCapacity (3) running anyway"
    ) in done.stderr
    assert [(p.min_capacity, p.max_capacity) for p in pool_store.load_pools(engine)] == [(3, 1)]


def test_prune_deletes_the_pools_the_files_no_longer_define(example_config, db_url, tmp_path):
    first = run_wm("pools", "apply", str(EXAMPLE_POOLS), db_url=db_url, config=example_config)
    assert first.returncode == 0, first.stderr
    fewer = tmp_path / "fewer.yml"
    fewer.write_text(yaml.safe_dump_all(list(yaml.safe_load_all(EXAMPLE_POOLS.read_text()))[:1]))

    kept = run_wm("pools", "apply", str(fewer), db_url=db_url, config=example_config)
    pruned = run_wm("pools", "apply", "--prune", str(fewer), db_url=db_url, config=example_config)

    assert "nothing to do" in kept.stdout
    assert pruned.returncode == 0, pruned.stderr
    assert "delete pool proj-ci/azure-win" in pruned.stdout
    listed = json.loads(
        run_wm("pools", "list", "--json", db_url=db_url, config=example_config).stdout
    )
    defined = [d["workerPoolId"] for d in yaml.safe_load_all(EXAMPLE_POOLS.read_text())]
    # The first one is kept; every other is deleted.
    assert {p["pool_id"]: p["removed"] for p in listed} == {
        pool_id: index > 0 for index, pool_id in enumerate(defined)
    }


def test_an_old_config_converts_into_definitions_that_keep_its_launch_config_ids(db_url, tmp_path):
    old = tmp_path / "old.toml"
    old.write_text(OLD_CONFIG)
    out = tmp_path / "pools.yml"

    refused = run_wm("config", "check", config=old)
    converted = run_wm(
        "pools", "convert", "--owner", "ops@example.com", "--out", str(out), config=old
    )

    assert refused.returncode == 2 and "wm pools convert" in refused.stderr
    assert converted.returncode == 0, converted.stderr
    assert "workers_register = false" in converted.stderr and "subnet_id" in converted.stderr
    linux, win = yaml.safe_load_all(out.read_text())
    old_pools = tomllib.loads(OLD_CONFIG)["pools"]
    ids = [lc["workerManager"]["launchConfigId"] for lc in linux["config"]["launchConfigs"]]
    assert ids == [OldLaunchConfig(**lc).old_id for lc in old_pools[0]["launch_configs"]]
    assert win["config"]["launchConfigs"][0]["subnetId"].endswith("/vnets/s")

    # The new config: no [[pools]], no subnet_id; the definitions apply as they are.
    new = tmp_path / "new.toml"
    text_ = OLD_CONFIG[: OLD_CONFIG.index("[[pools]]")]
    new.write_text("\n".join(x for x in text_.splitlines() if not x.startswith("subnet_id")))
    assert run_wm("db", "upgrade", db_url=db_url, config=new).returncode == 0
    applied = run_wm("pools", "apply", str(out), db_url=db_url, config=new)
    assert applied.returncode == 0, applied.stderr
    assert "create pool proj-old/win" in applied.stdout


def test_unknown_pool_is_a_clear_error(example_config, db_url):
    for args in (("tasks", "submit", "no/such", "--count", "1"), ("pools", "errors", "no/such")):
        done = run_wm(*args, db_url=db_url, config=example_config)
        assert done.returncode == 2
        assert "no/such" in done.stderr and "Traceback" not in done.stderr


def test_without_database_url_commands_say_what_is_missing(example_config):
    done = run_wm("status", config=example_config)
    assert done.returncode == 2
    assert "DATABASE_URL is not set" in done.stderr


@pytest.mark.parametrize("process", ["provisioner", "scanner", "web", "all"])
def test_every_process_without_database_url_says_so_and_exits_2(process, example_config):
    done = run_wm("run", process, config=example_config)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: DATABASE_URL is not set: point it at a PostgreSQL")
    assert "Traceback" not in done.stderr


def commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
    return found


@pytest.mark.parametrize("root", [wm_cli, wmsim_cli], ids=["wm", "wmsim"])
def test_every_command_takes_config_after_it_too(root):
    for path in commands(root):
        command = root
        for name in path:
            command = command.commands[name]
        assert any("--config" in p.opts for p in command.params), path


def test_config_after_the_subcommand_is_the_config_used(example_config, db_url, tmp_path):
    other = tmp_path / "other.toml"
    other.write_text('deployment_id = "other-deploy"\n')
    # Run where ./config.toml exists, with no WM_CONFIG: only --config can name the other one.
    done = run_wm("config", "check", "--config", str(other))
    assert done.returncode == 0, done.stderr
    assert "deployment other-deploy" in done.stdout
    listed = run_wm("pools", "list", "--json", "--config", str(example_config), db_url=db_url)
    assert listed.returncode == 0, listed.stderr
    twice = run_wm("--config", str(example_config), "config", "check", "--config", str(other))
    assert twice.returncode == 2 and "--config given twice" in twice.stderr


def test_every_command_has_help():
    # The entry points as installed, each a process; every command's help from the same
    # click groups in this process (a process each cost a minute of the suite for help text).
    for argv in ([str(WM_BIN), "--help"], [sys.executable, "-m", "wmsim", "--help"]):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=60)
        assert done.returncode == 0 and "Usage:" in done.stdout, argv
    runner = CliRunner()
    for group, args in (
        *(
            (wm_cli, a)
            for a in (
                ("db", "upgrade"),
                ("config", "check"),
                ("pools", "apply"),
                ("pools", "convert"),
                ("pools", "list"),
                ("pools", "errors"),
                ("workers", "list"),
                ("tasks", "submit"),
                ("tasks", "list"),
                ("status",),
                ("import",),
                ("run",),
            )
        ),
        (wmsim_cli, ("serve",)),
        (wmsim_cli, ("demo",)),
    ):
        done = runner.invoke(group, [*args, "--help"])
        assert done.exit_code == 0 and "Usage:" in done.output, (group.name, args, done.output)


def test_status_shows_each_pools_slowest_stage_and_every_stage_of_one_pool(
    example_config, db_url, engine
):
    apply = run_wm("pools", "apply", str(EXAMPLE_POOLS), db_url=db_url, config=example_config)
    assert apply.returncode == 0, apply.stderr
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


def test_workers_list_names_workers_as_taskcluster_does(example_config, db_url, engine):
    # Scenario: one Azure worker the cloud has named (its VM name is worker-runner's workerId),
    # and one intent whose create has not answered yet.
    apply = run_wm("pools", "apply", str(EXAMPLE_POOLS), db_url=db_url, config=example_config)
    assert apply.returncode == 0, apply.stderr
    pool_id = "proj-ci/azure-win"
    (lc_id,) = [
        lc.launch_config_id
        for lc in pool_store.load_launch_configs(engine)
        if lc.pool_id == pool_id
    ]
    insert_intents(
        engine,
        [
            NewWorker(w, pool_id, "eastus", "azure-sim", 1, lc_id, f"t-{w}", "b", i, 60)
            for i, w in enumerate(("w-named", "w-intent"))
        ],
    )
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE workers SET cloud_id = 'vm-named', tc_worker_id = 'vm-named', "
                "state = 'running' WHERE worker_id = 'w-named'"
            )
        )

    table = run_wm("workers", "list", "--pool", pool_id, db_url=db_url, config=example_config)
    as_json = run_wm("workers", "list", "--json", db_url=db_url, config=example_config)
    unknown = run_wm(
        "workers", "list", "--pool", "proj-ci/nope", db_url=db_url, config=example_config
    )

    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split()[:3] == ["worker", "id", "group"]
    rows = {line.split()[6]: line.split() for line in lines if line.strip() and "-" * 3 not in line}
    assert rows["w-named"][:5] == ["vm-named", "eastus", pool_id, "azure-sim", "running"]
    assert rows["w-intent"][:5] == ["-", "eastus", pool_id, "azure-sim", "requested"]
    listed = {w["worker_id"]: w for w in json.loads(as_json.stdout)}
    assert listed["w-named"]["tc_worker_id"] == "vm-named"
    assert listed["w-intent"]["tc_worker_id"] is None
    assert unknown.returncode != 0 and "proj-ci/nope" in unknown.stderr


def test_status_says_how_many_imported_workers_remain_until_none_does(
    example_config, db_url, engine
):
    plain = example_config.read_text()
    adopting = example_config.parent / "adopting.toml"
    adopting.write_text(
        plain.replace('id = "azure-sim"\n', 'id = "azure-sim"\nadopt_legacy = true\n')
    )
    apply = run_wm("pools", "apply", str(EXAMPLE_POOLS), db_url=db_url, config=example_config)
    assert apply.returncode == 0, apply.stderr
    assert "take-over" not in run_wm("status", db_url=db_url, config=example_config).stdout
    (lc_id,) = [
        lc.launch_config_id
        for lc in pool_store.load_launch_configs(engine)
        if lc.pool_id == "proj-ci/azure-win"
    ]
    now = datetime.now(UTC)
    with engine.begin() as conn:  # as `wm import` writes it
        imported_workers.adopt_workers(
            conn,
            [
                imported_workers.AdoptedWorker(
                    worker_id=imported_worker_id("proj-ci/azure-win", "eastus", "vm-1"),
                    pool_id="proj-ci/azure-win",
                    worker_group="eastus",
                    tc_worker_id="vm-1",
                    provider_id="azure-sim",
                    state=WorkerState.RUNNING,
                    capacity=1,
                    launch_config_id=lc_id,
                    created=now,
                    last_modified=now,
                    expires=None,
                    registered_at=now,
                    provider_data={IMPORTED_FROM: "https://tc.example.test"},
                )
            ],
        )

    left = run_wm("status", db_url=db_url, config=adopting)
    not_adopting = run_wm("status", db_url=db_url, config=example_config)
    with engine.begin() as conn:  # its VM gone, as a scan records it
        conn.execute(text("UPDATE workers SET state = 'stopped'"))
    none_left = run_wm("status", db_url=db_url, config=adopting)

    assert left.returncode == none_left.returncode == 0, left.stderr
    assert left.stdout.splitlines()[-1] == (
        "take-over: 1 imported worker remains (azure-sim 1); when 0 you can set adopt_legacy = "
        "false on its providers and drop [take_over] from the config."
    )
    assert not_adopting.stdout.splitlines()[-1] == (
        "take-over: 1 imported worker remains (azure-sim 1 without adopt_legacy: its scans miss"
        " them); when 0 you can set adopt_legacy = false on its providers and drop [take_over]"
        " from the config."
    )
    assert none_left.stdout.splitlines()[-1] == (
        "take-over: no imported worker remains: you can set adopt_legacy = false on its "
        "providers and drop [take_over] from the config."
    )
