"""wm's real processes against the simulated clouds: config files, subprocesses, their logs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tests.support.definitions import apply_pools
from wm.config import loader as config_module
from wm.config.loader import Config
from wmsim.config import simulated_child_environment
from wmsim.gcp.identity import service_account_id

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = "test-deploy"
# A process (Python, wm, the cloud SDKs) can take half a minute to start when several start at
# once on a busy 2-core machine; a wait for its start is bounded by this.
START_TIMEOUT_S = 90.0
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-00000000a2e0"
GCE_WORKER_ACCOUNT = "wm-workers@wm-test.iam.gserviceaccount.com"  # workers' service account
FAST_GATE = {
    "timeout_s": 10.0,
    "calls_per_s": 10_000.0,
    "burst": 10_000,
    "backoff_base_s": 0.01,
    "backoff_max_s": 0.05,
    "pause_after_failures": 4,
    "pause_s": 0.5,
}
# For a process that must resolve intents a dead one left: an unanswered create is looked up
# once the gate could no longer be retrying it, about 10 s with these limits.
RECOVERY_GATE = {**FAST_GATE, "timeout_s": 5.0, "max_attempts": 2}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def to_toml(data: dict[str, Any]) -> str:
    """Enough TOML for wm's config: scalars, inline tables, arrays of tables."""
    lines: list[str] = []
    tables = {k: v for k, v in data.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
    for key, value in data.items():
        if key not in tables:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, items in tables.items():
        for item in items:
            lines.append(f"\n[[{key}]]")
            nested = {
                k: v
                for k, v in item.items()
                if isinstance(v, list) and v and isinstance(v[0], dict)
            }
            for k, v in item.items():
                if k not in nested:
                    lines.append(f"{k} = {_toml_value(v)}")
            for k, rows in nested.items():
                for row in rows:
                    lines.append(f"\n[[{key}.{k}]]")
                    lines.extend(f"{rk} = {_toml_value(rv)}" for rk, rv in row.items())
    return "\n".join(lines) + "\n"


def aws_provider(sim, provider_id: str = "aws-sim", **changes: Any) -> dict[str, Any]:
    return {
        "id": provider_id,
        "kind": "aws",
        "regions": ["us-east-1"],
        "endpoint": sim.endpoint,
        "credentials": "simulated",
        "gate": dict(FAST_GATE),
        **changes,
    }


def gcp_provider(sim, provider_id: str = "gcp-sim", **changes: Any) -> dict[str, Any]:
    return {
        "id": provider_id,
        "kind": "gcp",
        "project": "wm-test",
        "regions": ["us-central1-a"],
        "endpoint": sim.endpoint,
        "credentials": "simulated",
        "gate": dict(FAST_GATE),
        "worker_service_account_email": GCE_WORKER_ACCOUNT,
        "worker_service_account_id": service_account_id(GCE_WORKER_ACCOUNT),
        **changes,
    }


def azure_provider(sim, provider_id: str = "azure-sim", **changes: Any) -> dict[str, Any]:
    return {
        "id": provider_id,
        "kind": "azure",
        "subscription_id": AZURE_SUBSCRIPTION,
        "resource_group": "wm-test",
        "regions": ["eastus"],
        "endpoint": sim.endpoint,
        "ca_bundle": str(sim.cert_path),
        "credentials": "simulated",
        "gate": dict(FAST_GATE),
        **changes,
    }


MACHINES = {
    "aws": ("us-east-1", "m5.large", "ami-0abcdef1234567890"),
    "gcp": ("us-central1-a", "e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("eastus", "Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}


def pool(
    pool_id: str, provider: dict[str, Any], max_capacity: int = 100, **changes: Any
) -> dict[str, Any]:
    region, machine, image = MACHINES[provider["kind"]]
    return {
        "id": pool_id,
        "provider": provider["id"],
        "max_capacity": max_capacity,
        "launch_configs": [{"region": region, "machine_type": machine, "image": image}],
        **changes,
    }


@dataclass
class Stack:
    """A config file for a set of providers and pools, and the wm processes run on it."""

    path: Path
    db_url: str
    data: dict[str, Any]
    processes: list[WmProcess] = field(default_factory=list)

    @classmethod
    def write(
        cls, tmp: Path, db_url: str, providers: Iterable[dict], pools: Iterable[dict], **top: Any
    ) -> Stack:
        data = {
            "deployment_id": DEPLOYMENT,
            **top,
            "providers": list(providers),
            "pools": list(pools),
        }
        stack = cls(tmp / "config.toml", db_url, data)
        stack.save()
        return stack

    def save(self) -> None:
        # Pools are definitions applied to the database, never part of config.toml.
        self.path.write_text(to_toml({k: v for k, v in self.data.items() if k != "pools"}))

    def config(self) -> Config:
        return config_module.load(self.path, environ={"DATABASE_URL": self.db_url})

    def sync_pools(self, engine: Engine) -> None:
        apply_pools(engine, self.config(), self.data["pools"])

    def start(self, *args: str, new_session: bool = False) -> WmProcess:
        """`new_session`: the process leads a process group of its own, as a platform runs it
        (its children in the group too), for tests that signal the whole group."""
        process = WmProcess.start(["run", *args], self.path, self.db_url, new_session=new_session)
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.processes:
            process.kill()


@dataclass
class WmProcess:
    popen: subprocess.Popen
    lines: list[dict[str, Any]] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None
    _started: bool = False  # started() held once: it stays so

    @classmethod
    def start(
        cls,
        args: list[str],
        config: Path,
        db_url: str,
        env: Mapping[str, str] | None = None,
        *,
        new_session: bool = False,
    ) -> WmProcess:
        """`env`: more variables for the process (what a platform would set for it);
        `new_session`: it leads a process group of its own."""
        env = {**simulated_child_environment(config, db_url), **(env or {})}
        popen = subprocess.Popen(
            [sys.executable, "-m", "wm", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
            start_new_session=new_session,
        )
        process = cls(popen)
        process._reader = threading.Thread(target=process._read, daemon=True)
        process._reader.start()
        return process

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.raw.append(line)
            with contextlib.suppress(json.JSONDecodeError):
                self.lines.append(json.loads(line))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == name]

    def started(self) -> bool:
        """Started, and so has every child process it started (the provisioner runs each
        cloud's passes in one)."""
        started = {e.get("process") for e in self.events("process-started")}
        children = {e.get("child") for e in self.events("child-started")}
        return bool(started) and children <= started

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait until `predicate()` holds, for at most `timeout_s` counted from the process's
        start (its own and its children's, bounded apart by START_TIMEOUT_S): on a busy machine
        a start alone can take longer than what the test waits for after it."""
        start_deadline = time.monotonic() + START_TIMEOUT_S
        deadline: float | None = None
        while True:
            if predicate():
                return
            if self.popen.poll() is not None:
                raise AssertionError(
                    f"process exited ({self.popen.returncode}) waiting for {what}:\n"
                    + "".join(self.raw[-30:])
                )
            now = time.monotonic()
            if deadline is None and (self._started or self.started()):
                self._started = True
                deadline = now + timeout_s
            if now >= (deadline if deadline is not None else start_deadline + timeout_s):
                break
            time.sleep(0.05)
        started = "" if deadline is not None else " (the process never said it started)"
        raise AssertionError(f"timed out waiting for {what}{started}:\n" + "".join(self.raw[-30:]))

    def terminate(self, timeout_s: float = 15) -> tuple[int, float]:
        """SIGTERM; return (exit code, seconds it took)."""
        started = time.monotonic()
        self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running {timeout_s:g}s after SIGTERM:\n" + "".join(self.raw[-30:])
            ) from None
        return code, time.monotonic() - started

    def stop_group(self, signum: int, timeout_s: float = 15) -> int:
        """Signal the process's whole group at once (a platform's stop, or Ctrl-C at a
        terminal); return its exit code."""
        os.killpg(self.popen.pid, signum)
        try:
            return self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running {timeout_s:g}s after {signal.Signals(signum).name}:\n"
                + "".join(self.raw[-30:])
            ) from None

    def group_alive(self) -> bool:
        """Whether any process of its group (its children) is still running."""
        try:
            os.killpg(self.popen.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)
        if self._reader:
            self._reader.join(timeout=5)
        if self.popen.stdout:
            self.popen.stdout.close()
