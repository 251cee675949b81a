"""Fixtures of the chaos scenarios: the three simulated clouds at once, wm processes, and the
figures each scenario measured, printed at the end of the run (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.chaos.scene import FIGURES, Clouds, Figures
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
