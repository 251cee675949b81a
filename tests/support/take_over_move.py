"""A live worker-manager deployment moved onto wm one provider at a time, as the runbook moves it.

The legacy deployment (wmsim/legacy: the stand-in's HTTP service, its provisioner and scanner,
its fleet of simulated worker-runners) runs a pool on each simulated cloud under Firefox CI's
provider ids, behind a Taskcluster deployment whose ingress routes `<rootUrl>/api/worker-manager/`
(tests/support/fake_tc_deployment.py); tasks arrive in wm's builtin queue, which stands in for
the Taskcluster queue of both services. `Move.take_over(provider)` follows the runbook: wm's
config gets the provider (`adopt_legacy`, the same providerId) and `[take_over] legacy_url`,
wm's real processes start as subprocesses with the deployment's worker-manager client as their
Taskcluster credentials, the ingress is switched to wm's web, `wm import` runs as a subprocess,
and the provider is removed from the stand-in at once.

While it runs, threads measure what the issue asks: tasks keep arriving; the capacity of every
pool (wm's rows and the stand-in's workers of the providers it still has) is sampled against the
pool's maximum; and the pools still at the stand-in are read through the rootUrl and from the
stand-in directly with the real `taskcluster` client, and compared.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import taskcluster
from sqlalchemy import Engine, text

from tests.fixtures.sim_gce import GCE_PROJECT, GCE_WORKER_ACCOUNT
from tests.support.fake_tc_deployment import FakeClient, FakeTaskcluster
from tests.support.legacy_deployment import ISSUER, LEGACY_PROVIDERS, legacy_pools, legacy_providers
from tests.support.stack import (
    REPO,
    START_TIMEOUT_S,
    Stack,
    WmProcess,
    aws_provider,
    azure_provider,
    gcp_provider,
)
from wm.db import tasks as task_store
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.take_over.marks import IMPORTED_FROM, imported_worker_id
from wmsim.agent import AgentSettings, WorkerAgent
from wmsim.fleet import Fleet, vm_provider
from wmsim.gcp.identity import service_account_id
from wmsim.legacy.auth import PermanentClient
from wmsim.legacy.stack import LegacyStack
from wmsim.postgres import free_port

OPERATOR = ("project/relops", "relops-token-" + "r" * 32)  # a client of the deployment's auth
ALL_SCOPES = ("worker-manager:*",)
# Compressed lives: tasks of a second, workers idle out after 2 s of no work, renew their
# credentials every 4 s (half of an 8 s reregistration timeout: a margin for a busy machine).
AGENT = AgentSettings(
    idle_timeout_s=2.0, should_terminate_every_s=0.3, notice_every_s=0.3, poll_s=0.05
)
REREGISTRATION_TIMEOUT_S = 8
# A VM whose worker never registers is removed this long after its launch (by either side).
REGISTRATION_TIMEOUT_S = 15
TASK_S = 1.0
FEED_EVERY_S = 0.3  # one task per pool each time: a little more than 3 workers can take
MAX_CAPACITY = 3
WAIT_S = 90.0
SCAN_S = 0.5
LIVE_VM = {"aws": ("pending", "running"), "gcp": ("provisioning", "staging", "running")}

KIND = {provider_id: kind for provider_id, _, kind, _, _ in LEGACY_PROVIDERS}
POOL = {provider_id: pool_id for provider_id, _, _, pool_id, _ in LEGACY_PROVIDERS}
REGION = {provider_id: region for provider_id, _, _, _, region in LEGACY_PROVIDERS}


def wait_for(
    check: Callable[[], bool],
    what: str,
    timeout_s: float = WAIT_S,
    shown: Callable[[], object] = lambda: "",
) -> None:
    """Until `check()`; else fail naming `what`, with what `shown()` says of the state."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s:g}s: {what} {shown()}"
        time.sleep(0.1)


