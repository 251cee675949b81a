"""Scenario 17 (issue 16): creates the cloud carries out while the answer does not come back,
on each cloud, under a provisioner and a scanner running passes in this process.

a. The cloud makes the VM of every create but loses its answer (holds it past the gate's
   timeout) until the provider pauses: the gate counts three timeouts in a row and pauses,
   and the next attempt of each create is refused locally as paused. The VMs exist all the
   same.
b. Every create is held by the cloud longer than the scanner's missing grace (less than the
   gate's timeout, so each one answers in the end), while scans run.

Whatever wm makes of it, at every sample taken while the scenario runs: at most one VM per
intent; no row stopped as failed (launch failed, gone-from-cloud, never created) while its VM
exists; live capacity (requested + running rows, and the pool's VMs in the cloud) never above
the pool's max; and no VM terminated as an orphan while a row was waiting for it. In the end
the pool settles at its max (every row running or stopped) and nothing leaks.

The long form repeats the scenario: the pool's VMs vanish by hand (the scanner sees them gone),
and the provisioner's replacements meet the same faults.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import (
    CREATE_OPERATION,
    KINDS,
    PROVIDER_IDS,
    Clouds,
    launch_configs,
    provider_config,
    sizes,
)
from tests.support.stack import DEPLOYMENT, FAST_GATE, Stack
from wm.db import tasks
from wm.db.workers import capacity_by_pool, list_workers
from wm.model import WorkerRecord, WorkerState
from wm.providers import build_provider
from wm.providers.base import TAG_BATCH, TAG_DEPLOYMENT, TAG_WORKER, Provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wmsim.behaviour import SimVm

POOL = "proj/lost"
# Stop reasons that say the cloud holds nothing for the row.
FAILED = ("launch failed", "gone-from-cloud", "never created")
GONE_VM_STATES = ("stopping", "gone")  # being deleted, or deleted: no longer a live VM
LOST_IN_A_ROW = 3
# (a): each lost answer is held past the gate's timeout; three timeouts in a row pause the
# provider, and the next attempt of a create is refused as paused.
LOST_GATE = {
    **FAST_GATE,
    "timeout_s": 0.4,
    "max_attempts": 4,
    "pause_after_failures": LOST_IN_A_ROW,
    "pause_s": 1.0,
}
HOLD_S = 1.0
# (b): the cloud holds every create three missing graces long; the gate waits longer still.
MISSING_GRACE_S = 0.5
SLOW_CREATE_S = 1.5
SLOW_GATE = {**FAST_GATE, "timeout_s": 3.0, "max_attempts": 4}
# A short grace, so that a wrong decision shows within the scenario: an orphan is terminated a
# second after it is first listed. (An open intent is looked up once its gate's longest retry
# sequence has passed: 4 x 0.4 s plus backoffs in (a), 4 x 3 s plus backoffs in (b).)
ORPHAN_GRACE_S = 1.0
PASS_GAP_S = 0.2
SCAN_GAP_S = 0.1
SAMPLE_GAP_S = 0.02
SETTLE_S = 30.0


@dataclass(frozen=True)
class Size:
    max_capacity: int
    rounds: int  # times the pool's VMs vanish and are replaced under the same faults


@pytest.mark.parametrize("size", sizes(Size(3, 1), Size(12, 4)))
@pytest.mark.parametrize("kind", KINDS)
def test_creates_whose_answers_are_lost_until_the_provider_pauses_leave_one_vm_per_intent(
    kind, size, tmp_path, db_url, engine, clouds, caplog, figures
):
    sim = clouds.of(kind)
    operation = CREATE_OPERATION[kind]
    sim.faults.behaviour.update(hang_s=HOLD_S, fault_operations=(operation,))

    # Passes and scans take turns here: a scan never adopts a VM before the pass that made it
    # has judged its create (which one wins that race decides what the bug looks like).
    scenario = Scenario.start(
        kind, size, LOST_GATE, tmp_path, db_url, engine, clouds, caplog, turns=True
    )
    gate = scenario.providers[0].gate  # the provisioner's
    pauses = 0
    with scenario as run:
        for _ in range(size.rounds):
            # Every create is carried out and its answer lost, until the provider pauses.
            sim.faults.behaviour.update(lose_rate=1.0)
            run.next_round()
            paused = run.wait(lambda: gate.paused, "the provider to pause")
            sim.faults.behaviour.update(lose_rate=0.0)
            pauses += paused
            if not paused or not run.settle():
                break
    run.assert_promises_held()
    assert pauses == size.rounds
    figures.record(
        lost_answers=run.lost(),
        paused=pauses,
        creates=len(sim.faults.journal(operation)),
        **run.figures(),
    )


@pytest.mark.parametrize("size", sizes(Size(3, 1), Size(12, 4)))
@pytest.mark.parametrize("kind", KINDS)
def test_creates_slower_than_the_missing_grace_are_never_declared_gone(
    kind, size, tmp_path, db_url, engine, clouds, caplog, figures
):
    sim = clouds.of(kind)
    operation = CREATE_OPERATION[kind]
    sim.faults.behaviour.update(hang_rate=1.0, hang_s=SLOW_CREATE_S, fault_operations=(operation,))

    # Scans run while the slow creates are in flight.
    scenario = Scenario.start(
        kind, size, SLOW_GATE, tmp_path, db_url, engine, clouds, caplog, turns=False
    )
    with scenario as run:
        for _ in range(size.rounds):
            run.next_round()
            if not run.settle():
                break
        creates = sim.faults.journal(operation)
    run.assert_promises_held()
    assert creates and all(r.hung for r in creates)  # each slower than the missing grace
    figures.record(slow_creates=len(creates), slow_s=SLOW_CREATE_S, **run.figures())


@dataclass
class Scenario:
    """One pool on one cloud, a provisioner and a scanner passing in threads (each with its own
    provider, as separate processes have), and a watch sampling rows and cloud."""

    kind: str
    size: Size
    engine: Engine
    clouds: Clouds
    caplog: pytest.LogCaptureFixture
    providers: list[Provider]
    loops: list[Loop]
    watch: Watch
    settled_s: list[float] = field(default_factory=list)
    unsettled: str | None = None  # what the pool looked like when it failed to settle

    @classmethod
    def start(
        cls,
        kind: str,
        size: Size,
        gate: dict[str, Any],
        tmp_path: Path,
        db_url: str,
        engine: Engine,
        clouds: Clouds,
        caplog: pytest.LogCaptureFixture,
        *,
        turns: bool,  # passes and scans never overlap
    ) -> Scenario:
        caplog.set_level(logging.WARNING, logger="wm")
        sim = clouds.of(kind)
        provider_cfg = provider_config(kind, sim, gate=gate)
        pool = {
            "id": POOL,
            "provider": provider_cfg["id"],
            "max_capacity": size.max_capacity,
            "launch_configs": launch_configs(kind),
            "requires_registration": False,
        }
        stack = Stack.write(tmp_path, db_url, [provider_cfg], [pool])
        stack.sync_pools(engine)
        config = stack.config()
        provider_id = PROVIDER_IDS[kind]
        providers = [
            build_provider(config.provider(provider_id), config.deployment_id) for _ in range(2)
        ]
        provisioning, scanning = providers
        region = scanning.regions[0]
        provisioner = Provisioner(engine, BuiltinQueue(engine), {provider_id: provisioning})
        scanner = Scanner(
            engine,
            {provider_id: scanning},
            missing_grace_s=MISSING_GRACE_S,
            orphan_grace_s=ORPHAN_GRACE_S,
        )
        watch = Watch(engine, sim, size.max_capacity)
        turn = threading.Lock() if turns else contextlib.nullcontext()

        def provision() -> None:
            with turn:
                provisioner.run_pass(provider_id)

        def scan() -> None:
            with turn:
                scanner.scan(provider_id, region)

        loops = [
            Loop("watch", watch.sample, SAMPLE_GAP_S),
            Loop("provisioner", provision, PASS_GAP_S),
            Loop("scanner", scan, SCAN_GAP_S),
        ]
        return cls(kind, size, engine, clouds, caplog, providers, loops, watch)

    def __enter__(self) -> Scenario:
        # The demand is above the max: the provisioner keeps the pool full all along.
        tasks.submit_tasks(self.engine, POOL, 2 * self.size.max_capacity, 600.0)
        return self

    def __exit__(self, *exc: object) -> None:
        for loop in reversed(self.loops):
            loop.stop()
        for provider in self.providers:
            provider.close()
        self.sim.faults.cut_hangs()

    @property
    def sim(self) -> Any:
        return self.clouds.of(self.kind)

    def next_round(self) -> None:
        """The first round starts the passes; later ones make the pool's VMs vanish by hand,
        so that the provisioner launches again."""
        if not self.loops[0].running:
            for loop in self.loops:
                loop.start()
            return
        for vm in self.watch.live_vms():
            self.sim.remove(vm.cloud_id)

    def wait(self, predicate: Callable[[], bool], what: str, timeout_s: float = 10.0) -> bool:
        """Wait for something the scenario needs to go on; False (and noted) if it never came."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                self.unsettled = f"timed out after {timeout_s:g}s waiting for {what}"
                return False
            time.sleep(0.01)
        return True

    def settle(self) -> bool:
        """Wait until the pool is full, its rows resolved (running, or stopped) and no request
        still held by the cloud; False (and noted) if it never was."""
        started = time.monotonic()
        deadline = started + SETTLE_S
        while time.monotonic() < deadline:
            if self.sim.faults.hanging == 0 and self._full():
                self.settled_s.append(round(time.monotonic() - started, 2))
                return True
            time.sleep(0.1)
        rows = list_workers(self.engine, pool_id=POOL, limit=None)
        self.unsettled = (
            f"not settled within {SETTLE_S:g}s: rows "
            f"{Counter((r.state.value, r.stop_reason) for r in rows)}, "
            f"VMs {Counter(vm.state for vm in self.watch.live_vms())}"
        )
        return False

    def _full(self) -> bool:
        rows = list_workers(self.engine, pool_id=POOL, limit=None)
        states = Counter(r.state for r in rows)
        return (
            states[WorkerState.REQUESTED] == 0
            and states[WorkerState.RUNNING] == self.size.max_capacity
            and all(r.cloud_id for r in rows if r.state == WorkerState.RUNNING)
            and len(self.watch.live_vms()) == self.size.max_capacity
        )

    def lost(self) -> int:
        return sum(1 for r in self.sim.faults.journal() if r.lost)

    def events(self, name: str) -> list[logging.LogRecord]:
        return [r for r in self.caplog.records if getattr(r, "wm_event", None) == name]

    def orphans_awaited(self) -> list[str]:
        """VMs terminated as orphans that a row was waiting for (the watch saw the row own
        the VM, or the row names it), each once however often it was logged."""
        rows = list_workers(self.engine, pool_id=POOL, limit=None)
        named = {r.cloud_id: r.worker_id for r in rows if r.cloud_id} | self.watch.owners
        workers = {r.worker_id for r in rows}
        awaited = {}
        for record in self.events("orphan-terminated"):
            fields = getattr(record, "wm_fields", {})
            cloud_id, worker = fields.get("cloud_id"), fields.get("worker")
            if cloud_id in named or worker in workers:
                awaited[cloud_id] = f"{cloud_id} (row {named.get(cloud_id, worker)})"
        return list(awaited.values())

    def assert_promises_held(self) -> None:
        """Issue 16's promises, checked over every sample; then the pool settled, no leak."""
        watch = self.watch
        assert watch.samples > 10, "the watch took too few samples to judge"
        broken = {
            "rows stopped as failed while their VM exists": _some(watch.failed_beside_vm),
            "workers with more than one VM": _some(watch.duplicates),
            f"samples above the max capacity of {self.size.max_capacity}": _some(watch.over),
            "VMs without a row": _some(watch.unowned),
            "VMs terminated as orphans that a row awaited": _some(self.orphans_awaited()),
            "errors raised by passes": _some(e for loop in self.loops for e in loop.errors),
            "the pool did not settle": self.unsettled,
        }
        broken = {promise: seen for promise, seen in broken.items() if seen}
        assert not broken, "\n".join(f"{promise}: {seen}" for promise, seen in broken.items())
        report = assert_no_leaks(self.engine, self.clouds.sims, settle_s=5.0)
        assert report.duplicates == ()

    def figures(self) -> dict[str, object]:
        return {
            "rounds": self.size.rounds,
            "max_capacity": self.size.max_capacity,
            "samples": self.watch.samples,
            "rows": len(list_workers(self.engine, pool_id=POOL, limit=None)),
            "worst_capacity": self.watch.worst_capacity,
            "worst_vms": self.watch.worst_vms,
            "failed_beside_vm": len(self.watch.failed_beside_vm),
            "orphans_awaited": len(self.orphans_awaited()),
            "settled_s": self.settled_s,
        }


