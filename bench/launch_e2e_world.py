"""The world an arm of issue 40's end-to-end benchmark (bench/launch_choice_e2e.py) runs in:
its seeded tasks, the scenario's pools as Taskcluster definitions, the simulated clouds
(`wmsim serve`) and the arm's OS processes."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import AZURE_RESOURCE_GROUP, AZURE_SUBSCRIPTION, PROVIDER_IDS, REPO_DIR, toml_text
from wmsim.aws.run_instances import example_launch_config as ec2_launch_config
from wmsim.azure.launch_configs import example_launch_config as arm_launch_config
from wmsim.config import NO_METADATA_PROBES, child_environment
from wmsim.control import SimClient
from wmsim.gcp.launch_config import example_launch_config as gce_launch_config
from wmsim.market.scenario import PoolSpec, Scenario
from wmsim.serve import SimEndpoint

REGISTRATION_TIMEOUT_S = 900.0  # market seconds: a VM not registered by then never will
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
CLOUD_BOOT_MARKET_S = {"aws": 75.0, "gcp": 60.0, "azure": 180.0}


@dataclass(frozen=True)
class Arrival:
    at_s: float  # market seconds since the run's start
    pool_id: str
    duration_s: float  # market seconds


def scaled_pools(scenario: Scenario, scale: float) -> list[PoolSpec]:
    return [
        PoolSpec(
            p.pool_id,
            max(2, round(p.max_capacity * scale)),
            p.tasks_per_hour * scale,
            p.task_min,
            p.burst_every_h,
            max(1, round(p.burst_tasks * scale)) if p.burst_tasks else 0,
            p.launch_configs,
        )
        for p in scenario.pools
    ]


def arrivals(pools: Sequence[PoolSpec], seed: int, start_s: float, span_s: float) -> list[Arrival]:
    """Every task of the run, in order: each pool's Poisson stream and its bursts (every
    `burst_every_h`, half a period into each, as layer 1's), durations gamma(2) around the
    pool's `task_min`; seeded per pool, the same for every arm."""
    out: list[Arrival] = []
    for pool in pools:
        rng = random.Random(f"e2e-tasks:{seed}:{pool.pool_id}")
        times: list[float] = []
        t = start_s
        while pool.tasks_per_hour > 0:
            t += rng.expovariate(pool.tasks_per_hour / 3600)
            if t >= start_s + span_s:
                break
            times.append(t)
        if pool.burst_every_h > 0 and pool.burst_tasks > 0:
            period = pool.burst_every_h * 3600
            b = period / 2
            while b < start_s + span_s:
                if b >= start_s:
                    times += [b] * pool.burst_tasks
                b += period
        for at in sorted(times):
            duration = rng.gammavariate(2.0, pool.task_min * 60 / 2)
            out.append(Arrival(at - start_s, pool.pool_id, duration))
    return sorted(out, key=lambda a: (a.at_s, a.pool_id))


def definitions(pools: Sequence[PoolSpec], speed: float) -> list[tuple[str, dict[str, Any]]]:
    """Each scenario pool as a createWorkerPool body on its cloud's provider: a spot launch
    config per offering, in its zone (EC2 Placement, GCE zone) or location (Azure)."""
    out = []
    for pool in pools:
        kind = pool.launch_configs[0].offering.cloud
        configs = []
        for lc in pool.launch_configs:
            o = lc.offering
            common = {
                "launch_config_id": lc.launch_config_id,
                "weight": lc.weight,
                "capacity": lc.capacity_per_worker,
                "max_capacity": lc.max_capacity,
                "spot": True,
            }
            if kind == "aws":
                config = ec2_launch_config(o.region, instance_type=o.instance_type, **common)
                if o.zone:
                    config["launchConfig"]["Placement"] = {"AvailabilityZone": o.zone}
            elif kind == "gcp":
                config = gce_launch_config(o.zone or "", machine_type=o.instance_type, **common)
            else:
                config = arm_launch_config(
                    o.region,
                    vm_size=o.instance_type,
                    subscription_id=AZURE_SUBSCRIPTION,
                    resource_group=AZURE_RESOURCE_GROUP,
                    **common,
                )
            configs.append(config)
        body = {
            "providerId": PROVIDER_IDS[kind],
            "description": f"issue 40 end to end: {pool.pool_id}",
            "owner": "bench@example.com",
            "emailOnError": False,
            "config": {
                "minCapacity": 0,
                "maxCapacity": pool.max_capacity,
                "scalingRatio": 1.0,
                "lifecycle": {"registrationTimeout": max(1, round(REGISTRATION_TIMEOUT_S / speed))},
                "launchConfigs": configs,
            },
        }
        out.append((pool.pool_id, body))
    return out


