"""A running fleet for the scan and scale benchmarks: worker rows in state running and their VMs
in the simulated clouds, in the production mix, and one measured scan round over it by wm's
`Scanner` or by the old per-worker scanner (bench/baselines/old_scanner.py).

The fleet: `workers` rows split over six pools (EC2 84 % over three regions, Azure 13 %, GCE
3 %), every row running with its VM in a simulated cloud, except `missing` rows (spread the same
way) whose VM is gone, as if deleted by hand: each scan must find those out. VMs are seeded
in-process (SimEc2/SimGce.seed_instances, SimArm.preload), so building a fleet costs no API
call; rows are written with wm's own statements (intents, launches, then running).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from bench.baselines.old_scanner import OLD_SCANNER_CONCURRENCY, OldScanner
from bench.cloud_calls import CpuMeter
from bench.cloud_process import CloudProcess, wrap_app
from bench.common import (
    AZURE_RESOURCE_GROUP,
    AZURE_SUBSCRIPTION,
    CLOUDS,
    DEPLOYMENT_ID,
    GCP_PROJECT,
    MACHINES,
    POOL_MIX,
    PROVIDER_IDS,
    BenchConfig,
    parse_config,
    provider_entries,
)
from bench.measure import PeakMemory, StatementCounter, peak_memory
from bench.output import rounded
from wm.config.loader import Config
from wm.db import scan_writes, scans
from wm.db.worker_writes import insert_intents, record_launches
from wm.db.workers import LaunchOutcome, NewWorker, list_workers
from wm.model import WorkerRef, WorkerState
from wm.providers import build_provider
from wm.providers.aws import provider as aws
from wm.providers.azure.names import vm_name
from wm.providers.azure.vm_body import vm_body
from wm.providers.base import (
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_WORKER,
    Provider,
)
from wm.providers.gcp import provider as gcp
from wm.scanning.scanner import Scanner
from wm.workers.transitions import STARTED, RowChange
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.azure.arm_state import DEFAULT_PAGE_SIZE as ARM_PAGE_SIZE
from wmsim.azure.launch_configs import example_launch_config
from wmsim.demo.workload import split
from wmsim.gcp.gce import SimGce

# EC2's three pools each in a region of their own: three scan units, scanned concurrently.
REGIONS = {
    "proj-ci/linux-large": "us-east-1",
    "proj-ci/linux-small": "us-west-2",
    "proj-ci/linux-gpu": "eu-central-1",
}
EC2_SEED_CHUNK = 1000  # instances per seeded reservation
ROW_CHUNK = 5000  # rows per insert / update statement while building the fleet
# Both sides' gate: no rate limit. wm's default (20 calls/s) would bind only the per-worker
# scanner (10,000 workers at 20 calls/s: 500 s) and hide what latency alone costs it; a long
# timeout, because a 1,000-instance page of the simulated EC2 takes seconds to render.
GATE = {"calls_per_s": 1_000_000.0, "burst": 1_000_000, "timeout_s": 120.0}
SEED_ADMIN_PASSWORD = "Wm-9seeded-fleet"  # never used: the ARM sim stores no secrets


def region_of(pool_id: str, cloud: str) -> str:
    return REGIONS.get(pool_id, MACHINES[cloud][0])


def units() -> list[tuple[str, str]]:
    """Every (provider, region) of the fleet, in a fixed order."""
    found: list[tuple[str, str]] = []
    for pool_id, cloud, _ in POOL_MIX:
        unit = (PROVIDER_IDS[cloud], region_of(pool_id, cloud))
        if unit not in found:
            found.append(unit)
    return found


def fleet_config(
    endpoints: Mapping[str, str], cert_path: str, db_url: str, workers: int
) -> BenchConfig:
    regions: dict[str, list[str]] = {cloud: [] for cloud in CLOUDS}
    pools = []
    for pool_id, cloud, _ in POOL_MIX:
        region = region_of(pool_id, cloud)
        if region not in regions[cloud]:
            regions[cloud].append(region)
        _, machine_type, image = MACHINES[cloud]
        pools.append(
            {
                "id": pool_id,
                "provider": PROVIDER_IDS[cloud],
                "max_capacity": max(workers, 1),
                "requires_registration": False,  # the cloud's word moves a row to running
                "launch_configs": [
                    {"region": region, "machine_type": machine_type, "image": image}
                ],
            }
        )
    raw = {
        "deployment_id": DEPLOYMENT_ID,
        "providers": provider_entries(endpoints, cert_path, regions=regions, gate=GATE),
        "pools": pools,
    }
    return parse_config(raw, db_url, "bench/fleet.py")


# -- the fleet's shape --------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolFleet:
    pool_id: str
    cloud: str
    region: str
    launch_config_id: str
    worker_ids: tuple[str, ...]  # with a VM
    missing_ids: tuple[str, ...]  # a row, but the VM is gone


def plan_fleet(
    config: Config, workers: int, missing: int, shares: Mapping[str, float] | None = None
) -> list[PoolFleet]:
    """Rows per pool in the mix (or in `shares` of POOL_MIX's pools); worker ids are fixed by
    the pool and the position."""
    if shares is None:
        shares = {pool_id: share for pool_id, _, share in POOL_MIX}
    per_pool = split(workers, shares)
    missing_per_pool = split(missing, shares)
    fleets = []
    for index, (pool_id, cloud, _) in enumerate(POOL_MIX):
        lc_id = config.pool(pool_id).launch_configs[0].old_id
        ids = [f"w{index:02d}{n:012x}" for n in range(per_pool[pool_id])]
        gone = min(missing_per_pool[pool_id], len(ids))
        fleets.append(
            PoolFleet(
                pool_id,
                cloud,
                region_of(pool_id, cloud),
                lc_id,
                tuple(ids[gone:]),
                tuple(ids[:gone]),
            )
        )
    return fleets


def expected_wm_calls(fleets: Sequence[PoolFleet]) -> int:
    """API calls of one wm scan round: list pages per unit plus look-ups of missing rows."""
    listed: Counter[tuple[str, str]] = Counter()
    gone: Counter[tuple[str, str]] = Counter()
    for fleet in fleets:
        listed[(fleet.cloud, fleet.region)] += len(fleet.worker_ids)
        gone[(fleet.cloud, fleet.region)] += len(fleet.missing_ids)
    azure_vms = sum(n for (cloud, _), n in listed.items() if cloud == "azure")
    calls = 0
    for cloud, region in {(f.cloud, f.region) for f in fleets}:
        vms, missing = listed[(cloud, region)], gone[(cloud, region)]
        if cloud == "aws":
            calls += max(1, math.ceil(vms / aws.LIST_PAGE_SIZE))
            calls += math.ceil(missing / aws.LOOKUP_CHUNK_SIZE)
        elif cloud == "gcp":
            calls += max(1, math.ceil(vms / gcp.LIST_PAGE_SIZE)) + missing
        else:
            # The resource group's models, then (if any is ours) the subscription's statuses.
            pages = max(1, math.ceil(azure_vms / ARM_PAGE_SIZE))
            calls += pages + (pages if vms else 0) + missing
    return calls


# -- the simulated clouds holding the fleet (in the clouds' process) ---------------------------


class FleetHost:
    """SimEc2, SimGce and SimArm, each behind a CpuMeter, with seeding (see CloudProcess)."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.ec2, self.gce, self.arm = SimEc2(), SimGce(), SimArm()
        self.sims: dict[str, Any] = {"aws": self.ec2, "gcp": self.gce, "azure": self.arm}
        self.meters: dict[str, CpuMeter] = {}
        for cloud, sim in self.sims.items():
            sim.start()
            stack.callback(sim.stop)
            self.meters[cloud] = wrap_app(sim, CpuMeter)

    def ready(self) -> dict[str, Any]:
        endpoints = {cloud: sim.endpoint for cloud, sim in self.sims.items()}
        return {"endpoints": endpoints, "cert_path": str(self.arm.cert_path)}

    def seed(self, fleet: PoolFleet) -> list[tuple[str, str, str | None, int | None]]:
        """The pool's VMs; for each worker (worker id, cloud id, batch token, launch index)."""
        labels = {TAG_DEPLOYMENT: DEPLOYMENT_ID, TAG_POOL: fleet.pool_id}
        labels[TAG_LAUNCH_CONFIG] = fleet.launch_config_id
        ids = list(fleet.worker_ids)
        if fleet.cloud == "aws":
            # One reservation per chunk, tagged like one of wm's batches: rows match by batch
            # tag and launch index, as they do for workers wm launched.
            seeded = []
            for start in range(0, len(ids), EC2_SEED_CHUNK):
                chunk = ids[start : start + EC2_SEED_CHUNK]
                batch = f"seed-{fleet.pool_id}-{start}"
                cloud_ids = self.ec2.seed_instances(
                    len(chunk), region=fleet.region, tags={**labels, TAG_BATCH: batch}
                )
                seeded += [
                    (w, c, batch, i) for i, (w, c) in enumerate(zip(chunk, cloud_ids, strict=True))
                ]
            return seeded
        if fleet.cloud == "gcp":
            labels = {k: re.sub(r"[^a-z0-9_-]", "_", v.lower()) for k, v in labels.items()}
            named = {w: {**labels, TAG_WORKER: w} for w in ids}
            cloud_ids = self.gce.seed_instances(GCP_PROJECT, fleet.region, named)
            return [(w, c, None, None) for w, c in zip(ids, cloud_ids, strict=True)]
        _, machine_type, image = MACHINES["azure"]
        launch_config = example_launch_config(fleet.region, vm_size=machine_type, image=image)
        seeded = []
        for worker_id in ids:
            rid = (
                f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_RESOURCE_GROUP}"
                f"/providers/Microsoft.Compute/virtualMachines/{vm_name(worker_id)}"
            )
            body = vm_body(
                launch_config=launch_config,
                location=fleet.region,
                worker_id=worker_id,
                tags={**labels, TAG_WORKER: worker_id},
                admin_username="seeded",
                admin_password=SEED_ADMIN_PASSWORD,
            )
            self.arm.preload(rid, body)
            seeded.append((worker_id, rid, None, None))
        return seeded

    def set_latency(self, latency_ms: float) -> None:
        for sim in self.sims.values():
            sim.faults.behaviour.update(latency_ms=latency_ms)

    def reset(self) -> None:
        """Forget every VM and count: the next run meets empty clouds (the CPU meters go on)."""
        for sim in self.sims.values():
            sim.reset()

    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for sim in self.sims.values():
            total.update(sim.faults.counts())
        return dict(total)

    def cpu_s(self) -> float:
        return sum(meter.cpu_s for meter in self.meters.values())

    def vms(self, deployment_id: str | None = None) -> dict[str, int]:
        """VMs per cloud (of one deployment, if given)."""
        return {
            cloud: sum(
                1
                for vm in sim.instances()
                if deployment_id is None or _deployment_of(vm.tags) == deployment_id
            )
            for cloud, sim in self.sims.items()
        }


