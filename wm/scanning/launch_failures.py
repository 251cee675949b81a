"""Launches the cloud failed after accepting them, as a scan finds them: the VM or deployment
ends failed (Azure's AllocationFailed comes that way) or the insert's operation does (GCE's
ZONE_RESOURCE_POOL_EXHAUSTED). Each provider reads the refusal from the stop reason it gave
the worker (`failed_launch`); the scan keeps its class on the row (`launch_refused`, which the
launch choice's evidence counts as it counts a refused create), files it as a pool error
against its launch config, and for a pool whose launch choice reads the bench ([launch_choice]
shadow or cost) benches the offering as a refused create would."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from sqlalchemy import Engine

from wm.config.launch_choice import ChoiceMode, LaunchChoiceConfig
from wm.db import pool_errors
from wm.db.pools import load_launch_configs
from wm.errors import CloudError
from wm.model import WorkerRecord, WorkerState
from wm.ops.telemetry import log
from wm.providers.base import Provider
from wm.provisioning import cost_planning
from wm.scanning.scan_errors import FILED_AS_KIND, launch_errors
from wm.workers.transitions import RowChange


def refusals(provider: Provider, changes: Sequence[RowChange]) -> dict[str, CloudError]:
    """The cloud's refusals among the changes that stop a worker, by worker id."""
    found: dict[str, CloudError] = {}
    for change in changes:
        if change.to_state != WorkerState.STOPPING:
            continue
        refusal = provider.failed_launch(change.reason)
        if refusal is not None:
            found[change.worker_id] = refusal
    return found


def marked(changes: Sequence[RowChange], refused: Mapping[str, CloudError]) -> list[RowChange]:
    """The changes, those stopping a refused launch carrying its class for the row."""
    if not refused:
        return list(changes)
    return [
        replace(c, refused=str(refused[c.worker_id].category)) if c.worker_id in refused else c
        for c in changes
    ]


def record(
    engine: Engine,
    provider: Provider,
    launch_choice: LaunchChoiceConfig,
    refused: Mapping[str, CloudError],
    changed: Sequence[WorkerRecord],
) -> None:
    """File the refusals `refusals()` found, of the rows that changed, as pool errors, and
    bench their offerings."""
    failed = [(w, refused[w.worker_id]) for w in changed if w.worker_id in refused]
    if not failed:
        return
    pool_errors.record_errors(engine, launch_errors(failed))
    benching = [
        (w, e)
        for w, e in failed
        if e.category in FILED_AS_KIND
        and launch_choice.for_pool(w.pool_id).mode != ChoiceMode.WEIGHTS
    ]
    if benching:
        _bench(engine, provider, benching, launch_choice.clock_speed)


def _bench(
    engine: Engine,
    provider: Provider,
    failed: Sequence[tuple[WorkerRecord, CloudError]],
    speed: float,
) -> None:
    try:
        configs = {
            (lc.pool_id, lc.launch_config_id): lc
            for lc in load_launch_configs(engine, pool_ids=sorted({w.pool_id for w, _ in failed}))
        }
        failures = [
            (configs[(w.pool_id, w.launch_config_id)], e)
            for w, e in failed
            if (w.pool_id, w.launch_config_id) in configs
        ]
        changes = cost_planning.bench_after_failed_launches(
            engine,
            provider.id,
            failures,
            lambda lc: provider.offering(lc.configuration, lc.region),
            provider.error_scope,
            time.time(),
            speed,
        )
    except Exception:  # the bench is advice: a failure here must not fail the scan's writes
        log("offering-bench-failed", logging.ERROR, exc_info=True, provider=provider.id)
        return
    cost_planning.log_bench(provider.id, changes, found_by="scan")
