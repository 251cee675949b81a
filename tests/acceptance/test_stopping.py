"""Stopping wm's processes the way platforms do: one signal to the whole process group.

Heroku, systemd (KillMode=control-group), honcho and a Ctrl-C at a terminal signal every
process of the group at once, so the provisioner's children get the signal when it does. A
clean stop is exit 0 with nothing logged at error level, every time, and nothing left running.
"""

from __future__ import annotations

import signal

import pytest

from tests.support.stack import (
    START_TIMEOUT_S,
    Stack,
    WmProcess,
    aws_provider,
    azure_provider,
    gcp_provider,
    pool,
)
from wmsim.postgres import free_port

TRIES = 3  # the race this guards against lost about one try in two: 6 tries, both signals
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]
FAST = {"provision_s": 0.3}


@pytest.fixture
def three_clouds(tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm, stacks) -> Stack:
    aws, gcp, azure = aws_provider(sim_ec2), gcp_provider(sim_gce), azure_provider(sim_arm)
    pools = [pool("proj/a", aws), pool("proj/g", gcp), pool("proj/z", azure)]
    stack = Stack.write(
        tmp_path, db_url, [aws, gcp, azure], pools, intervals=FAST, web={"port": free_port()}
    )
    stacks.append(stack)
    stack.sync_pools(engine)
    return stack


def errors(process: WmProcess) -> list[dict]:
    return [line for line in list(process.lines) if line.get("level") == "error"]


def passes(process: WmProcess, provider: str) -> int:
    return sum(1 for e in process.events("provision-pass") if e.get("provider") == provider)


def stop_cleanly(process: WmProcess, signum: int) -> None:
    code = process.stop_group(signum)
    tail = "".join(process.raw[-30:])
    assert code == 0, f"exit {code} after {signal.Signals(signum).name}:\n{tail}"
    assert errors(process) == [], tail
    assert not process.group_alive(), "a process of its group outlived it"


@pytest.mark.slow
@pytest.mark.parametrize("signum", SIGNALS)
def test_the_provisioner_and_its_children_stopped_together_exit_0_every_time(three_clouds, signum):
    for _ in range(TRIES):
        process = three_clouds.start("provisioner", new_session=True)
        process.wait_for(
            lambda p=process: all(passes(p, c) >= 2 for c in ("aws-sim", "gcp-sim", "azure-sim")),
            START_TIMEOUT_S,
            "two passes on every cloud, each in its child",
        )
        stop_cleanly(process, signum)


@pytest.mark.parametrize("signum", SIGNALS)
@pytest.mark.parametrize("args", [("scanner", "--kind", "aws"), ("web",)], ids=["scanner", "web"])
def test_a_scanner_and_the_web_process_stopped_through_their_group_exit_0(
    three_clouds, signum, args
):
    for _ in range(2):
        process = three_clouds.start(*args, new_session=True)
        process.wait_for(process.started, START_TIMEOUT_S, "its start")
        stop_cleanly(process, signum)


@pytest.mark.parametrize("signum", SIGNALS)
def test_a_process_stopped_while_it_starts_exits_0_without_starting_its_jobs(three_clouds, signum):
    # Scenario: a GCE scanner is stopped while it starts. Building its provider imports the
    # SDK, seconds on a busy machine: longer than a platform's grace, were it let finish.
    process = three_clouds.start("scanner", "--kind", "gcp", new_session=True)
    process.wait_for(lambda: bool(process.events("process-starting")), START_TIMEOUT_S, "its start")

    code = process.stop_group(signum)

    tail = "".join(process.raw[-30:])
    assert code == 0, tail
    assert process.events("process-started") == [], "it finished its start before it stopped"
    assert [e["exit_code"] for e in process.events("process-stopped")] == [0], tail
    assert errors(process) == [], tail
