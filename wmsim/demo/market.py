"""`wmsim demo --market`: the market's compressed clock, its scripted dry spells in the demo's
time, and the `[launch_choice]` tables that put the demo's pools in cost mode (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wmsim.config import DemoConfig
from wmsim.demo.market_report import DrySpell
from wmsim.market.scenario import Scenario

DRY_AT_FRACTION = 1 / 3  # the first dry spell begins this far into the workload
NO_EVENT_SPEED = 60.0  # a scenario without a dry spell: a market hour per real minute
BUCKETS = 12  # the report's launches over time: this many buckets over the workload


def market_speed(demo: DemoConfig, scenario: Scenario) -> float:
    """Market seconds per real second: the config's, else the one that starts the scenario's
    first dry spell a third of the way into the workload."""
    if demo.market_speed is not None:
        return demo.market_speed
    dry = [e.at_s for e in scenario.events if e.regime == "dry" and e.at_s > 0]
    if not dry:
        return NO_EVENT_SPEED
    return min(dry) / (demo.minutes * 60 * DRY_AT_FRACTION)


def dry_spells(scenario: Scenario, speed: float) -> list[DrySpell]:
    """The scenario's dry spells, in real seconds after the market's clock started."""
    return [
        DrySpell(e.place, e.at_s / speed, e.for_s / speed)
        for e in sorted(scenario.events, key=lambda e: (e.at_s, e.place))
        if e.regime == "dry"
    ]


def bucket_s(demo: DemoConfig) -> float:
    return max(1.0, round(demo.minutes * 60 / BUCKETS))


def by_cost(launch_choice: Mapping[str, Any], pool_ids: Sequence[str]) -> dict[str, Any]:
    """The config's `[launch_choice]` with the demo's pools in cost mode, ahead of the tables
    it had (the first match wins)."""
    tables = [{"match": pool_id, "mode": "cost"} for pool_id in pool_ids]
    return {**launch_choice, "pools": [*tables, *launch_choice.get("pools", [])]}


def place(kind: str, region: str, zone: str | None) -> str:
    """A market place (cloud/region/zone) from wm's offering's region and zone."""
    return f"{kind}/{region}/{zone or '*'}"
