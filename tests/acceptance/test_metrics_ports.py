"""The Procfile's processes on one host: each serves metrics on its own port, and a port held
by another process is one clear error and exit 2, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.support.stack import (
    REPO,
    START_TIMEOUT_S,
    Stack,
    aws_provider,
    azure_provider,
    gcp_provider,
    pool,
)
from wm.ops.metrics_ports import METRICS_PORTS
from wmsim.config import simulated_child_environment
from wmsim.demo.supervisor import read_procfile
from wmsim.postgres import free_port, free_port_range

# What each of the Procfile's long-running processes serves at its port, past `[metrics] port`.
SERVED = {
    "provisioner": (0, "wm_provision_pass_seconds_count"),
    "scanner-aws": (1, "wm_scan_seconds_count"),
    "scanner-gcp": (2, "wm_scan_seconds_count"),
    "scanner-azure": (3, "wm_scan_seconds_count"),
}


@pytest.fixture
def three_clouds(tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm, stacks) -> Stack:
    often = {"scan_interval_s": 2.0}
    aws, gcp = aws_provider(sim_ec2, **often), gcp_provider(sim_gce, **often)
    azure = azure_provider(sim_arm, **often)
    pools = [pool("proj/a", aws), pool("proj/g", gcp), pool("proj/z", azure)]
    stack = Stack.write(
        tmp_path,
        db_url,
        [aws, gcp, azure],
        pools,
        intervals={"provision_s": 1.0},
        web={"port": free_port()},
        metrics={"port": free_port_range(METRICS_PORTS)},
    )
    stacks.append(stack)
    stack.sync_pools(engine)
    return stack


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return answer.read().decode()


def run_once(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wm", *args],
        env=simulated_child_environment(stack.path, stack.db_url),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )


@pytest.mark.slow
def test_the_procfiles_processes_share_a_host_each_serving_metrics_on_its_own_port(
    three_clouds,
):
    base = three_clouds.data["metrics"]["port"]
    commands = {e.name: e.command.split() for e in read_procfile(REPO / "Procfile")}
    processes = {}
    for name in SERVED:
        argv = commands[name]
        assert argv[:3] == ["exec", "wm", "run"], f"{name}: {' '.join(argv)}"
        processes[name] = three_clouds.start(*argv[3:])
    for name, (offset, sample) in SERVED.items():
        process = processes[name]
        process.wait_for(
            lambda p=process: bool(p.events("provision-pass") or p.events("scan")),
            START_TIMEOUT_S,
            f"{name}'s first pass",
        )
        process.wait_for(
            lambda o=offset, s=sample: s in metrics(base + o), 30, f"{name}'s {sample}"
        )
    for name, process in processes.items():
        code, _ = process.terminate()
        assert code == 0, f"{name}:\n" + "".join(process.raw[-20:])


def test_a_metrics_port_in_use_is_one_line_naming_the_port_the_process_and_the_setting(
    three_clouds,
):
    taken = three_clouds.data["metrics"]["port"] + 2  # scanner-gcp's
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", taken))
        holder.listen()
        done = run_once(three_clouds, "run", "scanner", "--kind", "gcp")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: scanner-gcp: metrics port {taken} is in use by another process on this host; "
        "set [metrics] port in the config (the first of the processes' ports) or give this "
        "process --metrics-port N (0: no metrics)"
    ]
    assert "Traceback" not in done.stdout


def test_a_provisioner_whose_metrics_port_is_in_use_starts_no_child(three_clouds):
    taken = three_clouds.data["metrics"]["port"]
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", taken))
        holder.listen()
        done = run_once(three_clouds, "run", "provisioner")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"error: provisioner: metrics port {taken} is in use" in done.stderr
    assert "child-started" not in done.stdout


def test_a_web_port_in_use_names_the_port_and_how_to_move_it(three_clouds):
    port = three_clouds.data["web"]["port"]
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", port))
        holder.listen()
        done = run_once(three_clouds, "run", "web")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: web: port {port} is in use by another process on this host; "
        "set $PORT or [web] port in the config"
    ]