@dataclass
class Watch:
    """Samples the pool's rows and the cloud's VMs, and keeps every sample that breaks a
    promise. Rows are read before VMs: a VM made after its row was stopped is caught too; and
    once more after them, for the owner of a VM whose intent was committed meanwhile."""

    engine: Engine
    sim: Any
    max_capacity: int
    samples: int = 0
    worst_capacity: int = 0  # requested + running rows
    worst_vms: int = 0  # live VMs of the pool
    failed_beside_vm: dict[str, str] = field(default_factory=dict)  # worker -> what was seen
    duplicates: set[str] = field(default_factory=set)  # workers with two live VMs at once
    unowned: set[str] = field(default_factory=set)  # live VMs no row claims
    over: list[str] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # cloud id -> worker, ever seen

    def live_vms(self) -> list[SimVm]:
        return [
            vm
            for vm in self.sim.instances()
            if vm.tags.get(TAG_DEPLOYMENT) == DEPLOYMENT and vm.state not in GONE_VM_STATES
        ]

    def sample(self) -> None:
        rows = list_workers(self.engine, pool_id=POOL, limit=None)
        capacity = capacity_by_pool(self.engine, [POOL])[POOL]
        vms = self.live_vms()
        self.samples += 1
        owner_of = _owners(rows)
        # A pass may commit an intent and its create make the VM between the two reads above:
        # its row exists (intents are committed before any create), just after the first read.
        # A VM is unowned only if the rows read after it was listed claim it neither.
        if any(owner_of(vm) is None for vm in vms):
            later = _owners(list_workers(self.engine, pool_id=POOL, limit=None))
            first = owner_of

            def owner_of(vm: SimVm) -> WorkerRecord | None:
                return first(vm) or later(vm)

        per_worker: Counter[str] = Counter()
        for vm in vms:
            row = owner_of(vm)
            if row is None:
                self.unowned.add(f"{vm.cloud_id} {dict(vm.tags)}")
                continue
            self.owners[vm.cloud_id] = row.worker_id
            per_worker[row.worker_id] += 1
            if row.state == WorkerState.STOPPED and (row.stop_reason or "").startswith(FAILED):
                self.failed_beside_vm.setdefault(
                    row.worker_id, f"{row.stop_reason!r} beside VM {vm.cloud_id} ({vm.state})"
                )
        self.duplicates |= {w for w, n in per_worker.items() if n > 1}
        live_capacity = capacity.requested + capacity.running
        self.worst_capacity = max(self.worst_capacity, live_capacity)
        self.worst_vms = max(self.worst_vms, len(vms))
        if live_capacity > self.max_capacity or len(vms) > self.max_capacity:
            self.over.append(f"rows {live_capacity}, VMs {len(vms)} at {time.time():.2f}")


