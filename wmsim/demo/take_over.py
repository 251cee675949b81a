"""`wmsim demo --take-over`: a live worker-manager deployment moves its first provider onto wm.

The run, as an operator would live it (README: "Moving a deployment onto wm"):

1. A legacy fleet: the worker-manager stand-in (wmsim.legacy: its HTTP service, provisioner,
   worker scanner, and the simulated worker-runner on every VM it makes) runs the demo's pools
   on the three simulated clouds, launching with worker-manager's tags. The rootUrl is an
   ingress the demo runs (wmsim.ingress), routing `<rootUrl>/api/worker-manager/` to the
   stand-in. The workload arrives in the builtin queue all along.
2. At `demo.take_over_at` of the workload, the provider whose cloud moves first (Azure) moves:
   wm's Procfile processes start, configured with that provider only (`adopt_legacy = true`)
   and `[take_over] legacy_url` at the stand-in; once the web process answers, the ingress is
   switched to it, `wm import --from <legacy> --provider <id>` runs, the stand-in's
   `remove_provider` follows at once, and the import runs again for anything launched between.
3. The rest of the run: wm serves the moved pools (adopting their VMs) and forwards every other
   request to the stand-in; the demo samples answers through the forwarding against the
   stand-in's own. After the drain, report.json's `take_over` section holds the move's figures
   (wmsim/demo/take_over_report.py) and the run fails on any of them.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import tomllib
import urllib.request
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import Engine

from wm.config import loader as config_module
from wm.config.loader import Config
from wm.db import tasks as task_store
from wm.db.engine import make_engine
from wm.db.pools import pool_statuses
from wm.db.workers import list_workers
from wm.errors import WmError
from wm.kinds import KINDS
from wm.model import WorkerState
from wm.pools.definition import parse_definition_documents
from wm.queues.builtin import BuiltinQueue
from wm.take_over.marks import imported_from
from wmsim.agent import AgentSettings, WorkerAgent
from wmsim.clouds import CLOUDS
from wmsim.control import LIVE_VM_STATES
from wmsim.demo import report as report_module
from wmsim.demo import take_over_report
from wmsim.demo.forwarded_reads import OBSERVER_CLIENT, ForwardedReads
from wmsim.demo.live import LiveState, PoolRow
from wmsim.demo.progress import Progress, any_busy
from wmsim.demo.report import RunFacts
from wmsim.demo.run import (
    AGENT_POLL_S,
    AGENT_SHOULD_TERMINATE_EVERY_S,
    DEMO_DB_POOL_SIZE,
    Demo,
    own_log,
)
from wmsim.demo.supervisor import RELEASE, START_TIMEOUT_S, Supervisor, read_procfile, read_toml
from wmsim.demo.take_over_report import AgentLife, Held, TakeOverFacts
from wmsim.demo.workload import PoolShare
from wmsim.ingress import Ingress
from wmsim.legacy.provisioner import LegacyProvider
from wmsim.legacy.stack import LegacyStack
from wmsim.postgres import free_port
from wmsim.serve import SimEndpoint

# The deployment's worker-manager client: the issuer of every worker's credentials, given to
# wm too (TASKCLUSTER_CLIENT_ID / _ACCESS_TOKEN). Fake, as everything here: never a real one.
ISSUER_CLIENT = "static/taskcluster/worker-manager"
IMPORT = "import"
LEGACY = "legacy"
WM = "wm"
LEGACY_INTERVAL_S = 0.5  # the stand-in's provisioner and scanner loop
COMPARE_EVERY_S = 2.0  # how often answers through the forwarding are sampled
HEALTH_TIMEOUT_S = 0.5
REIMPORT_GAP_S = 5.0  # at most one import this often for VMs the scanners report


class Stage(Enum):
    """Where the move stands."""

    LEGACY = "the legacy serves every pool"
    STARTING = "wm's processes starting"
    REMOVING = "the legacy restarting without the provider"
    MOVED = "moved"


class TakeOverDemo(Demo):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ingress = Ingress()
        self.legacy: LegacyStack | None = None
        self.issuer_token = secrets.token_urlsafe(32)
        self.moved = ""  # the provider id that moves
        self.kinds: dict[str, str] = {}  # every provider of the config: id -> kind
        self.pool_providers: dict[str, str] = {}
        self.max_capacity: dict[str, int] = {}
        self.stage = Stage.LEGACY
        self.loops_at_removal = 0
        self.imported_at = 0.0  # monotonic
        self.imported_at_epoch = 0.0  # what the processes' log lines stamp
        self.wm_started_at = 0.0
        self.moved_at_s: float | None = None
        self.calls_at_move = 0
        self.agents: dict[tuple[str, str], WorkerAgent] = {}  # every one the legacy fleet ran
        self.events_at_move: dict[tuple[str, str], int] = {}
        self.capacity: list[dict[str, int]] = []
        self.reads = ForwardedReads()  # the legacy's answers through wm and at itself
        self.next_comparison = 0.0
        self.import_runs: list[str] = []
        self.all_vms: dict[str, list[Any]] = {}  # cloud kind -> every VM, whoever made it

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> int:
        spec = self.run_spec
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        entries = read_procfile(spec.procfile)
        raw = tomllib.loads(spec.config_path.read_text())
        web_port = free_port()
        self.web_url = f"http://127.0.0.1:{web_port}"
        env = self._environment(web_port)
        env |= {
            "TASKCLUSTER_CLIENT_ID": ISSUER_CLIENT,
            "TASKCLUSTER_ACCESS_TOKEN": self.issuer_token,
        }
        self.supervisor = Supervisor(entries, env, self.logs, Path.cwd())
        with contextlib.ExitStack() as stack:
            # The stand-in runs in this process: its log lines (the provisioner's warnings)
            # go to the demo's log too.
            stack.enter_context(own_log(self.logs / "demo.log", ("wm", "wmsim")))
            stack.enter_context(self.ingress)
            self.root_url = self.ingress.root_url
            stack.callback(self.supervisor.stop)
            endpoints = self._start_clouds(raw)
            self._say(f"clouds: {', '.join(f'{e.kind} {e.endpoint}' for e in endpoints)}")
            engine = make_engine(
                spec.database_url, application_name="wm-demo", pool_size=DEMO_DB_POOL_SIZE
            )
            stack.callback(engine.dispose)
            self.legacy = self._legacy(raw, endpoints, engine)
            stack.callback(self.legacy.stop)
            self.config = self._write_config(self._wm_side(raw), endpoints, web_port)
            self._say(f"rootUrl {self.root_url} (the ingress) -> legacy worker-manager")
            self._say("release phase: " + self.supervisor.entry(RELEASE).command)
            self.supervisor.run_once(RELEASE)
            definitions = self._legacy_definitions()
            self.legacy.manager.load_pools(definitions)
            self._say(
                f"legacy worker-manager at {self.legacy.manager.base_url}: "
                f"{len(definitions)} pools, providers {', '.join(sorted(self.kinds))}; "
                f"{self.moved} moves to wm at {self.run_spec.demo.take_over_at:.0%} of the workload"
            )
            self.ingress.route_to(LEGACY, self.legacy.manager.base_url)
            self.legacy.run()
            progress = Progress()
            # wm's fleet boots workers on wm's own VMs only (progress.vms holds this
            # deployment's): an adopted VM already runs the worker the legacy fleet booted.
            fleet = self._fleet(engine, progress)
            stack.callback(fleet.halt)
            self._drive(engine, fleet, progress)
            facts = self._facts(engine, progress)
            take_over = take_over_report.figures(self._take_over_facts(engine, facts))
        report = report_module.build(facts)
        report["take_over"] = take_over
        report["problems"] += take_over_report.problems(take_over)
        report["healthy"] = not report["problems"]
        self._write_report(report)
        self._summarise(report)
        return 0 if report["healthy"] else 1

    # -- set-up ---------------------------------------------------------------------------------

    def _legacy(
        self, raw: Mapping[str, Any], endpoints: list[SimEndpoint], engine: Engine
    ) -> LegacyStack:
        """The stand-in with a provider for every cloud provider of the config (same ids: wm's
        provider ids are Taskcluster's), serving on a port of its own; its loops start later."""
        by_kind = {e.kind: e for e in endpoints}
        providers = []
        for provider in raw.get("providers", []):
            kind = provider.get("kind", "")
            if kind not in CLOUDS:
                continue  # hand-made machines stay out of the take-over
            settings = {**provider, **by_kind[kind].provider_settings()}
            providers.append(
                LegacyProvider(provider["id"], KINDS[kind].provider_type, kind, settings)
            )
            self.kinds[provider["id"]] = kind
        movers = [p.provider_id for p in providers if CLOUDS[p.kind].moves_first]
        if not movers:
            raise WmError("--take-over: the config has no provider of the cloud that moves first")
        self.moved = movers[0]
        demo = self.run_spec.demo
        return LegacyStack.create(
            engine=engine,
            providers=providers,
            issuer_client_id=ISSUER_CLIENT,
            issuer_access_token=self.issuer_token,
            root_url=self.ingress.root_url,
            issuer_scopes=("worker-manager:*",),
            agent_settings=AgentSettings(
                idle_timeout_s=demo.idle_timeout_s,
                should_terminate_every_s=AGENT_SHOULD_TERMINATE_EVERY_S,
                poll_s=AGENT_POLL_S,
            ),
            interval_s=LEGACY_INTERVAL_S,
        )

    def _wm_side(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """wm's config: the provider that moves, adopting worker-manager's VMs, and nothing
        else (a provider wm has is never forwarded); the rootUrl is the ingress's."""
        moved = [
            {**p, "adopt_legacy": True}
            for p in raw.get("providers", [])
            if p.get("id") == self.moved
        ]
        return {**raw, "providers": moved}

    def _write_config(
        self, raw: dict[str, Any], endpoints: list[SimEndpoint], web_port: int
    ) -> Config:
        super()._write_config(raw, endpoints, web_port)
        assert self.legacy is not None
        effective = read_toml(self.effective_path)
        effective["take_over"] = {"legacy_url": self.legacy.manager.base_url}
        self._write_toml(effective)
        return config_module.load(
            self.effective_path, environ={"DATABASE_URL": self.run_spec.database_url}
        )

    def _legacy_definitions(self) -> list[dict[str, Any]]:
        """The run's pool definitions, as the legacy deployment holds them: the cloud pools
        (its renewals every `take_over_reregistration_s`, so workers renew through the move)."""
        renew_s = max(1, round(self.run_spec.demo.take_over_reregistration_s))
        documents: list[dict[str, Any]] = []
        for path in self.run_spec.pool_files:
            for pool_id, body in parse_definition_documents(path.read_text(), str(path)):
                kind = self.kinds.get(body.get("providerId", ""))
                if kind is None:
                    self._say(f"pool {pool_id}: not a cloud pool of the legacy, left out")
                    continue
                config = dict(body.get("config", {}))
                CLOUDS[kind].publish_for(self.clouds[kind], config.get("launchConfigs", []))
                config["lifecycle"] = {
                    **(config.get("lifecycle") or {}),
                    "reregistrationTimeout": renew_s,
                }
                documents.append({"workerPoolId": pool_id, **body, "config": config})
                capacity = int(config.get("maxCapacity", 0))
                self.pools.append(PoolShare(pool_id, kind, capacity))
                self.pool_providers[pool_id] = body["providerId"]
                self.max_capacity[pool_id] = capacity
        if not documents:
            raise WmError("no cloud worker pool definitions to run: give --pools FILE")
        path = self.run_spec.out_dir / "pools.yml"
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return documents

    # -- the move -------------------------------------------------------------------------------

    def _step(self, engine: Engine, progress: Progress) -> None:
        assert self.supervisor is not None and self.legacy is not None
        demo = self.run_spec.demo
        self._watch_agents()
        if (
            self.stage is Stage.LEGACY
            and progress.elapsed_s >= demo.take_over_at * demo.minutes * 60
        ):
            self._say(
                f"take-over of {self.moved}: starting wm's processes (Procfile) with "
                f"{self.moved} (adopt_legacy) and take_over.legacy_url"
            )
            for entry in self.supervisor.entries:
                if entry.name != RELEASE:
                    self.supervisor.start(entry.name)
            self.stage = Stage.STARTING
            self.wm_started_at = time.monotonic()
        elif self.stage is Stage.STARTING:
            if self._web_answers():
                self._move(progress)
            elif crashes := self.supervisor.crashes():
                raise WmError(
                    f"{crashes[0].name} exited ({crashes[0].exit_code}):\n{crashes[0].tail}"
                )
            elif time.monotonic() - self.wm_started_at > START_TIMEOUT_S:
                raise WmError(f"wm's web process did not answer within {START_TIMEOUT_S:g}s")
        elif self.stage is Stage.REMOVING:
            # worker-manager restarted without the provider once a whole loop of its
            # provisioner ran after the removal: what it launched before is listed by then.
            if self.legacy.provisioner.loops >= self.loops_at_removal + 2:
                self._import("what the legacy launched before the removal")
                self.stage = Stage.MOVED
        elif self.stage is Stage.MOVED:
            unadopted = self._unadopted_since_import()
            if unadopted and time.monotonic() - self.imported_at >= REIMPORT_GAP_S:
                self._import(f"the scanner reported {unadopted} VMs wm has no row for")
        if self.stage in (Stage.REMOVING, Stage.MOVED) and time.monotonic() >= self.next_comparison:
            self.next_comparison = time.monotonic() + COMPARE_EVERY_S
            assert self.legacy is not None
            self.reads.compare(self.legacy.manager, self.root_url, self.pool_providers, self.moved)

    def _web_answers(self) -> bool:
        url = self.web_url + "/healthz"
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT_S) as answer,
        ):
            return answer.status == 200
        return False

    def _move(self, progress: Progress) -> None:
        """The runbook's steps for one provider: route the rootUrl to wm, import, remove the
        provider from worker-manager (then, once it has restarted without it, import again)."""
        assert self.legacy is not None
        self.ingress.route_to(WM, self.web_url)
        self.moved_at_s = progress.elapsed_s
        self.calls_at_move = len(self.legacy.manager.deployment.calls)
        self.events_at_move = {key: len(agent.events) for key, agent in self.agents.items()}
        self._say(f"rootUrl -> wm's web ({self.web_url}) at {self.moved_at_s:.1f} s")
        self._import("the provider's pools and workers")
        self.legacy.manager.remove_provider(self.moved)
        self.loops_at_removal = self.legacy.provisioner.loops
        self._say(f"legacy worker-manager: remove_provider({self.moved})")
        self.stage = Stage.REMOVING

    def _import(self, why: str) -> None:
        assert self.supervisor is not None and self.legacy is not None
        command = f"wm import --from {self.legacy.manager.base_url} --provider {self.moved}"
        self._say(f"{command}    ({why})")
        done = self.supervisor.run_once(IMPORT, command)
        self.imported_at = time.monotonic()
        self.imported_at_epoch = time.time()
        for line in done.raw:
            if line.strip() and not line.startswith("{"):
                self.console.print(f"   {line.rstrip()}", highlight=False, markup=False)
                self.import_runs.append(line.strip())

    def _unadopted_since_import(self) -> int:
        """VMs of the moved provider the scanners reported since the last import: made by the
        legacy, with no row in wm (README: a later import takes them)."""
        assert self.supervisor is not None
        return len(
            {
                line.get("cloud_id")
                for process in list(self.supervisor.processes.values())
                for line in process.events("legacy-vm-unadopted")
                if line.get("provider") == self.moved
                and float(line.get("ts", 0)) > self.imported_at_epoch
            }
        )

    def _watch_agents(self) -> None:
        """Keep every worker the legacy fleet booted (it forgets those whose VM went)."""
        assert self.legacy is not None
        for key, agent in list(self.legacy.fleet.agents.items()):
            self.agents.setdefault(key, agent)

    # -- sampling -------------------------------------------------------------------------------

    def _sample(self, engine: Engine, progress: Progress) -> list[PoolRow]:
        assert self.legacy is not None
        calls = {}
        for kind, client in self.clouds.items():
            self.all_vms[kind] = client.instances()
            progress.vms[kind] = self._own(self.all_vms[kind])
            calls[kind] = sum(client.request_counts().values())
        live = self._live_keys()
        pools = list(self.pool_providers)
        queued = BuiltinQueue(engine).counts(pools)
        wm_rows = {s.pool_id: s for s in pool_statuses(engine)}
        legacy_held: dict[str, Counter[str]] = {}
        held: list[Held] = []
        with self.legacy.manager.store.lock:
            legacy_workers = list(self.legacy.manager.store.workers.values())
        for w in legacy_workers:
            if w.state == "stopped" or w.worker_id not in live.get(w.provider_id, set()):
                continue
            legacy_held.setdefault(w.worker_pool_id, Counter())[w.state] += w.capacity
            held.append(Held(w.worker_pool_id, w.worker_id, w.capacity))
        for row in list_workers(engine, limit=None):
            if row.state != WorkerState.STOPPED:
                held.append(Held(row.pool_id, row.tc_worker_id or row.worker_id, row.capacity))
        self.capacity.append(take_over_report.pool_capacity(held))
        done = task_store.count_by_state(engine)
        rows = []
        for pool_id in pools:
            q = queued.get(pool_id)
            pending, claimed = (q.pending, q.claimed) if q else (0, 0)
            if self._served_by_wm(pool_id):
                s = wm_rows.get(pool_id)
                capacity = (s.requested, s.running, s.stopping) if s else (0, 0, 0)
                errors = s.errors_last_hour if s else 0
                served = f"wm since {self.moved_at_s:.0f} s"
            else:
                c = legacy_held.get(pool_id, Counter())
                capacity = (c["requested"], c["running"], c["stopping"])
                errors = 0
                served = LEGACY + (" (wm starting)" if self._moving(pool_id) else "")
            rows.append(
                PoolRow(
                    pool_id,
                    self.kinds[self.pool_providers[pool_id]],
                    pending,
                    claimed,
                    *capacity,
                    done.get((pool_id, "completed"), 0),
                    errors,
                    served_by=served,
                )
            )
        progress.record(rows, calls)
        return rows

    def _served_by_wm(self, pool_id: str) -> bool:
        return self.moved_at_s is not None and self.pool_providers[pool_id] == self.moved

    def _moving(self, pool_id: str) -> bool:
        return self.stage is Stage.STARTING and self.pool_providers[pool_id] == self.moved

    def _live_keys(self) -> dict[str, set[str]]:
        """Per provider, the metadata keys (worker-manager's workerIds) of its live VMs."""
        by_kind = {
            kind: {CLOUDS[kind].vm_key(vm.cloud_id) for vm in vms if vm.state in LIVE_VM_STATES}
            for kind, vms in self.all_vms.items()
        }
        return {provider: by_kind.get(kind, set()) for provider, kind in self.kinds.items()}

    def _live_state(
        self, engine: Engine, progress: Progress, statuses: list[Any], phase: str, agents: int
    ) -> LiveState:
        assert self.supervisor is not None
        crashed = {c.name: f"crashed ({c.exit_code})" for c in self.supervisor.crashes()}
        return LiveState(
            elapsed_s=progress.elapsed_s,
            phase=phase,
            pools=statuses,
            api_calls=progress.samples[-1].api_calls if progress.samples else {},
            agents=agents + len(self.agents),
            preempted=0,
            processes={name: crashed.get(name, "running") for name in self.supervisor.processes},
            take_over=self._where(),
        )

    def _where(self) -> str:
        others = ", ".join(sorted(p for p in self.kinds if p != self.moved))
        if self.stage is Stage.LEGACY:
            return f"the legacy worker-manager serves every pool; {self.moved} moves next"
        if self.stage is Stage.STARTING:
            return f"wm's processes starting for {self.moved}"
        return (
            f"{self.moved} moved to wm at {self.moved_at_s:.0f} s; {others} served by the "
            f"legacy through wm's forwarding ({len(self.reads.comparisons)} answers compared)"
        )

    def _drained(self, progress: Progress, statuses: list[Any]) -> bool:
        live_vms = any(vm.state in LIVE_VM_STATES for vms in self.all_vms.values() for vm in vms)
        return self.stage is Stage.MOVED and not any_busy(statuses) and not live_vms

    # -- the end --------------------------------------------------------------------------------

    def _facts(self, engine: Engine, progress: Progress) -> RunFacts:
        facts = super()._facts(engine, progress)
        for kind, client in self.clouds.items():
            self.all_vms[kind] = client.instances()
        # Every VM left counts, whoever made it: the legacy's are the deployment's too.
        leaked = {
            kind: sum(1 for vm in vms if vm.state in LIVE_VM_STATES)
            for kind, vms in self.all_vms.items()
        }
        return replace(facts, leaked_vms=leaked)

    def _take_over_facts(self, engine: Engine, facts: RunFacts) -> TakeOverFacts:
        assert self.legacy is not None
        self._watch_agents()
        imported_pools = sorted(
            s.pool_id for s in pool_statuses(engine) if s.provider_id == self.moved
        )
        workers = list_workers(engine, limit=None)
        lives = []
        for key, agent in self.agents.items():
            n = (
                self.events_at_move.get(key, 0)
                if self.moved_at_s is not None
                else len(agent.events)
            )
            pool_id = agent.queue_worker_id.rsplit("/", 2)[0]
            lives.append(
                AgentLife(
                    key[0],
                    pool_id,
                    key[1],
                    agent.events[:n],
                    agent.events[n:],
                    tuple(agent.refusals),
                )
            )
        forwarded = Counter(
            name
            for name, client in self.legacy.manager.deployment.calls[self.calls_at_move :]
            if self.moved_at_s is not None and client not in (OBSERVER_CLIENT, ISSUER_CLIENT)
        )
        return TakeOverFacts(
            provider_id=self.moved,
            moved_at_s=self.moved_at_s,
            imported_pools=imported_pools,
            imported_workers=sum(1 for w in workers if imported_from(w.provider_data)),
            agents=lives,
            tasks_submitted=sum(facts.submitted.values()),
            tasks_completed=sum(1 for t in facts.tasks if t.state == "completed"),
            tasks_requeued=sum(1 for t in facts.tasks if t.requeued_at),
            capacity=self.capacity,
            max_capacity=self.max_capacity,
            leaked_vms=sum(facts.leaked_vms.values()),
            leaked_resources=sum(facts.leaked_resources.values()),
            forwarded=forwarded,
            comparisons=self.reads.comparisons,
            shed=self.reads.shed,
            import_runs=self.import_runs,
        )

    def _summarise(self, report: dict[str, Any]) -> None:
        t = report["take_over"]
        self.console.print(
            f"take-over of {t['provider']} at {t['moved_at_s']} s: imported {t['imported_pools']} "
            f"pools and {t['imported_workers']} workers ({t['moved_workers_running_through']} "
            f"running through the move, {t['moved_workers_reregistered_at_wm']} reregistered at "
            f"wm); refused at re-registration {t['imported_workers_refused']}, told to terminate "
            f"{t['imported_workers_told_to_terminate']}; tasks lost {t['tasks_lost']} of "
            f"{t['tasks_submitted']}; samples over a pool's max {t['capacity_samples_over_max']} "
            f"of {t['capacity_samples']}; leaked VMs {t['leaked_vms']}, resources "
            f"{t['leaked_resources']}; forwarded requests {t['forwarded_requests']}; answers "
            f"through the forwarding equal {t['forwarded_answers_equal']} of "
            f"{t['forwarded_answers_sampled']}",
            highlight=False,
        )
        super()._summarise(report)