class FleetClouds(CloudProcess):
    """FleetHost in a process of its own."""

    def seed(self, fleet: PoolFleet) -> list[tuple[str, str, str | None, int | None]]:
        return self.ask("seed", fleet)

    def set_latency(self, latency_ms: float) -> None:
        self.ask("set_latency", latency_ms)

    def reset(self) -> None:
        self.ask("reset")

    def counts(self) -> dict[str, int]:
        return self.ask("counts")

    def cpu_s(self) -> float:
        return self.ask("cpu_s")

    def vms(self, deployment_id: str | None = None) -> dict[str, int]:
        return self.ask("vms", deployment_id)


def _deployment_of(tags: Mapping[str, str]) -> str | None:
    # GCE labels hold the deployment id as a label value (the same characters here).
    return tags.get(TAG_DEPLOYMENT)


# -- a fleet: VMs once per clouds, rows once per database ------------------------------------


@dataclass(frozen=True)
class Fleet:
    pools: tuple[PoolFleet, ...]
    seeded: tuple[tuple[str, str, str, str | None, int | None], ...]  # pool + seed()'s tuple

    @property
    def workers(self) -> int:
        return sum(len(p.worker_ids) + len(p.missing_ids) for p in self.pools)

    @property
    def missing(self) -> int:
        return sum(len(p.missing_ids) for p in self.pools)


