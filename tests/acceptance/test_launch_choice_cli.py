"""`[launch_choice]` and `wm pools explain` as an operator meets them: `wm` as a subprocess,
real Postgres, exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wm.db import offering_state
from wm.db.offering_state import BenchEntry
from wm.model import Offering, OfferingSignal, SignalKind
from wm.provisioning.offering_bench import BenchState

REPO = Path(__file__).resolve().parents[2]
POOLS = REPO / "pools" / "proj-ci.yml"
POOL = "proj-ci/linux-large"  # us-east-1 (weight 1.0) and us-west-2 (0.5), m5.large on demand
EAST = Offering("us-east-1", None, "m5.large", "on-demand")
WEST = Offering("us-west-2", None, "m5.large", "on-demand")
CHOICE = """
[launch_choice]
default = "weights"
[[launch_choice.pools]]
match = "proj-ci/*"
mode = "cost"
"""


def run_wm(*args: str, db_url: str | None = None, config: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WM_CONFIG")}
    if db_url:
        env["DATABASE_URL"] = db_url
    if config:
        env["WM_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "wm", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def config_with(tmp_path: Path, section: str) -> Path:
    path = tmp_path / "config.toml"
    source = (REPO / "config.toml").read_text()
    # Before the first table of another owner, so that it is a top-level table of wm's.
    head, sep, tail = source.partition("# ---- providers")
    path.write_text(head + section + "\n" + sep + tail)
    return path


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ('[launch_choice]\ndefualt = "cost"\n', "launch_choice.defualt: unknown key"),
        (
            '[launch_choice]\n[[launch_choice.pools]]\nmatch = "a/*"\nmode = "cheapest"\n',
            "launch_choice.pools[0].mode: must be one of",
        ),
    ],
)
def test_a_launch_choice_typo_stops_the_provisioner_at_start_naming_its_key(
    tmp_path, db_url, section, expected
):
    done = run_wm("run", "provisioner", db_url=db_url, config=config_with(tmp_path, section))
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_explain_of_a_pool_that_does_not_exist_says_so_and_exits_2(tmp_path, db_url):
    config = config_with(tmp_path, CHOICE)
    assert run_wm("db", "upgrade", db_url=db_url, config=config).returncode == 0
    done = run_wm("pools", "explain", "no/such", db_url=db_url, config=config)
    assert done.returncode == 2
    assert "no pool 'no/such'" in done.stderr and "Traceback" not in done.stderr


def test_explain_shows_each_launch_configs_price_bench_and_weights(tmp_path, db_url, engine):
    # Scenario: the pool's cheaper region was just refused for capacity; wm holds both prices.
    config = config_with(tmp_path, CHOICE)
    assert run_wm("db", "upgrade", db_url=db_url, config=config).returncode == 0
    applied = run_wm("pools", "apply", str(POOLS), db_url=db_url, config=config)
    assert applied.returncode == 0, applied.stderr
    now = datetime.now(UTC)
    offering_state.write_signals(
        engine,
        [
            OfferingSignal("aws-sim", EAST, SignalKind.PRICE, 0.096, "test", now),
            OfferingSignal("aws-sim", WEST, SignalKind.PRICE, 0.192, "test", now),
        ],
        fresh_for_s=3600.0,
    )
    until = now.timestamp() + 600
    offering_state.write_bench(
        engine,
        "aws-sim",
        {EAST: BenchEntry(BenchState(2, until), "InsufficientInstanceCapacity")},
    )

    as_json = run_wm("pools", "explain", POOL, "--json", db_url=db_url, config=config)
    as_text = run_wm("pools", "explain", POOL, db_url=db_url, config=config)

    assert as_json.returncode == 0, as_json.stderr
    found = json.loads(as_json.stdout)
    assert (found["pool_id"], found["mode"], found["cost_per_hour"]) == (POOL, "cost", 0.0)
    east, west = sorted(found["launch_configs"], key=lambda c: c["offering"])
    assert east["offering"] == EAST.key and west["offering"] == WEST.key
    assert (east["price_per_hour"], west["price_per_hour"]) == (0.096, 0.192)
    assert (east["weight"], west["weight"]) == (1.0, 0.5)
    # Benched: nothing launches there until the window ends, and it says why.
    assert (east["admission"], east["final_weight"]) == ("benched", 0.0)
    assert east["bench_failures"] == 2
    assert east["bench_code"] == "InsufficientInstanceCapacity"
    assert east["benched_until"] == datetime.fromtimestamp(until, UTC).isoformat("T", "seconds")
    assert any("bench" in why for why in east["why"])
    assert west["admission"] == "open" and west["final_weight"] > 0
    assert as_text.returncode == 0, as_text.stderr
    assert "launches by cost" in as_text.stdout
    assert "benched until" in as_text.stdout and "InsufficientInstanceCapacity" in as_text.stdout