def regions(pools: Sequence[PoolSpec]) -> dict[str, list[str]]:
    """Each cloud's regions (GCE: zones) the pools launch in."""
    out: dict[str, set[str]] = {}
    for pool in pools:
        for lc in pool.launch_configs:
            o = lc.offering
            out.setdefault(o.cloud, set()).add(o.zone if o.cloud == "gcp" and o.zone else o.region)
    return {kind: sorted(values) for kind, values in out.items()}


class Clouds:
    """`wmsim serve` in a process of its own, and a client of each sim's control endpoints."""

    def __init__(self, tmp: Path, speed: float, latency_ms: float) -> None:
        sim: dict[str, Any] = {"state_dir": str(tmp / "sim")}
        for kind, boot in CLOUD_BOOT_MARKET_S.items():
            sim[kind] = {"port": 0, "boot_s": boot / speed, "latency_ms": latency_ms}
        config = tmp / "sim.toml"
        config.write_text(toml_text({"deployment_id": "wm-bench-e2e", "sim": sim}))
        endpoints_file = tmp / "endpoints.json"
        self.log = open(tmp / "clouds.log", "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wmsim", "--config", str(config), "serve",
             "--endpoints-file", str(endpoints_file)],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO_DIR,
            env=child_environment(dict(NO_METADATA_PROBES)),
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not endpoints_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    "the simulated clouds did not start:\n" + (tmp / "clouds.log").read_text()
                )
            time.sleep(0.1)
        self.endpoints = {
            e["kind"]: SimEndpoint(**e) for e in json.loads(endpoints_file.read_text())
        }
        self.clients = {
            kind: SimClient(kind, e.endpoint, e.cert_path) for kind, e in self.endpoints.items()
        }

    def reset(self) -> None:
        for client in self.clients.values():
            client.control("reset", {})
            client.control("requests/reset", {})

    def use_market(self, scenario: str, seed: int, speed: float, start_s: float) -> float:
        """Give every sim the market; the wall-clock time its clock started (a few ms
        apart between the sims)."""
        attached = time.time()
        for client in self.clients.values():
            client.use_market(scenario, seed=seed, speed=speed, start_s=start_s)
        return attached

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self.log.close()


class Processes:
    """An arm's OS processes on one config and database, each logging to a file of its own."""

    def __init__(self, tmp: Path, config_path: Path, db_url: str, web_port: int) -> None:
        self.tmp = tmp
        self.env = child_environment(
            {"WM_CONFIG": str(config_path), "DATABASE_URL": db_url, "PORT": str(web_port),
             "PYTHONUNBUFFERED": "1", **NO_METADATA_PROBES},
        )  # fmt: skip
        self.env.pop("SENTRY_DSN", None)
        self.running: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: Sequence[str], extra_env: Mapping[str, str] = {}) -> None:
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 (the child holds it)
        self.running[name] = subprocess.Popen(
            [sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO_DIR,
            env={**self.env, **extra_env},
        )  # fmt: skip
        log.close()

    def entries(self, name: str) -> Iterator[dict[str, Any]]:
        path = self.tmp / f"{name}.log"
        for line in path.read_text().splitlines() if path.exists() else []:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    yield entry

    def crashed(self) -> str | None:
        for name, process in self.running.items():
            if process.poll() is not None:
                tail = (self.tmp / f"{name}.log").read_text()[-3000:]
                return f"{name} exited ({process.returncode}):\n{tail}"
        return None

    def stop(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)

    def warnings(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for name in self.running:
            for entry in self.entries(name):
                if entry.get("level") in ("warning", "error", "critical"):
                    counts[f"{entry['level']}:{entry.get('event')}"] += 1
        return dict(counts)


def wait_until(check: Any, what: str, processes: Processes) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if check():
            return
        if crash := processes.crashed():
            raise RuntimeError(crash)
        time.sleep(0.2)
    raise RuntimeError(f"{what}: not within {START_TIMEOUT_S:g} s")


def web_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False