def seed_fleet(clouds: FleetClouds, pools: Sequence[PoolFleet]) -> Fleet:
    seeded = []
    for pool in pools:
        seeded += [(pool.pool_id, *row) for row in clouds.seed(pool)]
    return Fleet(tuple(pools), tuple(seeded))


def write_rows(engine: Engine, config: Config, fleet: Fleet) -> None:
    """Every worker of the fleet as a running row (missing ones with a cloud id nothing holds)."""
    by_pool = {p.pool_id: p for p in fleet.pools}
    rows: list[tuple[str, str, str, str | None, int | None]] = list(fleet.seeded)
    for pool in fleet.pools:
        for n, worker_id in enumerate(pool.missing_ids):
            rows.append((pool.pool_id, worker_id, _gone_cloud_id(pool, n), f"gone-{n}", 0))
    for start in range(0, len(rows), ROW_CHUNK):
        chunk = rows[start : start + ROW_CHUNK]
        insert_intents(
            engine,
            [
                NewWorker(
                    worker_id=worker_id,
                    pool_id=pool_id,
                    worker_group=by_pool[pool_id].region,
                    provider_id=config.pool(pool_id).provider,
                    capacity=1,
                    launch_config_id=by_pool[pool_id].launch_config_id,
                    idempotency_token=str(uuid.uuid4()),
                    batch_token=batch or f"single-{worker_id}",
                    launch_index=index or 0,
                    expires_in_s=3600.0,
                )
                for pool_id, worker_id, _, batch, index in chunk
            ],
        )
        record_launches(engine, [LaunchOutcome(row[1], row[2], {}) for row in chunk])
    for provider_id, region in units():
        live = scans.live_workers(engine, provider_id, region)
        for start in range(0, len(live), ROW_CHUNK):
            scan_writes.apply_changes(
                engine,
                [
                    RowChange(r.worker_id, r.version, r.state, STARTED)
                    for r in live[start : start + ROW_CHUNK]
                ],
            )