def wm_provider(provider_id: str, sims: Mapping[str, Any]) -> dict[str, Any]:
    """wm's config entry taking over one of the stand-in's providers: the same providerId, the
    same cloud account, project and resource group, adopting worker-manager's VMs."""
    kind, sim = KIND[provider_id], sims[KIND[provider_id]]
    common = {"adopt_legacy": True, "regions": [REGION[provider_id]], "scan_interval_s": SCAN_S}
    if kind == "aws":
        return aws_provider(
            sim, provider_id, identity_certificate=str(sim.identity_trust_path), **common
        )
    if kind == "gcp":
        return gcp_provider(
            sim,
            provider_id,
            project=GCE_PROJECT,
            worker_service_account_email=GCE_WORKER_ACCOUNT,
            worker_service_account_id=service_account_id(GCE_WORKER_ACCOUNT),
            identity_jwks=str(sim.identity_trust_path),
            operation_poll_s=0.05,
            **common,
        )
    return azure_provider(sim, provider_id, identity_roots=[str(sim.identity_trust_path)], **common)


def every_page(method: Callable[..., dict[str, Any]], *args: str, key: str) -> list[Any]:
    """A list endpoint's items over all its pages (its continuation tokens followed)."""
    items: list[Any] = []
    query: dict[str, str] = {}
    while True:
        answer = method(*args, query=query)
        items.extend(answer[key])
        token = answer.get("continuationToken")
        if not token:
            return items
        query = {"continuationToken": token}


@dataclass
class Comparison:
    """The pools still at the stand-in, read through the rootUrl and from the stand-in."""

    phase: str
    pool_id: str
    same: bool
    via_root: Any = None
    direct: Any = None


