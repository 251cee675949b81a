"""The old worker scanner: one look at the cloud per worker, two workers at a time.

What it reproduces (DESIGN.md: "The scanner made one or more API calls per worker", and a
scan loop of 10-30 minutes in production):

- One loop over every non-stopped worker of every provider, as Taskcluster's worker-manager
  `WorkerScanner` iterated its workers and called the provider's `checkWorker` for each; two
  checks in flight at once (the old scanner's concurrency, as the issue gives it).
- `checkWorker` asked the cloud about that one worker: EC2 `describeInstances` with its
  instance id, GCE `instances.get`, Azure `virtualMachines.instanceView` (a running worker whose
  resources are all provisioned needs only that call). Here each check is one `lookup` of one
  worker through wm's own adapters (one DescribeInstances filtered on the instance id, one
  instances.get, one VirtualMachines_Get with its instance view), so both sides meet the same
  SDKs, gate and simulated clouds.
- A database write per worker: `checkWorker` always ended with `worker.update(...)` setting
  `lastChecked`. Here: one statement per worker, its state change when the cloud's state
  differs (gone from the cloud: stopped), else `last_checked`.
- The rows are read once per (provider, region), as wm reads them (the old scanner paged
  through a query over all workers; the count of reads does not change the picture).

What it leaves out, in the old design's favour: the extra calls of workers still being
provisioned (Azure's IP, NIC and VM steps: see old_azure.py), of stopping workers (one delete
call per resource), error reporting, and the lifecycle checks, which cost no cloud call.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import Engine

from wm.db import scan_writes, scans
from wm.errors import CloudError
from wm.model import WorkerRecord, WorkerState
from wm.ops.telemetry import log
from wm.providers.base import Provider
from wm.workers.transitions import GONE, RowChange, scan_sighting

OLD_SCANNER_CONCURRENCY = 2


@dataclass(frozen=True)
class OldScanReport:
    checked: int  # workers looked at
    changed: int  # rows whose state the cloud changed (here: gone -> stopped)
    errors: int  # checks whose cloud call failed (the old scanner logged and went on)


@dataclass
class OldScanner:
    engine: Engine
    providers: Mapping[str, Provider]
    concurrency: int = OLD_SCANNER_CONCURRENCY

    def scan(self, units: Sequence[tuple[str, str]]) -> OldScanReport:
        """One loop over the live workers of every (provider, region) given."""
        rows = [
            row for pid, region in units for row in scans.live_workers(self.engine, pid, region)
        ]
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="old-scanner") as pool:
            outcomes = list(pool.map(self._check, rows))
        return OldScanReport(
            checked=len(rows),
            changed=sum(1 for o in outcomes if o == "changed"),
            errors=sum(1 for o in outcomes if o == "error"),
        )

    def _check(self, row: WorkerRecord) -> str:
        provider = self.providers[row.provider_id]
        ref = row.ref()
        try:
            found = provider.lookup([ref]).get(row.worker_id)
        except CloudError as error:
            log("old-check-failed", logging.WARNING, worker=row.worker_id, error=str(error))
            return "error"
        state = WorkerState.STOPPED if found is None else found.state
        if state == row.state:
            scan_writes.mark_checked(self.engine, [row.worker_id])
            return "same"
        # The old design wrote what it saw; here that is a transition the table allows.
        moved = GONE if state == WorkerState.STOPPED else scan_sighting(row.state, state, False)
        scan_writes.apply_changes(
            self.engine, [RowChange(row.worker_id, row.version, row.state, moved)]
        )
        return "changed"
