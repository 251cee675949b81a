"""What the benchmarks share: the fleet mix, the providers' config, a fresh database per side,
the provisioning loops and a config file for wm's own processes (see bench/README.md). Beside
it: what reaches the simulated clouds (cloud_calls.py), the clouds in a process of their own
(cloud_process.py), what is counted in wm's own process (measure.py), and how figures are
printed and written and the sides run (output.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from procs.runtime import RERUN_DELAY_S
from wm.config import loader as config_module
from wm.config.loader import Config
from wm.db import migrate
from wm.db import pools as pool_store
from wm.db.engine import create_database, drop_database, make_engine, with_database
from wm.errors import WmError
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.config_tables import OldPool, OldProvider, convert
from wm.pools.definition import PoolDefinition, parse_pool_definition
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.gcp.identity import service_account_id
from wmsim.postgres import PostgresServer

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO_DIR = Path(__file__).resolve().parents[1]
DEPLOYMENT_ID = "wm-bench"
# (pool id, cloud, share of the fleet or demand): EC2 84 %, Azure 13 %, GCE 3 %.
POOL_MIX = (
    ("proj-ci/linux-large", "aws", 0.50),
    ("proj-ci/linux-small", "aws", 0.24),
    ("proj-ci/linux-gpu", "aws", 0.10),
    ("proj-ci/win-2022", "azure", 0.10),
    ("proj-ci/win-11", "azure", 0.03),
    ("proj-ci/gce-linux", "gcp", 0.03),
)
CLOUDS = ("aws", "azure", "gcp")
PROVIDER_IDS = {"aws": "aws-bench", "gcp": "gcp-bench", "azure": "azure-bench"}
BENCH_OWNER = "bench@example.com"
MACHINES = {  # cloud -> (region or zone, machine type, image)
    "aws": ("us-east-1", "m5.large", "ami-0abcdef1234567890"),
    "gcp": ("us-central1-a", "e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("eastus", "Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-0000000be7c4"
AZURE_RESOURCE_GROUP = "wm-bench"
GCP_PROJECT = "wm-bench"
# What GCE worker VMs run as: a provider whose workers register must name one.
GCP_WORKER_ACCOUNT = f"wm-workers@{GCP_PROJECT}.iam.gserviceaccount.com"
JOIN_TIMEOUT_S = 30.0


# -- config and database ------------------------------------------------------------------------


def provider_entries(
    endpoints: Mapping[str, str],
    cert_path: str,
    regions: Mapping[str, Sequence[str]] | None = None,
    gate: Mapping[str, Any] | None = None,
    clouds: Sequence[str] = CLOUDS,
) -> list[dict[str, Any]]:
    """The providers' config entries for `clouds` (all three by default), pointed at the
    simulated clouds. `regions` per cloud defaults to MACHINES' one region (zone on GCE);
    `gate` overrides gate settings."""
    providers: list[dict[str, Any]] = [
        {"id": PROVIDER_IDS["aws"], "kind": "aws", "endpoint": endpoints.get("aws")},
        {
            "id": PROVIDER_IDS["gcp"],
            "kind": "gcp",
            "project": GCP_PROJECT,
            "endpoint": endpoints.get("gcp"),
            "worker_service_account_email": GCP_WORKER_ACCOUNT,
            "worker_service_account_id": service_account_id(GCP_WORKER_ACCOUNT),
        },
        {
            "id": PROVIDER_IDS["azure"],
            "kind": "azure",
            "subscription_id": AZURE_SUBSCRIPTION,
            "resource_group": AZURE_RESOURCE_GROUP,
            "endpoint": endpoints.get("azure"),
            "ca_bundle": cert_path,
        },
    ]
    providers = [p for p in providers if p["kind"] in clouds]
    for provider in providers:
        kind = provider["kind"]
        chosen = list(regions[kind]) if regions else [MACHINES[kind][0]]
        provider.update(regions=chosen, credentials="simulated")
        if gate:
            provider["gate"] = dict(gate)
    return providers


@dataclass(frozen=True)
class BenchConfig:
    """A benchmark's config and its pools, written in the short old `[[pools]]` form and
    applied as the Taskcluster definitions `wm pools convert` makes of them. Reads of anything
    else go to the config."""

    config: Config
    pools: tuple[OldPool, ...]

    def pool(self, pool_id: str) -> OldPool:
        return next(p for p in self.pools if p.id == pool_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.config, name)


def parse_config(raw: Mapping[str, Any], db_url: str, source: str) -> BenchConfig:
    data = {k: v for k, v in raw.items() if k != "pools"}
    config = config_module.parse(data, environ={"DATABASE_URL": db_url}, source=source)
    pools = tuple(OldPool.model_validate(p) for p in raw.get("pools", []))
    return BenchConfig(config, pools)


def bench_definitions(bench: BenchConfig) -> list[PoolDefinition]:
    raw = [p.model_dump() for p in bench.pools]
    providers = {p.id: OldProvider(p.kind, azure_subnet(p)) for p in bench.config.providers}
    conversion = convert(raw, providers, owner=BENCH_OWNER)
    if conversion.problems:
        raise WmError("; ".join(conversion.problems))
    kinds = bench.config.provider_kinds()
    return [parse_pool_definition(d["workerPoolId"], _body(d), kinds) for d in conversion.documents]


def azure_subnet(provider: Any) -> str | None:
    if provider.kind != "azure":
        return None
    return default_subnet_id(provider.subscription_id, provider.resource_group)


def _body(document: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != "workerPoolId"}


def sync_pools(engine: Engine, bench: BenchConfig) -> None:
    definitions = bench_definitions(bench)
    registers = {p.id: p.workers_register for p in bench.config.providers}
    for pool in bench.pools:
        if not pool.requires_registration:
            registers[pool.provider] = False
    apply_change(
        engine, ApplyDefinitions(tuple(definitions), prune=True), workers_register=registers
    )
    pool_store.ensure_scan_units(
        engine, [(p.id, r) for p in bench.config.providers for r in p.regions]
    )


@contextlib.contextmanager
def fresh_database(
    server: PostgresServer, side: str, *, pool_size: int = 10
) -> Iterator[tuple[Engine, str]]:
    """A new, migrated database for one side: (engine, url); dropped on the way out."""
    database = f"wm_bench_{side}_{uuid.uuid4().hex[:8]}"
    create_database(server.url, database)
    try:
        db_url = with_database(server.url, database)
        engine = make_engine(db_url, application_name=f"bench-{side}", pool_size=pool_size)
        try:
            migrate.upgrade(engine)
            yield engine, db_url
        finally:
            engine.dispose()
    finally:
        drop_database(server.url, database)


# -- provisioning loops --------------------------------------------------------------------------


class PassLoops:
    """One thread per provider running passes every `interval_s`, timed as the provisioner
    process's jobs are (procs/runtime.py: APScheduler interval jobs, max_instances=1,
    coalesce): a run that falls due while a pass runs is skipped, not queued; `wake` makes a run
    due now, and the interval restarts from it; a wake while a pass runs makes one more run due
    right after it (RERUN_DELAY_S), since that pass may have read the queue before the news."""

    def __init__(
        self,
        run_pass: Callable[[str], object],
        provider_ids: list[str],
        interval_s: float,
        first_at: float,
    ) -> None:
        self.passes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._run_pass = run_pass
        self._interval_s = interval_s
        self._first_at = first_at
        self._stop = threading.Event()
        self._wakes = {pid: threading.Event() for pid in provider_ids}
        self._woken_at = dict.fromkeys(provider_ids, 0.0)  # monotonic time of the last wake
        self._threads = [
            threading.Thread(target=self._loop, args=(pid,), name=f"pass-{pid}", daemon=True)
            for pid in provider_ids
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wake(self, provider_id: str) -> None:
        if provider_id in self._wakes:
            self._woken_at[provider_id] = time.monotonic()
            self._wakes[provider_id].set()

    def stop(self) -> list[str]:
        """Stop and join; return the names of threads that did not end in time."""
        self._stop.set()
        for event in self._wakes.values():
            event.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in self._threads if t.is_alive()]

    def _loop(self, provider_id: str) -> None:
        wake, due = self._wakes[provider_id], self._first_at
        while not self._stop.is_set():
            fired = due
            if wake.wait(max(0.0, due - time.monotonic())):
                fired = self._woken_at[provider_id]
            if self._stop.is_set():
                return
            wake.clear()
            try:
                self._run_pass(provider_id)
            except Exception:
                self.errors[provider_id] += 1
                logging.getLogger("wm").exception("bench-pass-failed")
            self.passes[provider_id] += 1
            if wake.is_set():  # woken while the pass ran: once more, right after it
                wake.clear()
                due = time.monotonic() + RERUN_DELAY_S
                continue
            due = fired + self._interval_s
            while due <= time.monotonic():  # runs due while the pass ran were skipped
                due += self._interval_s


# -- a config file for wm's own processes ----------------------------------------------------------


def toml_text(data: Mapping[str, Any]) -> str:
    """A config as TOML, every table inline: enough for wm's config file (strings, numbers,
    booleans, lists and tables)."""

    def value(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, str):
            return json.dumps(item)  # JSON's string escapes are TOML basic-string escapes
        if isinstance(item, int | float):
            return repr(item)
        if isinstance(item, Mapping):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(v)}" for k, v in item.items()) + " }"
        if isinstance(item, Sequence):
            return "[" + ", ".join(value(v) for v in item) + "]"
        raise TypeError(f"no TOML for {type(item).__name__}")

    return "".join(f"{json.dumps(key)} = {value(item)}\n" for key, item in data.items())
