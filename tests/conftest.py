"""Shared fixtures: the Postgres server and the simulated clouds."""

from typing import Any

import pytest

from tests.chaos.scene import CHAOS_FIGURES_KEY

pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.sim_ec2",
    "tests.fixtures.sim_gce",
    "tests.fixtures.sim_arm",
    "tests.fixtures.identity",
    "tests.fixtures.stacks",
]


# The chaos scenarios' figures, when pytest-xdist ran them in workers: each worker sends its
# lines when it finishes (tests/chaos/conftest.py) and the controller prints them together.
_worker_figures: list[str] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    _worker_figures.extend(getattr(node, "workeroutput", {}).get(CHAOS_FIGURES_KEY, []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _worker_figures:
        terminalreporter.section("chaos figures")
        for line in sorted(_worker_figures):
            terminalreporter.write_line(line)
