"""Shared fixtures: the Postgres server and the simulated clouds; the run's summary sections."""

from collections import defaultdict
from typing import Any

import pytest

from tests.chaos.scene import FIGURES
from tests.support.summary import SECTIONS, WORKER_OUTPUT_KEY

pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.sim_ec2",
    "tests.fixtures.sim_gce",
    "tests.fixtures.sim_arm",
    "tests.fixtures.identity",
    "tests.fixtures.stacks",
]

CHAOS_SECTION = "chaos figures"

# The sections that pytest-xdist's workers sent back, each when it finished.
_from_workers: defaultdict[str, list[str]] = defaultdict(list)


def _sections_here() -> dict[str, list[str]]:
    """This process's sections: the chaos scenarios' figures (a row per scenario, complete only
    once they all ran) and what tests added to SECTIONS."""
    here = {CHAOS_SECTION: list(FIGURES.lines()), **SECTIONS}
    return {name: lines for name, lines in here.items() if lines}


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker
        output[WORKER_OUTPUT_KEY] = _sections_here()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    for name, lines in getattr(node, "workeroutput", {}).get(WORKER_OUTPUT_KEY, {}).items():
        _from_workers[name].extend(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    sections = defaultdict(list, {name: list(lines) for name, lines in _from_workers.items()})
    for name, lines in _sections_here().items():
        sections[name].extend(lines)
    for name, lines in sorted(sections.items()):
        terminalreporter.section(name)
        # Chaos rows come from every worker, each named for its scenario: in name order.
        for line in sorted(lines) if name == CHAOS_SECTION else lines:
            terminalreporter.write_line(line)