@dataclass
class Move:
    tmp: Path
    db_url: str
    engine: Engine
    sims: dict[str, Any]
    ingress: FakeTaskcluster
    legacy: LegacyStack
    moved: list[str] = field(default_factory=list)  # providers wm has, in the order moved
    moving: set[str] = field(default_factory=set)  # being imported, or imported
    # Workers the stand-in launched after an import read its list: the second import's
    late: set[str] = field(default_factory=set)
    phase: str = "legacy"
    take_over: bool = True  # forwarding on
    generation: int = 0
    stack: Stack | None = None
    web: WmProcess | None = None
    web_url: str | None = None
    provisioner: WmProcess | None = None
    scanners: dict[str, WmProcess] = field(default_factory=dict)
    processes: list[WmProcess] = field(default_factory=list)
    fleet: Fleet | None = None
    submitted: Counter[str] = field(default_factory=Counter)
    capacity_peaks: dict[str, int] = field(default_factory=dict)
    # (phase, pool, the workers counted) of every sample above a pool's maximum
    over_capacity: list[tuple[str, str, list[str]]] = field(default_factory=list)
    samples: int = 0
    # pool -> (tasks, every s), where not one every FEED_EVERY_S
    feed_rate: dict[str, tuple[int, float]] = field(default_factory=dict)
    lulled: set[str] = field(default_factory=set)
    renewed_at_wm: set[str] = field(default_factory=set)  # imported workers seen renewed at wm
    comparisons: list[Comparison] = field(default_factory=list)
    unsettled: int = 0  # comparisons skipped: the stand-in's answer changed while compared
    imports: list[dict[str, Any]] = field(default_factory=list)
    events_while_feeding: dict[int, int] = field(default_factory=dict)  # id(agent) -> events
    switched_at_call: int = 0  # the stand-in's call count when forwarding went off
    _feeding: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Held through each comparison: a pool's import waits for the one under way, so that no
    # comparison of it straddles the moment wm starts answering for it.
    _comparing: threading.RLock = field(default_factory=threading.RLock)

    # -- the legacy deployment, running ----------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def start(
        cls, tmp: Path, db_url: str, engine: Engine, sim_ec2: Any, sim_gce: Any, sim_arm: Any
    ) -> Iterator[Move]:
        """The stand-in running its three pools behind the ingress, tasks arriving, the
        samplers running; on exit everything this started is stopped."""
        sims = {"aws": sim_ec2, "gcp": sim_gce, "azure": sim_arm}
        clients = {
            OPERATOR[0]: FakeClient(OPERATOR[1], ALL_SCOPES),
            ISSUER[0]: FakeClient(ISSUER[1], ALL_SCOPES),
        }
        with FakeTaskcluster(clients, roles={"anonymous": []}) as ingress:
            legacy = LegacyStack.create(
                engine=engine,
                providers=legacy_providers(sim_ec2, sim_gce, sim_arm),
                issuer_client_id=ISSUER[0],
                issuer_access_token=ISSUER[1],
                root_url=ingress.root_url,
                clients={OPERATOR[0]: PermanentClient(OPERATOR[1], ALL_SCOPES)},
                issuer_scopes=ALL_SCOPES,  # wm's web and `wm import` read it as this client
                pools=legacy_pools(
                    max_capacity=MAX_CAPACITY,
                    registrationTimeout=REGISTRATION_TIMEOUT_S,
                    reregistrationTimeout=REREGISTRATION_TIMEOUT_S,
                ),
                agent_settings=AGENT,
            )
            ingress.upstream = legacy.manager.base_url
            move = cls(tmp, db_url, engine, sims, ingress, legacy)
            legacy.run()
            try:
                move._spawn(move._feed, "feeder")
                move._spawn(move._sample_capacity, "capacity")
                move._spawn(move._compare_all_the_time, "compare")
                yield move
            finally:
                move._stop.set()
                for thread in move._threads:
                    thread.join(timeout=30)
                if move.fleet is not None:
                    move.fleet.halt()
                for process in move.processes:
                    process.kill()
                legacy.stop()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, daemon=True, name=f"move-{name}")
        self._threads.append(thread)
        thread.start()

    # -- the workload ----------------------------------------------------------------------------

    def _feed(self) -> None:
        self._feeding.set()
        due = dict.fromkeys(POOL.values(), time.monotonic())
        while not self._stop.is_set():
            now = time.monotonic()
            for pool_id in POOL.values() if self._feeding.is_set() else ():
                if now >= due[pool_id]:
                    count, every_s = self.feed_rate.get(pool_id, (1, FEED_EVERY_S))
                    task_store.submit_tasks(self.engine, pool_id, count, TASK_S)
                    with self._lock:
                        self.submitted[pool_id] += count
                    due[pool_id] = now + every_s
            self._stop.wait(0.05)

    def slow_down(self, pool_id: str, every_s: float, count: int = 1) -> None:
        """`count` tasks arrive in this pool every `every_s` from now on (the pool is left out
        of `scaled_down_while_feeding`: scaling down is what a lull is for)."""
        self.lulled.add(pool_id)
        self.feed_rate[pool_id] = (count, every_s)

    def full_speed(self, pool_id: str) -> None:
        self.feed_rate.pop(pool_id, None)

    def stop_feeding(self) -> None:
        self._feeding.clear()
        self.events_while_feeding = {id(a): len(a.events) for a in self.agents()}

    def scaled_down_while_feeding(self) -> list[str]:
        """Workers told to go for want of work while tasks arrived faster than the pools'
        maximum can take them."""
        return [
            agent.queue_worker_id
            for agent in self.agents()
            if SCALE_DOWN in agent.events[: self.events_while_feeding.get(id(agent), 0)]
            and (agent.boot is None or agent.boot.worker_pool_id not in self.lulled)
        ]

    def completed(self) -> Counter[str]:
        done = task_store.list_tasks(self.engine, state="completed", limit=None)
        return Counter(t.pool_id for t in done)

    def every_task_completed(self) -> bool:
        with self._lock:
            submitted = Counter(self.submitted)
        return self.completed() == submitted

    # -- capacity --------------------------------------------------------------------------------

    def capacity(self) -> dict[str, int]:
        """Per pool: the capacity of wm's workers that are not stopped and of the stand-in's
        workers that are not stopped under a provider it still has, each worker once (an
        imported worker is in both until the stand-in lets its provider go)."""
        return {pool_id: sum(c for _, c in seen) for pool_id, seen in self.live_workers().items()}

    def live_workers(self) -> dict[str, list[tuple[str, int]]]:
        """Per pool: (where and which worker in what state, capacity) of every worker counted
        by `capacity`."""
        workers: dict[str, tuple[str, str, int]] = {}
        removed = self.legacy.manager.deployment.removed_providers
        for worker in self.legacy.manager.workers():
            state = worker.state
            if state != "stopped" and worker.provider_id not in removed:
                name = imported_worker_id(*worker.key)
                workers[name] = (worker.worker_pool_id, f"stand-in {state}", worker.capacity)
        for row in list_workers(self.engine, limit=None):
            if row.state is not WorkerState.STOPPED:
                workers[row.worker_id] = (row.pool_id, f"wm {row.state.value}", row.capacity)
        per_pool: dict[str, list[tuple[str, int]]] = {}
        for name, (pool_id, where, capacity) in workers.items():
            per_pool.setdefault(pool_id, []).append((f"{where} {name}", capacity))
        return per_pool

    def _sample_capacity(self) -> None:
        while not self._stop.is_set():
            phase = self.phase
            for pool_id, seen in self.live_workers().items():
                capacity = sum(c for _, c in seen)
                self.capacity_peaks[pool_id] = max(self.capacity_peaks.get(pool_id, 0), capacity)
                if capacity > MAX_CAPACITY:
                    self.over_capacity.append((phase, pool_id, [w for w, _ in seen]))
            for worker_id, row in self.imported().items():
                if row["renewed"]:
                    self.renewed_at_wm.add(worker_id)
            self.samples += 1
            self._stop.wait(0.1)

    # -- the pools still at the stand-in, through the rootUrl and directly ------------------------

    def client(self, root_url: str) -> Any:
        """The operator's client, retrying as clients do (a web process being replaced may drop
        a connection; the answers compared are the ones it gets)."""
        credentials = {"clientId": OPERATOR[0], "accessToken": OPERATOR[1]}
        return taskcluster.WorkerManager({"rootUrl": root_url, "credentials": credentials})

    def legacy_pools(self) -> list[str]:
        """The pools the stand-in answers for: of the providers not moved nor moving."""
        return [POOL[p] for p in POOL if p not in self.moved and p not in self.moving]

    def compare(self, attempts: int = 40) -> None:
        """One comparison of every pool still at the stand-in (workerPool, its workers, its
        entry of listWorkerPools): the stand-in's answer is read before and after the one
        through the rootUrl, and compared only when it did not change in between."""
        with self._comparing:
            self._compare(attempts)

    def _compare(self, attempts: int) -> None:
        phase = self.phase
        via_root, direct = self.client(self.ingress.root_url), self.client(self.legacy_base_url)
        for pool_id in self.legacy_pools():
            reads: dict[str, Callable[[Any], Any]] = {
                "workerPool": lambda c, p=pool_id: c.workerPool(p),
                "listWorkersForWorkerPool": lambda c, p=pool_id: sorted(
                    every_page(c.listWorkersForWorkerPool, p, key="workers"),
                    key=lambda w: w["workerId"],
                ),
                "listWorkerPools": lambda c, p=pool_id: [
                    pool
                    for pool in every_page(c.listWorkerPools, key="workerPools")
                    if pool["workerPoolId"] == p
                ],
            }
            for name, read in reads.items():
                for _ in range(attempts):
                    before, through, after = read(direct), read(via_root), read(direct)
                    if before == after:
                        self.comparisons.append(
                            Comparison(
                                f"{phase}", f"{name} {pool_id}", through == before, through, before
                            )
                        )
                        break
                    self.unsettled += 1
                else:
                    raise AssertionError(f"{name} of {pool_id} never settled for a comparison")

    def _compare_all_the_time(self) -> None:
        while not self._stop.is_set():
            if self.legacy_pools() and self.take_over:
                try:
                    self.compare()
                except Exception as error:  # kept: the test asserts there was none
                    self.comparisons.append(Comparison(self.phase, repr(error), False))
            self._stop.wait(0.5)

    @property
    def legacy_base_url(self) -> str:
        return self.legacy.manager.base_url

    # -- wm ----------------------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """What the platform gives wm's processes: the deployment's rootUrl (its auth service)
        and its worker-manager client, the issuer of every worker's credentials."""
        return {
            "TASKCLUSTER_ROOT_URL": self.ingress.root_url,
            "TASKCLUSTER_CLIENT_ID": ISSUER[0],
            "TASKCLUSTER_ACCESS_TOKEN": ISSUER[1],
            "WM_OPERATOR_TOKEN": "",
        }

    def configure(self, providers: list[str], *, take_over: bool = True) -> Stack:
        """A new config generation: these providers, forwarding on or off, a web port of its
        own (the next web starts beside the running one; the ingress then switches)."""
        self.generation += 1
        where = self.tmp / f"wm-{self.generation}"
        where.mkdir()
        port = free_port()
        top: dict[str, Any] = {
            "web": {"port": port},
            "root_url": self.ingress.root_url,
            "intervals": {"provision_s": 0.5},
        }
        if take_over:
            top["take_over"] = {"legacy_url": self.legacy_base_url}
        stack = Stack.write(
            where, self.db_url, [wm_provider(p, self.sims) for p in providers], [], **top
        )
        self.stack = stack
        return stack

    def _start(self, *args: str) -> WmProcess:
        assert self.stack is not None
        process = WmProcess.start(
            ["run", *args], self.stack.path, self.db_url, env=self.environment()
        )
        self.processes.append(process)
        return process

    def start_web(self) -> str:
        """wm's web on the current config, healthy; the previous one keeps serving until the
        ingress is switched."""
        assert self.stack is not None
        port = self.stack.data["web"]["port"]
        url = f"http://127.0.0.1:{port}"
        web = self._start("web")
        web.wait_for(lambda: _healthy(url), START_TIMEOUT_S, "wm's web to answer")
        old, self.web, self.web_url = self.web, web, url
        self.route_to_wm()
        if old is not None:
            old.terminate()
        return url

    def route_to_wm(self) -> None:
        assert self.web_url is not None
        self.ingress.upstream = self.web_url

    def restart_loops(self, kinds: list[str]) -> None:
        """The provisioner on the current config, and a scanner for each kind of it."""
        if self.provisioner is not None:
            self.provisioner.terminate()
        self.provisioner = self._start("provisioner")
        for kind in kinds:
            if kind in self.scanners:
                self.scanners[kind].terminate()
            self.scanners[kind] = self._start("scanner", "--kind", kind)
        self.provisioner.wait_for(
            lambda: self.provisioner is not None and self.provisioner.started(),
            START_TIMEOUT_S,
            "the provisioner",
        )
        for kind in kinds:
            scanner = self.scanners[kind]
            scanner.wait_for(
                lambda s=scanner: s.events("process-started"), START_TIMEOUT_S, f"{kind} scanner"
            )

    def run_import(self, provider_id: str) -> subprocess.CompletedProcess[str]:
        assert self.stack is not None
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("TASKCLUSTER_") and k not in ("DATABASE_URL", "WM_CONFIG")
        }
        env |= {"DATABASE_URL": self.db_url, "WM_CONFIG": str(self.stack.path)}
        env |= {"TASKCLUSTER_CLIENT_ID": ISSUER[0], "TASKCLUSTER_ACCESS_TOKEN": ISSUER[1]}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "wm",
                "import",
                "--from",
                self.legacy_base_url,
                "--provider",
                provider_id,
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        self.imports.append({"provider": provider_id, "output": done.stdout})
        return done

    def start_fleet(self) -> None:
        """The VMs wm launches boot a simulated worker-runner, as its images would (the
        stand-in's fleet boots its own, and keeps them after the move)."""
        assert self.stack is not None
        config = self.stack.config()
        if self.fleet is not None:
            self.fleet.config = config
            return
        self.fleet = Fleet(config, self.engine, AGENT, running_vms=self._wms_running_vms)
        fleet = self.fleet

        def run() -> None:
            while not self._stop.is_set() and not fleet.stop.is_set():
                fleet.sync()
                self._stop.wait(0.2)

        self._spawn(run, "wm-fleet")

    def _wms_running_vms(self) -> dict[str, set[str]]:
        """The VMs wm launched (its provider tag), running, per provider."""
        found: dict[str, set[str]] = {}
        for provider_id in self.moved:
            kind = KIND[provider_id]
            found[provider_id] = {
                vm.cloud_id
                for vm in self.sims[kind].instances()
                if vm.state == "running" and vm_provider(kind, vm.tags) == provider_id
            }
        return found

    # -- the runbook -------------------------------------------------------------------------------

    def take_over_provider(self, provider_id: str) -> None:
        """One provider moves: configure wm with it, start (restart) its processes, route the
        rootUrl to wm's web, import, remove the provider from the stand-in at once."""
        self.phase = f"{provider_id}: wm configured"
        self.configure([*self.moved, provider_id])
        self.restart_loops([KIND[provider_id]])
        self.start_web()
        self.phase = f"{provider_id}: rootUrl at wm"
        self.compare()
        with self._comparing:
            self.moving.add(provider_id)
        self.run_import(provider_id)
        self.moved.append(provider_id)
        self.start_fleet()
        self.phase = f"{provider_id}: imported"
        first = set(self.imported())
        self.legacy.manager.remove_provider(provider_id)
        self.phase = f"{provider_id}: removed from the stand-in"
        # A VM the stand-in launched between the import's read and the removal is wm's to
        # take, and no one's until then: the import run again once the stand-in's loop under
        # way at the removal is over takes it (and adds nothing else).
        loops = self.legacy.provisioner.loops
        wait_for(lambda: self.legacy.provisioner.loops >= loops + 2, "the stand-in's next loop")
        self.run_import(provider_id)
        self.late.update(set(self.imported()) - first)
        if self.legacy_pools():
            self.compare()

    def forwarding_off(self) -> None:
        """The last step: no provider left at the stand-in, wm's web restarts without
        [take_over]; from then on nothing reaches the stand-in."""
        self.take_over = False
        self.phase = "forwarding off"
        self.configure(list(self.moved), take_over=False)
        self.start_web()
        self.switched_at_call = len(self.legacy.manager.deployment.calls)

    # -- what happened -----------------------------------------------------------------------------

    def agents(self) -> list[WorkerAgent]:
        legacy = list(self.legacy.fleet.booted)
        return legacy + (list(self.fleet.agents.values()) if self.fleet else [])

    def legacy_agents(self) -> dict[str, WorkerAgent]:
        return {agent.queue_worker_id: agent for agent in self.legacy.fleet.booted}

    def imported(self) -> dict[str, dict[str, Any]]:
        """wm's imported rows: worker id -> state, provider, whether it renewed at wm."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT worker_id, provider_id, state, secret_hash IS NOT NULL AS renewed "
                    "FROM workers WHERE provider_data ->> :key IS NOT NULL"
                ),
                {"key": IMPORTED_FROM},
            ).mappings()
            return {row["worker_id"]: dict(row) for row in rows}

    def live_vms(self) -> dict[str, list[str]]:
        """What still runs or is still held in the clouds, per kind."""
        return {
            "aws": [
                vm.cloud_id for vm in self.sims["aws"].instances() if vm.state in LIVE_VM["aws"]
            ],
            "gcp": [
                vm.cloud_id for vm in self.sims["gcp"].instances() if vm.state in LIVE_VM["gcp"]
            ],
            "azure": list(self.sims["azure"].resources()),
        }

    def drained(self) -> bool:
        """Every VM gone in every cloud (with every resource made for it), every worker of wm
        and of the providers the stand-in still has stopped."""
        if any(self.live_vms().values()):
            return False
        if any(r.state is not WorkerState.STOPPED for r in list_workers(self.engine, limit=None)):
            return False
        removed = self.legacy.manager.deployment.removed_providers
        return all(
            w.state == "stopped"
            for w in self.legacy.manager.workers()
            if w.provider_id not in removed
        )

    def refused(self) -> dict[str, list[str]]:
        """Every worker's refusals (`refusals`), except the registration of a worker the
        stand-in launched after the import's read (`late`): wm had no row for it yet."""
        found = {}
        for agent in self.agents():
            seen = refusals(agent)
            if agent.queue_worker_id in self.late:
                seen = [e for e in seen if not e.startswith("register-refused")]
            if seen:
                found[agent.queue_worker_id] = seen
        return found

    def late_registrations_refused(self) -> int:
        return sum(
            1
            for agent in self.agents()
            if agent.queue_worker_id in self.late
            and any(e.startswith("register-refused") for e in agent.events)
        )

    def leftovers(self) -> dict[str, Any]:
        """What keeps `drained()` false."""
        removed = self.legacy.manager.deployment.removed_providers
        names = {
            vm.rsplit("/", 1)[-1]
            for vms in self.live_vms().values()
            for vm in vms
            if "/virtualMachines/" in vm or "/" not in vm
        }
        rows = list_workers(self.engine, limit=None)
        return {
            "vms": self.live_vms(),
            "their rows": [
                (r.worker_id, r.state.value, r.stop_reason)
                for r in rows
                if any(n in r.worker_id or n == r.cloud_id for n in names)
            ],
            "their agents": {
                a.queue_worker_id: a.events[-6:]
                for a in self.agents()
                if any(n in a.queue_worker_id for n in names)
            },
            "at the stand-in": [
                (w.key, w.state) for w in self.legacy.manager.workers() if w.worker_id in names
            ],
            "wm said": [
                line
                for process in self.processes
                for line in process.raw
                if any(n in line for n in names)
            ][-10:],
            "wm": [
                (r.worker_id, r.state.value, r.cloud_id)
                for r in list_workers(self.engine, limit=None)
                if r.state is not WorkerState.STOPPED
            ],
            "stand-in": [
                (w.key, w.state)
                for w in self.legacy.manager.workers()
                if w.state != "stopped" and w.provider_id not in removed
            ],
        }

    def figures(self) -> dict[str, Any]:
        events: Counter[str] = Counter()
        statuses: Counter[int] = Counter()
        for agent in self.agents():
            events.update(e.split(":")[0] if ":" not in e else e for e in agent.events)
            statuses.update(agent.answers)
        imported = self.imported()
        return {
            "tasks_submitted": sum(self.submitted.values()),
            "tasks_completed": sum(self.completed().values()),
            "workers_imported": len(imported),
            "workers_imported_late": len(self.late),
            "late_registrations_refused": self.late_registrations_refused(),
            "imported_renewed_at_wm": len(self.renewed_at_wm),
            "agent_events": dict(events),
            "scaled_down_while_feeding": len(self.scaled_down_while_feeding()),
            "agent_answers": dict(statuses),
            "capacity_peaks": dict(self.capacity_peaks),
            "capacity_samples": self.samples,
            "over_capacity": len(self.over_capacity),
            "comparisons": len(self.comparisons),
            "comparisons_differing": sum(1 for c in self.comparisons if not c.same),
            "comparisons_unsettled": self.unsettled,
            "wm_launched": sum(
                1
                for r in list_workers(self.engine, limit=None)
                if IMPORTED_FROM not in r.provider_data
            ),
            "legacy_launched": self.legacy.provisioner.launched,
        }


SCALE_DOWN = "told-to-terminate:worker pool has more capacity than it needs"
BAD = ("register-refused", "reregister-refused", "told-to-terminate", "crashed", "remove-failed")


def refusals(agent: WorkerAgent) -> list[str]:
    """What an agent was refused or told that a worker kept through a move never is. Told to
    go as its pool has more capacity than its tasks need is worker-manager's scale-down (api.js
    shouldWorkerTerminate), not a refusal: the tests count it apart, and want none while tasks
    arrive faster than the pools' maximum takes them."""
    return [e for e in agent.events if e.startswith(BAD) and e != SCALE_DOWN]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False
