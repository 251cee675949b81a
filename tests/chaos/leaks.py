"""The leak check every chaos scenario ends with: the clouds and the database agree.

Every VM a simulated cloud holds with this deployment's tag has a row, and every row that is
not stopped and has a cloud id has a VM. A VM being deleted (`stopping` in the sims) is on its
way out whatever its row says; a VM that runs, boots or sits stopped with disks attached costs
money and must have a live row. Duplicates are counted apart: more VMs carry a worker's (or an
EC2 batch's) tag than there are rows for it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Engine

from tests.support.stack import DEPLOYMENT
from wm.db.workers import list_workers
from wm.model import WorkerRecord, WorkerState
from wm.providers.base import TAG_BATCH, TAG_DEPLOYMENT, TAG_WORKER
from wmsim.behaviour import SimVm

SETTLE_POLL_S = 0.1


class Sim(Protocol):
    def instances(self) -> list[SimVm]: ...


@dataclass(frozen=True)
class LeakReport:
    vms: int  # tagged VMs the clouds hold, being deleted or not
    live_rows: int  # rows not stopped that have a cloud id
    unmanaged: tuple[str, ...]  # VMs not being deleted whose row is missing or stopped
    lost: tuple[str, ...]  # live rows with a cloud id whose VM the cloud no longer holds
    duplicates: tuple[str, ...]  # worker ids / batch tokens with more VMs than rows

    @property
    def clean(self) -> bool:
        return not (self.unmanaged or self.lost or self.duplicates)


def check(engine: Engine, sims: Iterable[Sim], deployment: str = DEPLOYMENT) -> LeakReport:
    rows = list_workers(engine)
    vms = [
        vm
        for sim in sims
        for vm in sim.instances()
        if vm.tags.get(TAG_DEPLOYMENT) == deployment and vm.state != "gone"
    ]
    by_cloud = {r.cloud_id: r for r in rows if r.cloud_id}
    by_worker = {r.worker_id: r for r in rows}
    unmanaged = []
    for vm in vms:
        row = by_cloud.get(vm.cloud_id) or by_worker.get(vm.tags.get(TAG_WORKER, ""))
        if vm.state != "stopping" and (row is None or row.state == WorkerState.STOPPED):
            unmanaged.append(f"{vm.region}/{vm.name} ({vm.cloud_id}, {vm.state})")
    held = {vm.cloud_id for vm in vms}
    live = [r for r in rows if r.state != WorkerState.STOPPED and r.cloud_id]
    lost = [f"{r.worker_id} ({r.state}, {r.cloud_id})" for r in live if r.cloud_id not in held]
    return LeakReport(
        vms=len(vms),
        live_rows=len(live),
        unmanaged=tuple(unmanaged),
        lost=tuple(lost),
        duplicates=tuple(_duplicates(vms, rows)),
    )


def _duplicates(vms: Sequence[SimVm], rows: Sequence[WorkerRecord]) -> list[str]:
    # A VM names its worker by tag, or (an EC2 batch of many) only its batch: compare counts.
    per_tag = Counter(
        vm.tags.get(TAG_WORKER) or f"batch:{vm.tags.get(TAG_BATCH)}"
        for vm in vms
        if vm.tags.get(TAG_WORKER) or vm.tags.get(TAG_BATCH)
    )
    per_row = Counter(r.worker_id for r in rows) + Counter(f"batch:{r.batch_token}" for r in rows)
    return sorted(tag for tag, count in per_tag.items() if count > max(1, per_row[tag]))


def assert_no_leaks(engine: Engine, sims: Iterable[Sim], *, settle_s: float = 0.0) -> LeakReport:
    """The clouds and the rows agree, at once or within `settle_s` (while processes finish
    what a scan or a pass has begun); the report of the last look otherwise fails the test."""
    sims = list(sims)
    deadline = time.monotonic() + settle_s
    while True:
        report = check(engine, sims)
        if report.clean or time.monotonic() >= deadline:
            break
        time.sleep(SETTLE_POLL_S)
    assert report.clean, f"leaks: {report}"
    return report