def _owners(rows: list[WorkerRecord]) -> Callable[[SimVm], WorkerRecord | None]:
    """The row a VM belongs to: by cloud id, by its worker tag, or (a VM of an EC2 batch,
    which carries only the batch's tag) by batch and launch index."""
    by_cloud = {r.cloud_id: r for r in rows if r.cloud_id}
    by_worker = {r.worker_id: r for r in rows}
    by_batch = {(r.batch_token, r.launch_index): r for r in rows if r.batch_token}

    def owner_of(vm: SimVm) -> WorkerRecord | None:
        return (
            by_cloud.get(vm.cloud_id)
            or by_worker.get(vm.tags.get(TAG_WORKER, ""))
            or by_batch.get((vm.tags.get(TAG_BATCH), vm.launch_index))
        )

    return owner_of


def _some(items: Any, shown: int = 3) -> str | None:
    """A few of the items and how many there are; None for none."""
    items = list(items.items() if isinstance(items, dict) else items)
    if not items:
        return None
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return f"{len(items)}: {items[:shown]}{more}"


class Loop:
    """Runs one step over and over in a thread, `gap_s` apart, until stopped; keeps what the
    step raised instead of dying (a pass that raises is a finding, reported at the end)."""

    def __init__(self, name: str, step: Callable[[], object], gap_s: float) -> None:
        self.name = name
        self.errors: list[str] = []
        self._step = step
        self._gap_s = gap_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{name}", daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=15)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # reported by the test, not lost in a thread
                self.errors.append(f"{self.name}: {exc!r}")
            self._stop.wait(self._gap_s)
