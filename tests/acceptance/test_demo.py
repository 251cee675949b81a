"""`wmsim demo` end to end, as a new user runs it: every Procfile process, the simulated clouds,
a short workload, the report and the plot; and Ctrl-C in the middle leaves nothing running."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tomli_w
import yaml

from wm.pools.config_tables import OldProvider, convert
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.config import simulated_child_environment
from wmsim.gcp.identity import service_account_id

REPO = Path(__file__).resolve().parents[2]
FIGURES = (
    "tasks_submitted",
    "tasks_completed",
    "task_wait_p50_s",
    "task_wait_p95_s",
    "registration_p95_s",
    "peak_capacity_over_demand",
    "scan_api_calls",
    "scan_duration_p95_s",
    "leaked_vms",
    "crashed_processes",
)
AZURE_DEMO_SUBSCRIPTION = "00000000-0000-0000-0000-0000000000de"
DEMO_WORKER_ACCOUNT = "wm-workers@demo.iam.gserviceaccount.com"  # GCE workers register as it
FAST = {"scan_interval_s": 1.0, "gate": {"backoff_base_s": 0.05, "backoff_max_s": 0.2}}


STATIC_POOL = "demo/rack"


def short_demo_config(path: Path, **demo: object) -> Path:
    """A pool on each cloud and a static pool of hand-made machines, fast clouds and
    intervals, a workload of a few seconds."""
    launch = {
        "aws": {
            "region": "us-east-1",
            "machine_type": "m5.large",
            "image": "ami-0123456789abcdef0",
        },
        "gcp": {
            "region": "us-central1-a",
            "machine_type": "e2-small",
            "image": "projects/debian-cloud/global/images/family/debian-12",
        },
        "azure": {
            "region": "eastus",
            "machine_type": "Standard_D2s_v5",
            "image": "Canonical:ubuntu-24_04-lts:server:latest",
        },
    }
    config = {
        "deployment_id": "wm-demo-test",
        "intervals": {"provision_s": 1.0},
        "providers": [
            {"id": "aws-sim", "kind": "aws", "regions": ["us-east-1"], **FAST},
            {
                "id": "gcp-sim",
                "kind": "gcp",
                "project": "demo",
                "regions": ["us-central1-a"],
                "worker_service_account_email": DEMO_WORKER_ACCOUNT,
                "worker_service_account_id": service_account_id(DEMO_WORKER_ACCOUNT),
                "operation_poll_s": 0.05,
                **FAST,
            },
            {
                "id": "azure-sim",
                "kind": "azure",
                "subscription_id": AZURE_DEMO_SUBSCRIPTION,
                "resource_group": "demo",
                "regions": ["eastus"],
                **FAST,
            },
            {"id": "static-rack", "kind": "static"},
        ],
        "sim": {
            "aws": {"boot_s": 1.0},
            "gcp": {"boot_s": 1.0},
            "azure": {"boot_s": 1.5, "delete_s": 0.5},
        },
        "demo": {
            "minutes": 0.15,
            "tasks_per_minute": 60,
            "burst_tasks": 20,
            "task_s": [1.0, 3.0],
            # Every cloud and the rack get work, whatever their share would round to.
            "cloud_shares": {"aws": 0.5, "azure": 0.2, "gcp": 0.15, "static": 0.15},
            "hand_made_machines": 2,
            "hand_made_capacity": 2,
            "idle_timeout_s": 2.0,
            "drain_timeout_s": 60.0,
            "sample_s": 0.5,
            **demo,
        },
    }
    path.write_text(tomli_w.dumps(config))
    pools = [
        {
            "id": f"demo/{kind}",
            "provider": f"{kind}-sim",
            "max_capacity": 20,
            "registration_timeout_s": 60,
            # worker-runner on GCE will not start without an external IP to read
            "launch_configs": [{**launch[kind], "public_ip": kind == "gcp"}],
        }
        for kind in ("aws", "gcp", "azure")
    ]
    providers = {
        "aws-sim": OldProvider("aws"),
        "gcp-sim": OldProvider("gcp"),
        "azure-sim": OldProvider("azure", default_subnet_id(AZURE_DEMO_SUBSCRIPTION, "demo")),
    }
    conversion = convert(pools, providers, owner="demo-test@example.com")
    assert not conversion.problems, conversion.problems
    # worker-manager's static pool: renewals every few seconds, so the machines reregister.
    static_pool = {
        "workerPoolId": STATIC_POOL,
        "providerId": "static-rack",
        "description": "hand-made machines",
        "owner": "demo-test@example.com",
        "emailOnError": False,
        "config": {"lifecycle": {"reregistrationTimeout": 8}, "workerConfig": {}},
    }
    definitions_of(path).write_text(yaml.safe_dump_all([*conversion.documents, static_pool]))
    return path


def definitions_of(config: Path) -> Path:
    """The pool definitions written beside a test's config.toml."""
    return config.parent / "pools.yml"


def start_demo(tmp_path: Path, db_url: str, config: Path, *args: str) -> subprocess.Popen[str]:
    env = simulated_child_environment(config, db_url)
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "wmsim", "demo", "--out", str(tmp_path / "out"), "--no-live"),
            *("--pools", str(definitions_of(config)), *args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
    )


def processes_of(run_dir: Path) -> list[str]:
    """Command lines of processes still running with this run's config (its children)."""
    marker = str(run_dir / "out" / "config.toml")
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker.encode() in environ:
                found.append(cmdline)
    return found


