"""`wmsim demo --market`, as a user runs it: the clouds obey a market scenario on a compressed
clock, the demo's pool has two zones and chooses by cost, the cheap zone runs dry a third of the
way in, and the report says what the run cost, where wm launched, and how soon it left the
dry zone."""

from __future__ import annotations

import json
import tomllib

import tomli_w
import yaml

from tests.acceptance.test_demo import (
    REPO,
    definitions_of,
    processes_of,
    short_demo_config,
    start_demo,
)

POOL = "proj-ci/linux-spot"  # pools/market/proj-ci.yml: us-east-1a (cheap) and us-east-1b


def test_a_market_demo_leaves_the_zone_that_runs_dry_and_reports_what_it_cost(tmp_path, db_url):
    # Scenario: the demo's AWS pool alone, in the `demo` market: us-east-1a runs dry at minute
    # 20 of the market, which the demo's clock puts 5 s into a 15 s workload.
    config = short_demo_config(
        tmp_path / "config.toml", minutes=0.25, cloud_shares={"aws": 1.0}, burst_tasks=12
    )
    (aws_pool,) = [
        d
        for d in yaml.safe_load_all((REPO / "pools" / "market" / "proj-ci.yml").read_text())
        if d["workerPoolId"] == POOL
    ]
    definitions_of(config).write_text(yaml.safe_dump(aws_pool))
    # EC2 alone: fewer processes to start on a busy machine.
    settings = tomllib.loads(config.read_text())
    settings["providers"] = [p for p in settings["providers"] if p["kind"] == "aws"]
    config.write_text(tomli_w.dumps(settings))

    demo = start_demo(tmp_path, db_url, config, "--market", "demo", "--market-seed", "3")
    output, _ = demo.communicate(timeout=240)

    assert demo.returncode == 0, output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["healthy"], report["problems"]
    market = report["market"]
    assert (market["scenario"], market["seed"]) == ("demo", 3)
    assert market["modes"] == {POOL: "cost"}  # the demo's config chose by cost
    # The clouds billed the run, per pool and per launch config, and per task-hour.
    cost = market["cost"]
    assert cost["total"] > 0 and cost["by_pool"][POOL] == cost["total"]
    assert set(cost["by_launch_config"]) <= {f"{POOL}/use1a", f"{POOL}/use1b"}
    assert cost["per_task_hour"] > 0
    # Where wm launched over time: both zones before the spell, per time bucket.
    launched = market["launches"]["pools"][POOL]
    assert sum(launched["use1a"]) > 0 and sum(launched["use1b"]) > 0
    # The dry zone: refused for capacity, and left within two passes of that refusal.
    (spell,) = market["dry_spells"]
    assert (spell["place"], spell["pool"]) == ("aws/us-east-1/us-east-1a", POOL)
    assert spell["refusal_code"] == "InsufficientInstanceCapacity"
    assert spell["first_refusal_at_s"] >= spell["dry_at_s"]
    assert spell["passes_to_leave"] in (1, 2), spell
    assert spell["left_at_s"] > spell["first_refusal_at_s"]
    # The live lines and the summary say it too.
    assert "billed $" in output and "ran dry" in output and "launched elsewhere" in output
    assert processes_of(tmp_path) == []
