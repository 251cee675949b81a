"""Azure: new VMs until all run, wm's single VM PUT and ARM template deployment against the old
IP, NIC, VM steps.

`python -m bench.azure` asks for `--vms` new Azure workers (default 100) at once and measures,
on each of three sides, on a fresh database and a fresh simulated ARM (in a process of its own,
every call taking `--latency-ms`, every VM `--boot-s` to boot), the time and the API calls
until every VM is seen running:

- wm: the real `Provisioner` (one pass: one VM PUT per worker, NIC inline, no public IP, through
  wm.providers.azure) and the real `Scanner` scanning the region every `--scan-loop-s` (an
  interval from start to start, as the scanner process's job), until every row is running;
- arm: the same `Provisioner` and `Scanner`, the pool's launch config in Taskcluster's
  ARM-template form (`armDeployment`, a template spec version of wmsim's worker template, a
  resource group of its own, as fxci-config's Azure pools): one deployment PUT per worker
  (wm.providers.azure.arm), the scan listing the group's deployments beside its VMs;
- baseline: `bench.baselines.old_azure`: the provisioner writes rows only; the scan loop, which
  waits `--scan-loop-s` after each loop (taskcluster-lib-iterate's waitTime), advances each
  worker one resource per loop (public IP, then NIC, then VM), two workers at a time, and sees
  the VM running in a later loop.

All sides begin their first scan loop at the demand, use the same gate (wm's defaults: each
call paced by ARM's and Compute's published buckets) and count a VM as running at the end of
the loop (scan) that saw it running.

Figures, the same names on every side (see bench/README.md): all_running_s, running_p50_s,
vms_running, api_calls, resource_puts, scan_loops, loop_max_s; and each side's ARM calls by
operation (the simulated ARM's count of requests). Results go to stdout and to
bench/results/azure.json as {"wm", "baseline", "ratio" (baseline / wm), "arm", "arm_ratio"
({"baseline_over_arm", "arm_over_wm"}), "calls_by_operation" ({side: {operation: calls}}),
"params", "log_warnings"}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.baselines.old_azure import OldAzureScanner
from bench.cloud_process import CloudProcess
from bench.common import (
    AZURE_RESOURCE_GROUP,
    AZURE_SUBSCRIPTION,
    BENCH_OWNER,
    DEPLOYMENT_ID,
    JOIN_TIMEOUT_S,
    MACHINES,
    PROVIDER_IDS,
    RESULTS_DIR,
    BenchConfig,
    bench_definitions,
    fresh_database,
    parse_config,
    provider_entries,
    sync_pools,
)
from bench.output import cell, emit, percentile, ratios, rounded, run_sides
from wm.config.loader import Config
from wm.db import pools as pool_store
from wm.db import tasks as task_store
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker, list_workers
from wm.kinds.azure import AzureProviderConfig
from wm.model import LaunchSpec, WorkerRef, WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.providers import build_provider
from wm.provisioning.pool_plan import new_worker_id
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.azure.templates import WORKER_TEMPLATE
from wmsim.behaviour import Behaviour
from wmsim.postgres import PostgresServer

POOL_ID = "proj-ci/win-2022"
ARM_LOCATION = MACHINES["azure"][0]
ARM_GROUP = "rg-tc-azure-proj-ci-win-2022"  # the launch config's own group, as fxci-config's
ARM_SPEC_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/rg-template-specs/providers"
    "/Microsoft.Resources/templateSpecs/win-worker/versions/1.0.0"
)
ARM_IMAGE_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/rg-template-specs/providers"
    "/Microsoft.Compute/galleries/images/images/win2022/versions/1.0.0"
)
ARM_LAUNCH_CONFIG_ID = "lc-arm-bench"
TASK_DURATION_S = 600.0  # recorded on the tasks; nothing runs them here
ROW_EXPIRY_S = 3600.0  # registration deadline of the baseline's rows: never reached here


# -- the simulated ARM ---------------------------------------------------------------------------


class ArmHost:
    """One SimArm (in the clouds' process); see bench.cloud_process.CloudProcess."""

    def __init__(self, boot_s: float, latency_ms: float, stack: contextlib.ExitStack) -> None:
        self.arm = SimArm(Behaviour(boot_s=boot_s, latency_ms=latency_ms)).start()
        stack.callback(self.arm.stop)

    def ready(self) -> dict[str, Any]:
        return {"endpoints": {"azure": self.arm.endpoint}, "cert_path": str(self.arm.cert_path)}

    def counts(self) -> dict[str, int]:
        return self.arm.faults.counts()

    def reset_counts(self) -> None:
        self.arm.faults.reset_counts()

    def running_vms(self) -> int:
        return sum(1 for vm in self.arm.instances() if vm.state == "running")

    def publish_worker_template(self) -> None:
        """What an operator publishes before applying an ARM-template pool: the template spec
        version its launch config names and the image the template deploys."""
        template = json.loads(WORKER_TEMPLATE.read_text())
        self.arm.deployments.put_template_spec(ARM_SPEC_ID, template, ARM_LOCATION)
        self.arm.register_image(ARM_IMAGE_ID, ARM_LOCATION)


class Arm(CloudProcess):
    def counts(self) -> dict[str, int]:
        return self.ask("counts")

    def reset_counts(self) -> None:
        self.ask("reset_counts")

    def running_vms(self) -> int:
        return self.ask("running_vms")

    def publish_worker_template(self) -> None:
        self.ask("publish_worker_template")


def azure_config(arm: Arm, db_url: str, vms: int) -> BenchConfig:
    region, machine_type, image = MACHINES["azure"]
    raw = {
        "deployment_id": DEPLOYMENT_ID,
        "providers": provider_entries(arm.endpoints, arm.cert_path, clouds=("azure",)),
        "pools": [
            {
                "id": POOL_ID,
                "provider": PROVIDER_IDS["azure"],
                "max_capacity": 2 * vms,
                "requires_registration": False,  # running in the cloud is running here
                "launch_configs": [
                    {"region": region, "machine_type": machine_type, "image": image}
                ],
            }
        ],
    }
    return parse_config(raw, db_url, "bench/azure.py")


# -- what both sides record ----------------------------------------------------------------------


@dataclass
class Progress:
    """When each loop ended and how many VMs it first saw running."""

    demand_at: float
    loops: list[tuple[float, float, int]] = field(default_factory=list)  # start, end, new

    def figures(self, vms: int, api: dict[str, int]) -> dict[str, Any]:
        times = sorted(end - self.demand_at for _start, end, new in self.loops for _ in range(new))
        running = len(times)
        return {
            "all_running_s": rounded(times[-1], 1) if running == vms else None,
            "running_p50_s": rounded(percentile(times + [float("inf")] * (vms - running), 0.5), 1),
            "vms_running": running,
            "api_calls": sum(api.values()),
            "resource_puts": sum(n for op, n in api.items() if op.endswith("_CreateOrUpdate")),
            "scan_loops": len(self.loops),
            "loop_max_s": rounded(max((e - s for s, e, _ in self.loops), default=0.0), 1),
        }


def run_loops(
    loop: Callable[[], int],
    progress: Progress,
    vms: int,
    interval_s: float,
    timeout_s: float,
    *,
    wait_after: bool,
) -> None:
    """Run `loop` (returning the VMs it first saw running) until every VM runs or the timeout:
    every `interval_s` from start to start (overruns skipped), or `interval_s` after each end."""
    next_at = progress.demand_at
    while sum(new for _, _, new in progress.loops) < vms:
        now = time.monotonic()
        if now - progress.demand_at > timeout_s:
            return
        time.sleep(max(0.0, next_at - now))
        started = time.monotonic()
        new = loop()
        ended = time.monotonic()
        progress.loops.append((started, ended, new))
        if wait_after:
            next_at = ended + interval_s
        else:
            next_at += interval_s
            while next_at <= ended:
                next_at += interval_s


# -- the two sides -------------------------------------------------------------------------------


Measured = tuple[dict[str, Any], dict[str, int]]  # a side's figures, its calls by operation


def run_wm(engine: Engine, config: Config, arm: Arm, params: Params) -> Measured:
    """wm's provisioner and scanner; the pool's launch config says which form (resource, ARM)."""
    provider_config = config.providers[0]
    provider = build_provider(provider_config, config.deployment_id)
    try:
        region = provider.regions[0]
        provider.lookup([WorkerRef("w-warm-up", region)])  # token, connections
        arm.reset_counts()
        provisioner = Provisioner(engine, BuiltinQueue(engine), {provider.id: provider})
        scanner = Scanner(engine, {provider.id: provider}, replica="bench")
        seen: set[str] = set()

        def scan() -> int:
            scanner.scan(provider.id, region)
            running = list_workers(engine, pool_id=POOL_ID, state=WorkerState.RUNNING)
            new = {w.worker_id for w in running} - seen
            seen.update(new)
            return len(new)

        task_store.submit_tasks(engine, POOL_ID, params.vms, TASK_DURATION_S)
        progress = Progress(time.monotonic())
        passing = threading.Thread(target=provisioner.run_pass, args=(provider.id,))
        passing.start()  # the pass woken by the tasks, while the scanner keeps its own time
        run_loops(
            scan, progress, params.vms, params.scan_loop_s, params.timeout_s, wait_after=False
        )
        passing.join(JOIN_TIMEOUT_S)
        counts = arm.counts()
        return progress.figures(params.vms, counts), counts
    finally:
        provider.close()


def run_baseline(engine: Engine, config: Config, arm: Arm, params: Params) -> Measured:
    provider_config = config.providers[0]
    assert isinstance(provider_config, AzureProviderConfig)
    launch_config = config.pools[0].launch_configs[0]
    old = OldAzureScanner(
        engine,
        provider_config,
        config.deployment_id,
        POOL_ID,
        launch_config_spec(config),
    )
    try:
        with contextlib.suppress(Exception):  # a 404: all it is for is the token
            old.clients.compute.virtual_machines.instance_view(
                provider_config.resource_group, "vm-warm-up"
            )
        arm.reset_counts()
        task_store.submit_tasks(engine, POOL_ID, params.vms, TASK_DURATION_S)
        progress = Progress(time.monotonic())
        worker_ids = [new_worker_id() for _ in range(params.vms)]
        insert_intents(  # the old provisioner: rows, no cloud call
            engine,
            [
                NewWorker(
                    worker_id=worker_id,
                    pool_id=POOL_ID,
                    worker_group=launch_config.region,
                    provider_id=provider_config.id,
                    capacity=1,
                    launch_config_id=launch_config.old_id,
                    idempotency_token=worker_id,
                    batch_token=worker_id,
                    launch_index=0,
                    expires_in_s=ROW_EXPIRY_S,
                )
                for worker_id in worker_ids
            ],
        )
        old.requested(worker_ids)
        run_loops(
            lambda: len(old.loop().newly_running),
            progress,
            params.vms,
            params.scan_loop_s,
            params.timeout_s,
            wait_after=True,
        )
        counts = arm.counts()
        return progress.figures(params.vms, counts), counts
    finally:
        old.close()


def launch_config_spec(config: BenchConfig) -> LaunchSpec:
    (definition,) = bench_definitions(config)
    lc = definition.launch_configs[0]
    return LaunchSpec(
        launch_config_id=lc.launch_config_id,
        region=lc.worker_group,
        capacity_per_worker=lc.capacity_per_instance,
        launch_config=lc.body,
        pool_owner=definition.owner,
    )


@dataclass(frozen=True)
class Params:
    vms: int
    scan_loop_s: float
    boot_s: float
    latency_ms: float
    timeout_s: float


SIDES = ("wm", "arm", "baseline")


def run_side(name: str, params: Params, server: PostgresServer) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        engine, db_url = stack.enter_context(fresh_database(server, f"azure_{name}"))
        arm = stack.enter_context(Arm.running(ArmHost, params.boot_s, params.latency_ms))
        config = azure_config(arm, db_url, params.vms)
        if name == "arm":
            arm.publish_worker_template()
            apply_arm_pool(engine, config, params.vms)
        else:
            sync_pools(engine, config)
        run = run_baseline if name == "baseline" else run_wm
        figures, calls = run(engine, config, arm, params)
        return {"figures": figures, "calls": dict(sorted(calls.items()))}


def arm_launch_config() -> dict[str, Any]:
    """The resource form's VM (same location, size, subnet) as an ARM-template launch config,
    written as fxci-config writes its Azure pools' (a template spec version by id)."""
    _region, machine_type, _image = MACHINES["azure"]
    parameters = {
        "location": ARM_LOCATION,
        "vmSize": machine_type,
        "imageId": ARM_IMAGE_ID,
        "subnetId": default_subnet_id(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP),
        "priority": "Regular",
    }
    return {
        "location": ARM_LOCATION,
        "armDeployment": {
            "mode": "Incremental",
            "templateLink": {"id": ARM_SPEC_ID},
            "parameters": {k: {"value": v} for k, v in parameters.items()},
        },
        "armDeploymentResourceGroup": ARM_GROUP,
        "workerConfig": {},
        "workerManager": {"launchConfigId": ARM_LAUNCH_CONFIG_ID, "capacityPerInstance": 1},
    }


def apply_arm_pool(engine: Engine, config: BenchConfig, vms: int) -> None:
    """The bench pool, its one launch config in ARM-template form; no registration needed, as
    on the other sides."""
    provider_id = PROVIDER_IDS["azure"]
    body = {
        "providerId": provider_id,
        "description": "Azure workers deployed from a template spec",
        "owner": BENCH_OWNER,
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": 2 * vms,
            "launchConfigs": [arm_launch_config()],
        },
    }
    definition = parse_pool_definition(POOL_ID, body, config.config.provider_kinds())
    apply_change(
        engine,
        ApplyDefinitions((definition,), prune=True),
        workers_register={provider_id: False},
    )
    pool_store.ensure_scan_units(engine, [(p.id, r) for p in config.providers for r in p.regions])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.azure", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--vms", type=int, default=100, help="new Azure VMs asked for at once")
    parser.add_argument(
        "--scan-loop-s", type=float, default=20.0, help="scan interval (wm) / wait (baseline)"
    )
    parser.add_argument("--boot-s", type=float, default=30.0, help="simulated VM boot time")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="per ARM call")
    parser.add_argument(
        "--timeout-s", type=float, default=900.0, help="give up on a side after this long"
    )
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "azure.json")
    parser.add_argument("--log", type=Path, default=None, help="wm's JSON log lines to this file")
    args = parser.parse_args(argv)
    if args.vms < 1 or args.scan_loop_s <= 0 or args.timeout_s <= 0:
        parser.error("--vms must be >= 1, --scan-loop-s and --timeout-s > 0")
    if args.boot_s < 0 or args.latency_ms < 0:
        parser.error("--boot-s and --latency-ms must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = Params(args.vms, args.scan_loop_s, args.boot_s, args.latency_ms, args.timeout_s)
    print(
        f"{params.vms} new Azure VMs; scan loop {params.scan_loop_s:g} s, boot {params.boot_s:g} "
        f"s, latency {params.latency_ms:g} ms",
        file=sys.stderr,
    )
    results, warnings = run_sides(
        lambda name, server: run_side(name, params, server), args.log, SIDES
    )
    wm, arm, baseline = (results[side]["figures"] for side in ("wm", "arm", "baseline"))
    result = {
        "wm": wm,
        "baseline": baseline,
        "ratio": ratios(wm, baseline),
        "arm": arm,
        "arm_ratio": {"baseline_over_arm": ratios(arm, baseline), "arm_over_wm": ratios(wm, arm)},
        "calls_by_operation": {side: results[side]["calls"] for side in SIDES},
        "params": {k: getattr(params, k) for k in Params.__dataclass_fields__},
        "log_warnings": warnings,
    }
    emit(result, three_sides(result) + "\n\n" + calls_table(result), args.output)
    return 0


def three_sides(result: dict[str, Any]) -> str:
    """Each figure on the three sides and their ratios."""
    header = ("figure", "wm", "arm", "baseline", "baseline/wm", "baseline/arm", "arm/wm")
    rows = [header]
    arm_ratio = result["arm_ratio"]
    for name in result["wm"]:
        values = (
            result["wm"][name],
            result["arm"][name],
            result["baseline"][name],
            result["ratio"][name],
            arm_ratio["baseline_over_arm"][name],
            arm_ratio["arm_over_wm"][name],
        )
        rows.append((name, *(cell(v) for v in values)))
    return aligned(rows)


def calls_table(result: dict[str, Any]) -> str:
    """Each side's ARM calls by operation."""
    calls = result["calls_by_operation"]
    operations = sorted({op for side in SIDES for op in calls[side]})
    rows = [("ARM operation", *SIDES)]
    rows += [(op, *(str(calls[side].get(op, 0)) for side in SIDES)) for op in operations]
    return aligned(rows)


def aligned(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        row[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(row[1:], widths[1:], strict=True))
        for row in rows
    )


if __name__ == "__main__":
    sys.exit(main())
