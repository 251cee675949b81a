"""Fixtures of the chaos scenarios: the three simulated clouds at once, wm processes, and the
figures each scenario measured, printed at the end of the run (see tests/chaos/scene.py)."""

from __future__ import annotations

import pytest

from tests.chaos.scene import CHAOS_FIGURES_KEY, FIGURES, Clouds, Figures
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.gcp.gce import SimGce


@pytest.fixture
def clouds(sim_ec2: SimEc2, sim_gce: SimGce, sim_arm: SimArm) -> Clouds:
    return Clouds(sim_ec2, sim_gce, sim_arm)


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Where a scenario records what it measured, under its own name and size."""
    return FIGURES.for_test(request.node)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under pytest-xdist this runs in each worker: its figures go back to the controller, which
    # prints them all (tests/conftest.py).
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[CHAOS_FIGURES_KEY] = list(FIGURES.lines())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES.rows:
        terminalreporter.section("chaos figures")
        for line in FIGURES.lines():
            terminalreporter.write_line(line)