def _gone_cloud_id(pool: PoolFleet, n: int) -> str:
    """The cloud id a missing row keeps: its VM's, which no cloud holds any more."""
    worker_id = pool.missing_ids[n]
    digest = hashlib.sha256(worker_id.encode()).hexdigest()[:16]
    if pool.cloud == "aws":
        return f"i-0{digest}"
    if pool.cloud == "gcp":
        return str(int(digest, 16))
    return (
        f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_RESOURCE_GROUP}"
        f"/providers/Microsoft.Compute/virtualMachines/{vm_name(worker_id)}"
    )


# -- one measured scan round --------------------------------------------------------------------


@contextlib.contextmanager
def fleet_providers(config: Config) -> Iterator[dict[str, Provider]]:
    """The providers, warmed up: clients, connections and tokens made before measuring."""
    providers = {p.id: build_provider(p, config.deployment_id) for p in config.providers}
    try:
        for provider in providers.values():
            for region in provider.regions:
                provider.lookup([WorkerRef("w-warm-up", region, cloud_id="i-0000000000000000")])
        yield providers
    finally:
        for provider in providers.values():
            provider.close()


@dataclass
class Round:
    """What one scan round cost, measured in this process and in the clouds'."""

    wall_s: float = 0.0
    cpu_s: float = 0.0  # this process's CPU time (wm's or the baseline's own work)
    sims_cpu_s: float = 0.0  # the simulated clouds' CPU time answering
    api_calls: int = 0
    db_statements: int = 0
    rows_stopped: int = 0
    memory: PeakMemory | None = None


@contextlib.contextmanager
def measured(engine: Engine, clouds: FleetClouds) -> Iterator[Round]:
    result = Round()
    calls_before, sims_cpu_before = sum(clouds.counts().values()), clouds.cpu_s()
    with StatementCounter(engine) as statements, peak_memory() as memory:
        started, cpu_started = time.monotonic(), time.process_time()
        yield result
        result.wall_s = time.monotonic() - started
        result.cpu_s = time.process_time() - cpu_started
    result.db_statements = statements.count
    result.memory = memory
    result.api_calls = sum(clouds.counts().values()) - calls_before
    result.sims_cpu_s = clouds.cpu_s() - sims_cpu_before


def scan_round(
    side: str,
    engine: Engine,
    providers: Mapping[str, Provider],
    clouds: FleetClouds,
    *,
    concurrency: int | None = None,
) -> Round:
    """wm: every (provider, region) scanned once by wm's Scanner, all at once (the scanner
    processes' per-region jobs). baseline: the old scanner's one loop over every worker."""
    scan_units = units()
    if side == "wm":
        # Rows were written moments ago: no listing-lag grace, they are old for this scan.
        scanner = Scanner(engine, providers, replica="bench", missing_grace_s=0.0)
        with measured(engine, clouds) as result, ThreadPoolExecutor(len(scan_units)) as pool:
            reports = list(pool.map(lambda unit: scanner.scan(*unit), scan_units))
        if any(report is None for report in reports):
            raise RuntimeError("a scan unit was not claimed")
    else:
        old = OldScanner(engine, providers, concurrency or OLD_SCANNER_CONCURRENCY)
        with measured(engine, clouds) as result:
            old.scan(scan_units)
    result.rows_stopped = len(list_workers(engine, state=WorkerState.STOPPED))
    return result


def extrapolate(
    measured: Mapping[str, Any],
    factor: float,
    scaled: Iterable[str],
    *,
    unknown: Iterable[str] = (),
    exact: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The old scanner's figures at `factor` times the workers it was measured on: its costs
    are per worker, so `scaled` figures grow linearly (counts stay whole); `unknown` ones (not
    per worker, e.g. memory) become null; `exact` ones are known without measuring."""
    out = dict(measured)
    for name in scaled:
        value = measured[name] * factor
        out[name] = round(value) if isinstance(measured[name], int) else rounded(value, 2)
    out.update(dict.fromkeys(unknown))
    out.update(exact or {})
    return out


def extrapolation_note(measured_workers: int, workers: int) -> dict[str, Any]:
    return {"from_workers": measured_workers, "factor": rounded(workers / measured_workers)}


def round_figures(result: Round, expected_calls: int) -> dict[str, Any]:
    return {
        "api_calls": result.api_calls,
        "api_calls_expected": expected_calls,
        "wall_s": rounded(result.wall_s, 2),
        "db_statements": result.db_statements,
        "cpu_s": rounded(result.cpu_s, 2),
        "sims_cpu_s": rounded(result.sims_cpu_s, 2),
        "rows_stopped": result.rows_stopped,
    }