def test_a_short_demo_runs_every_process_and_reports_a_healthy_run(tmp_path, db_url):
    config = short_demo_config(tmp_path / "config.toml")

    demo = start_demo(tmp_path, db_url, config)
    output, _ = demo.communicate(timeout=240)

    assert demo.returncode == 0, output
    assert "healthy" in output
    out = tmp_path / "out"
    report = json.loads((out / "report.json").read_text())
    assert report["healthy"] and report["problems"] == []
    for scope in (report["run"], *report["clouds"].values()):
        assert set(FIGURES) <= set(scope)
    run = report["run"]
    assert run["tasks_submitted"] > 20 and run["tasks_completed"] == run["tasks_submitted"]
    assert run["leaked_vms"] == 0 and run["crashed_processes"] == 0
    for cloud, figures in report["clouds"].items():
        # Every cloud launched workers that registered and ran tasks, and was scanned.
        assert figures["tasks_completed"] > 0, cloud
        assert figures["registration_p95_s"] is not None, cloud
        assert figures["scans"] > 0 and figures["scan_api_calls"] >= 1, cloud
    # The static pool: two machines made with createWorker registered through worker-runner's
    # static path, ran tasks, and were stopped when the operator retired them.
    machines = report["hand_made"]["machines"]
    assert [(m["workerPoolId"], m["workerGroup"]) for m in machines] == [
        (STATIC_POOL, "rack-1")
    ] * 2
    assert all(m["registered"] and m["tasks_completed"] > 0 for m in machines), machines
    assert {m["state"] for m in machines} == {"stopped"}
    static = report["hand_made"]["figures"]
    assert static["tasks_completed"] == static["tasks_submitted"] > 0
    assert report["pool_clouds"][STATIC_POOL] == "static"
    runner_config = yaml.safe_load((out / "rack" / f"{machines[0]['workerId']}.yml").read_text())
    assert runner_config["provider"]["providerType"] == "static"
    assert "static" in output and "hand-made" in output
    # No launch for demand that was already covered (the rack's capacity is not launched).
    assert run["peak_capacity_over_demand"] <= 1.0
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each Procfile process ran as an OS process of its own and logged there.
    for name in ("web", "provisioner", "scanner-aws", "scanner-gcp", "scanner-azure"):
        assert (out / "logs" / f"{name}.log").stat().st_size > 0, name
    assert processes_of(tmp_path) == []


def test_on_spot_pools_with_pre_emptions_every_task_still_completes(tmp_path, db_url):
    # Every pool on spot VMs; the clouds take back a third of them within 3 s of boot.
    config = short_demo_config(tmp_path / "config.toml", preempt_within_s=3.0)

    demo = start_demo(tmp_path, db_url, config, "--preempt", "0.35")
    output, _ = demo.communicate(timeout=240)

    assert demo.returncode == 0, output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    run = report["run"]
    assert run["tasks_completed"] == run["tasks_submitted"] > 0
    assert run["preemptions"] > 0, run
    assert {"replacements", "replace_p50_s", "replace_p95_s"} <= set(run)
    assert run["leaked_vms"] == 0
    assert (
        "worker-preempted"
        in (tmp_path / "out" / "logs" / "scanner-aws.log").read_text()
        + (tmp_path / "out" / "logs" / "scanner-gcp.log").read_text()
        + (tmp_path / "out" / "logs" / "scanner-azure.log").read_text()
    )
    for pool in report["pools"].values():
        assert pool["slowest_stage"] is not None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_the_demo_midway_stops_everything_it_started(tmp_path, db_url, signum):
    config = short_demo_config(tmp_path / "config.toml", minutes=5.0)
    demo = start_demo(tmp_path, db_url, config)
    log = tmp_path / "out" / "logs" / "web.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
        assert demo.poll() is None, demo.stdout.read() if demo.stdout else ""
        time.sleep(0.2)

    demo.send_signal(signum)
    output, _ = demo.communicate(timeout=60)

    assert demo.returncode == 130, output
    assert "interrupted" in output
    assert processes_of(tmp_path) == []


def test_a_take_over_moves_azure_from_a_live_legacy_fleet_without_losing_a_worker(tmp_path, db_url):
    # Credentials last 16 s and are renewed every 4 s, on each worker's own timer, so the
    # workers imported mid-task reregister at wm before scale-down tells them to go, 12 s
    # before their credentials expire (a renewal through the forwarding took over 3 s at load
    # 10); idle ones wait 5 s before they leave, so the Azure fleet is still there when it moves.
    config = short_demo_config(
        tmp_path / "config.toml", minutes=0.4, take_over_reregistration_s=16, idle_timeout_s=5.0
    )

    demo = start_demo(tmp_path, db_url, config, "--take-over")
    output, _ = demo.communicate(timeout=240)

    assert demo.returncode == 0, output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["healthy"], report["problems"]
    move = report["take_over"]
    assert move["provider"] == "azure-sim" and move["moved_at_s"] > 0
    assert move["imported_pool_ids"] == ["demo/azure"]
    # Workers of the legacy Azure fleet ran through the move and renewed at wm.
    assert move["imported_workers"] > 0 and move["moved_workers_reregistered_at_wm"] > 0
    assert move["imported_workers_refused"] == move["imported_workers_told_to_terminate"] == 0
    assert move["legacy_workers_refused"] == 0
    assert move["tasks_lost"] == 0 and move["tasks_submitted"] > 20
    assert move["capacity_samples"] > 0 and move["capacity_samples_over_max"] == 0
    assert move["leaked_vms"] == move["leaked_resources"] == 0
    # AWS and GCE stayed with the legacy, reached through wm's forwarding, answering the same.
    assert move["forwarded_by_endpoint"].get("registerWorker", 0) > 0
    assert move["forwarded_answers_sampled"] == move["forwarded_answers_equal"] > 0
    assert "moved to wm" in output and "wm import --from" in output
    assert set(report["pool_clouds"]) == {"demo/aws", "demo/gcp", "demo/azure"}
    assert processes_of(tmp_path) == []
