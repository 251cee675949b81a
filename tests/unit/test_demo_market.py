"""`wmsim demo --market`: the market's clock puts the first dry spell a third of the way into the
workload, the demo's pools go to cost mode ahead of the config's own tables, and a scenario
that cannot be read stops the command before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from wmsim.cli import cli as wmsim_cli
from wmsim.config import DemoConfig
from wmsim.demo.market import by_cost, dry_spells, market_speed
from wmsim.market.scenario import load as load_scenario


def said(done) -> str:
    """What the command told the user (the entry point prints a UserError's message)."""
    return done.output + str(done.exception or "")


@pytest.mark.parametrize(
    ("demo", "scenario", "speed"),
    [
        # `demo`: dry at market minute 20; three minutes of workload put it at 60 s.
        (DemoConfig(minutes=3), "demo", 20.0),
        (DemoConfig(minutes=0.25), "demo", 240.0),
        # S1's first spell is at minute 120.
        (DemoConfig(minutes=3), "S1", 120.0),
        # S0 scripts no spell: a market hour a real minute.
        (DemoConfig(minutes=3), "S0", 60.0),
        # The config's speed wins.
        (DemoConfig(minutes=3, market_speed=5.0), "demo", 5.0),
    ],
)
def test_the_market_clock_starts_the_first_dry_spell_a_third_of_the_way_in(demo, scenario, speed):
    assert market_speed(demo, load_scenario(scenario)) == pytest.approx(speed)


def test_dry_spells_are_in_the_demos_seconds():
    spells = dry_spells(load_scenario("demo"), 20.0)

    assert {s.place for s in spells} == {
        "aws/us-east-1/us-east-1a",
        "gcp/us-central1/us-central1-a",
        "azure/eastus/1",
    }
    assert {(s.at_s, s.for_s) for s in spells} == {(60.0, 120.0)}


def test_the_demos_pools_choose_by_cost_ahead_of_the_configs_own_tables():
    config = {"beta": 2.0, "pools": [{"match": "proj-ci/*", "mode": "shadow"}]}

    chosen = by_cost(config, ["proj-ci/linux-spot"])

    assert chosen == {
        "beta": 2.0,
        "pools": [
            {"match": "proj-ci/linux-spot", "mode": "cost"},
            {"match": "proj-ci/*", "mode": "shadow"},
        ],
    }


def test_a_market_scenario_that_cannot_be_read_stops_the_demo_before_it_starts():
    done = CliRunner().invoke(wmsim_cli, ["demo", "--market", "S9"])

    assert done.exit_code != 0
    assert "--market: no market scenario 'S9' (known: S0" in said(done)


def test_a_take_over_runs_without_a_market():
    done = CliRunner().invoke(wmsim_cli, ["demo", "--take-over", "--market", "demo"])

    assert done.exit_code != 0 and "--take-over runs without a market" in said(done)
