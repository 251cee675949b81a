"""`wmsim demo`: every Procfile process against the simulated clouds, a workload, a report.

The steps, each a method: write an effective config (the user's, with the simulated clouds on
free ports, the web process and the processes' metrics ports on free ports); start the
clouds (`wmsim serve`, a process of its own); run the Procfile's release phase, then every
other Procfile process, as separate OS processes; drive the workload into the builtin queue
while simulated workers boot on the VMs the clouds run (each reads its boot data from its VM's
metadata service, registers through the web process's worker-manager API with the real
taskcluster client, runs tasks, and removes itself when idle), and the static pools' hand-made
machines join (wmsim/demo/rack.py: createWorker, worker-runner's static path; retired with
removeWorker once their pool's work is done); sample the pools and the clouds every
`sample_s`; after the workload, wait for the fleet to drain; stop everything; write
report.json and report.png. Healthy means every task ran, no process crashed, and no VM or
live worker row was left at the end.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import sys
import time
import tomllib
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
import yaml
from rich.console import Console
from sqlalchemy import Engine

from wm.api.authn import OPERATOR_CLIENT
from wm.config import loader as config_module
from wm.config.loader import Config
from wm.db import tasks as task_store
from wm.db.engine import make_engine
from wm.db.pools import pool_statuses
from wm.db.workers import list_workers
from wm.errors import WmError
from wm.model import WorkerState
from wm.ops.metrics_ports import METRICS_PORTS
from wm.ops.telemetry import JsonLineFormatter
from wm.pools.definition import parse_definition_documents
from wm.providers.base import TAG_DEPLOYMENT
from wmsim.agent import AgentSettings
from wmsim.clouds import CLOUDS
from wmsim.config import NO_METADATA_PROBES, DemoConfig, child_environment
from wmsim.control import LIVE_VM_STATES, SimClient
from wmsim.demo import market as market_module
from wmsim.demo import market_report
from wmsim.demo import report as report_module
from wmsim.demo.interrupts import raise_if_stop_asked
from wmsim.demo.live import LiveState, LiveView, PoolRow
from wmsim.demo.market_steps import MarketSteps
from wmsim.demo.plot import write_png
from wmsim.demo.progress import Progress, any_busy
from wmsim.demo.rack import Rack, StaticPool
from wmsim.demo.report import RunFacts, ScanSample
from wmsim.demo.supervisor import (
    APPLY_POOLS,
    CLOUDS_PROCESS,
    RELEASE,
    START_TIMEOUT_S,
    Supervisor,
    read_procfile,
    read_toml,
)
from wmsim.demo.workload import Arrival, PoolShare, schedule
from wmsim.fleet import Fleet, vm_provider
from wmsim.hand_made import KIND as HAND_MADE
from wmsim.market.scenario import load as load_scenario
from wmsim.postgres import free_port, free_port_range
from wmsim.serve import SimEndpoint

AGENT_POLL_S = 1.0  # simulated workers look for tasks this often when they have room
AGENT_SHOULD_TERMINATE_EVERY_S = 5.0
DEMO_DB_POOL_SIZE = 10
# The service account the simulated GCE workers run as (their identity tokens' subject).


@dataclass(frozen=True)
class DemoRun:
    """What one `wmsim demo` was asked to do."""

    config_path: Path  # the user's config
    procfile: Path
    database_url: str
    out_dir: Path
    demo: DemoConfig  # the config's [demo] section with the command line's overrides
    live: bool  # redraw a table in place (a terminal) or print progress lines
    # Taskcluster worker pool definitions (JSON or YAML) the demo applies, as an operator would.
    pool_files: tuple[Path, ...] = ()


class Demo(MarketSteps):
    def __init__(self, run: DemoRun, console: Console) -> None:
        self.run_spec = run
        self.console = console
        self.logs = run.out_dir / "logs"
        self.effective_path = run.out_dir / "config.toml"
        self.supervisor: Supervisor | None = None
        self.config: Config | None = None
        self.clouds: dict[str, SimClient] = {}
        self.root_url = ""  # where the web process serves <root_url>/api/worker-manager/v1/
        self.web_url = ""  # the web process's own address (the root URL, unless an ingress)
        self.pools: list[PoolShare] = []  # the applied definitions' pools
        self.static_pools: list[StaticPool] = []  # those of hand-made machines
        self.operator_token = secrets.token_urlsafe(24)  # the web process's WM_OPERATOR_TOKEN
        self.rack: Rack | None = None
        self.metrics_port = 0  # the first of the provisioner's and scanners' metrics ports
        # --market: the scenario the clouds obey, on a clock this many times real time.
        self.scenario = load_scenario(run.demo.market) if run.demo.market else None
        self.market_speed = (
            market_module.market_speed(run.demo, self.scenario) if self.scenario else 1.0
        )
        self.market_started_at = 0.0  # epoch seconds: when the market's clock began

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> int:
        """Run the whole demo; return 0 when it was healthy, 1 otherwise."""
        spec = self.run_spec
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        entries = read_procfile(spec.procfile)
        raw = tomllib.loads(spec.config_path.read_text())
        web_port = free_port()
        self.metrics_port = free_port_range(METRICS_PORTS)
        self.root_url = self.web_url = f"http://127.0.0.1:{web_port}"
        self.supervisor = Supervisor(entries, self._environment(web_port), self.logs, Path.cwd())
        with contextlib.ExitStack() as stack:
            stack.enter_context(own_log(self.logs / "demo.log"))
            stack.callback(self.supervisor.stop)
            endpoints = self._start_clouds(raw)
            self.config = self._write_config(raw, endpoints, web_port)
            self._say(f"clouds: {', '.join(f'{e.kind} {e.endpoint}' for e in endpoints)}")
            self._say("release phase: " + self.supervisor.entry(RELEASE).command)
            self.supervisor.run_once(RELEASE)
            definitions = self._write_definitions()
            self._choose_by_cost()
            self._say(f"pools: wm pools apply {definitions}")
            self.supervisor.run_once(APPLY_POOLS, f"wm pools apply {definitions}")
            for entry in entries:
                if entry.name != RELEASE:
                    self.supervisor.start(entry.name)
            self._say("processes: " + ", ".join(e.name for e in entries if e.name != RELEASE))
            self._say(
                f"metrics: {self.web_url}/metrics (web), provisioner and scanners on ports "
                f"from {self.metrics_port} (README: Metrics)"
            )
            self._wait_for_web()
            engine = make_engine(
                spec.database_url, application_name="wm-demo", pool_size=DEMO_DB_POOL_SIZE
            )
            stack.callback(engine.dispose)
            self._start_market()
            progress = Progress()
            fleet = self._fleet(engine, progress)
            stack.callback(fleet.halt)
            self.rack = self._rack(engine)
            stack.callback(self.rack.halt)
            self._drive(engine, fleet, progress)
            facts = self._facts(engine, progress)
        report = report_module.build(facts)
        self._write_report(report)
        self._summarise(report)
        return 0 if report["healthy"] else 1

    def _drive(self, engine: Engine, fleet: Fleet, progress: Progress) -> None:
        """Submit the workload, boot workers, sample, until drained or out of time."""
        assert self.config is not None
        demo = self.run_spec.demo
        arrivals = schedule(self._pool_shares(), demo)
        workload_s = demo.minutes * 60
        next_arrival = 0
        with LiveView(self.console, live=self.run_spec.live) as view:
            while True:
                raise_if_stop_asked()
                tick = time.monotonic()
                elapsed = progress.elapsed_s
                while next_arrival < len(arrivals) and arrivals[next_arrival].at_s <= elapsed:
                    self._submit(engine, arrivals[next_arrival], progress)
                    next_arrival += 1
                self._step(engine, progress)
                statuses = self._sample(engine, progress)
                fleet.sync()
                phase = "workload" if elapsed < workload_s else "draining"
                if phase == "draining" and next_arrival == len(arrivals):
                    self._retire_rack_when_done(statuses)
                view.update(self._live_state(engine, progress, statuses, phase, len(fleet.agents)))
                if self.supervisor and self.supervisor.crashes():
                    self._say("a process crashed: stopping the run")
                    return
                if phase == "draining" and next_arrival == len(arrivals):
                    if self._drained(progress, statuses):
                        progress.drained = True
                        return
                    if elapsed > workload_s + demo.drain_timeout_s:
                        self._say(f"not drained {demo.drain_timeout_s:g}s after the workload")
                        return
                time.sleep(max(0.0, demo.sample_s - (time.monotonic() - tick)))

    def _step(self, engine: Engine, progress: Progress) -> None:
        """What a variant of the demo does at each tick besides the workload (the take-over's
        move); nothing here."""

    # -- set-up --------------------------------------------------------------------------------

    def _environment(self, web_port: int) -> dict[str, str]:
        overrides = {
            "DATABASE_URL": self.run_spec.database_url,
            "WM_CONFIG": str(self.effective_path.resolve()),
            "PORT": str(web_port),
            "WM_OPERATOR_TOKEN": self.operator_token,
            "PYTHONUNBUFFERED": "1",
            **NO_METADATA_PROBES,
        }
        return child_environment(overrides, prepend_path=str(Path(sys.executable).parent))

    def _start_clouds(self, raw: dict[str, Any]) -> list[SimEndpoint]:
        """`wmsim serve` on free ports, in a process of its own; wait for its endpoints."""
        assert self.supervisor is not None
        sim = dict(raw.get("sim", {}))
        demo = self.run_spec.demo
        spot = (
            {"preempt_share": demo.preempt_share, "preempt_within_s": demo.preempt_within_s}
            if demo.preempt_share > 0
            else {}
        )
        for kind in report_module.CLOUDS:
            sim[kind] = {**sim.get(kind, {}), **spot, "port": 0}
        if self.scenario is not None:
            # From the start, so the signals wm reads first are the market's; the clock
            # starts again with the workload (_start_market).
            sim |= {
                "market": demo.market,
                "market_seed": demo.market_seed,
                "market_speed": self.market_speed,
            }
        sim["state_dir"] = str((self.run_spec.out_dir / "sim").resolve())
        self._write_toml({**raw, "sim": sim})
        endpoints_file = self.run_spec.out_dir / "endpoints.json"
        endpoints_file.unlink(missing_ok=True)
        process = self.supervisor.start(
            CLOUDS_PROCESS, f"wmsim serve --endpoints-file {endpoints_file}"
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not endpoints_file.exists():
            raise_if_stop_asked()
            if process.popen.poll() is not None or time.monotonic() > deadline:
                raise WmError(f"the simulated clouds did not start:\n{process.tail()}")
            time.sleep(0.1)
        endpoints = [SimEndpoint(**e) for e in json.loads(endpoints_file.read_text())]
        self.clouds = {e.kind: SimClient(e.kind, e.endpoint, e.cert_path) for e in endpoints}
        return endpoints

    def _write_config(
        self, raw: dict[str, Any], endpoints: list[SimEndpoint], web_port: int
    ) -> Config:
        """The user's config pointed at this run's clouds and web port; validated."""
        by_kind = {e.kind: e for e in endpoints}
        providers = []
        for provider in raw.get("providers", []):
            if provider.get("kind") == HAND_MADE:
                providers.append(provider)  # no cloud to point it at: its machines are made
                continue
            endpoint = by_kind.get(provider.get("kind"))
            if endpoint is None:
                raise WmError(f"provider {provider.get('id')!r}: no simulated cloud of its kind")
            providers.append({**provider, **endpoint.provider_settings()})
        effective = {
            **read_toml(self.effective_path),
            "providers": providers,
            "web": {**raw.get("web", {}), "port": web_port},
            # Each process type on a port of its own from there (procs/ports.py): free ports,
            # as a deployment or another demo on this machine may hold the usual ones.
            "metrics": {**raw.get("metrics", {}), "port": self.metrics_port},
            # TOML has no null: an unset demo.market is left out.
            "demo": self.run_spec.demo.model_dump(mode="json", exclude_none=True),
        }
        effective["root_url"] = self.root_url
        self._write_toml(effective)
        return config_module.load(
            self.effective_path, environ={"DATABASE_URL": self.run_spec.database_url}
        )

    def _write_toml(self, data: Mapping[str, Any]) -> None:
        self.effective_path.write_text(
            "# Written by `wmsim demo` for this run: the config it was given, pointed at the\n"
            "# simulated clouds and the web process it started.\n" + tomli_w.dumps(dict(data))
        )

    def _wait_for_web(self) -> None:
        assert self.config is not None and self.supervisor is not None
        url = self.web_url + "/healthz"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            raise_if_stop_asked()
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
            if crashes := self.supervisor.crashes():
                raise WmError(
                    f"{crashes[0].name} exited ({crashes[0].exit_code}):\n{crashes[0].tail}"
                )
            time.sleep(0.2)
        raise WmError(f"the web process did not answer {url} within {START_TIMEOUT_S:g}s")

    def _fleet(self, engine: Engine, progress: Progress) -> Fleet:
        assert self.config is not None
        kinds = {p.id: p.kind for p in self.config.providers}

        def running_vms() -> dict[str, set[str]]:
            # Each provider's own: two providers of one kind may share a simulated cloud.
            return {
                provider_id: {
                    vm.cloud_id
                    for vm in progress.vms.get(kind, [])
                    if vm.state == "running" and vm_provider(kind, vm.tags) == provider_id
                }
                for provider_id, kind in kinds.items()
            }

        settings = AgentSettings(
            idle_timeout_s=self.run_spec.demo.idle_timeout_s,
            should_terminate_every_s=AGENT_SHOULD_TERMINATE_EVERY_S,
            poll_s=AGENT_POLL_S,
        )
        return Fleet(self.config, engine, settings, running_vms=running_vms)

    def _rack(self, engine: Engine) -> Rack:
        """The static pools' hand-made machines, made with createWorker by the operator and
        started with worker-runner's static provider."""
        settings = AgentSettings(
            should_terminate_every_s=AGENT_SHOULD_TERMINATE_EVERY_S, poll_s=AGENT_POLL_S
        )
        rack = Rack(
            root_url=self.root_url,
            operator={"clientId": OPERATOR_CLIENT, "accessToken": self.operator_token},
            out_dir=self.run_spec.out_dir,
            settings=settings,
        )
        for pool in self.static_pools:
            machines = rack.join(engine, pool)
            self._say(
                f"hand-made machines in {pool.pool_id}: "
                + ", ".join(f"{m.worker_group}/{m.worker_id}" for m in machines)
            )
        return rack

    def _retire_rack_when_done(self, statuses: list[Any]) -> None:
        """Once the workload is in and the static pools have no task left, the operator
        retires their machines (removeWorker): a rack stays otherwise, and the run ends with
        every worker stopped."""
        if self.rack is None or self.rack.retired:
            return
        static = {p.pool_id for p in self.static_pools}
        if any(s.pending or s.claimed for s in statuses if s.pool_id in static):
            return
        self.rack.retire()
        self._say("hand-made machines retired (removeWorker)")

    def _pool_shares(self) -> list[PoolShare]:
        return list(self.pools)

    def _write_definitions(self) -> Path:
        """The run's pool definitions in one file: the given ones, on spot VMs where the run
        pre-empts. Remembers each pool's cloud and max capacity for the workload."""
        assert self.config is not None
        kinds = self.config.provider_kinds()
        spot = self.run_spec.demo.preempt_share > 0 or self.scenario is not None
        documents: list[dict[str, Any]] = []
        for path in self.run_spec.pool_files:
            for pool_id, body in parse_definition_documents(path.read_text(), str(path)):
                kind = kinds.get(body.get("providerId", ""), "")
                config = dict(body.get("config", {}))
                cloud = CLOUDS.get(kind)
                if cloud is not None:
                    cloud.publish_for(self.clouds[kind], config.get("launchConfigs", []))
                if spot and cloud is not None:
                    config["launchConfigs"] = [
                        cloud.on_spot(lc) for lc in config.get("launchConfigs", [])
                    ]
                documents.append({"workerPoolId": pool_id, **body, "config": config})
                capacity = int(config.get("maxCapacity", 0))
                if kind == HAND_MADE:
                    demo = self.run_spec.demo
                    static = StaticPool(
                        pool_id,
                        body["providerId"],
                        demo.hand_made_machines,
                        demo.hand_made_capacity,
                    )
                    self.static_pools.append(static)
                    capacity = static.machines * static.capacity
                if kind:
                    self.pools.append(PoolShare(pool_id, kind, capacity))
        if not documents:
            raise WmError("no worker pool definitions to apply: give --pools FILE")
        path = self.run_spec.out_dir / "pools.yml"
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return path

    # -- while it runs -------------------------------------------------------------------------

    def _submit(self, engine: Engine, arrival: Arrival, progress: Progress) -> None:
        task_store.submit_tasks(engine, arrival.pool_id, arrival.count, arrival.duration_s)
        progress.submitted[arrival.pool_id] = (
            progress.submitted.get(arrival.pool_id, 0) + arrival.count
        )

    def _sample(self, engine: Engine, progress: Progress) -> list[Any]:
        statuses = pool_statuses(engine)
        calls = {}
        for kind, client in self.clouds.items():
            progress.vms[kind] = self._own(client.instances())
            calls[kind] = sum(client.request_counts().values())
            if self.scenario is not None:
                progress.ledgers[kind] = client.ledger()
        progress.record(statuses, calls)
        return statuses

    def _own(self, vms: list[Any]) -> list[Any]:
        assert self.config is not None
        return [vm for vm in vms if vm.tags.get(TAG_DEPLOYMENT) == self.config.deployment_id]

    def _live_state(
        self, engine: Engine, progress: Progress, statuses: list[Any], phase: str, agents: int
    ) -> LiveState:
        assert self.config is not None and self.supervisor is not None
        done = task_store.count_by_state(engine)
        clouds = self._pool_clouds()
        crashed = {c.name: f"crashed ({c.exit_code})" for c in self.supervisor.crashes()}
        return LiveState(
            elapsed_s=progress.elapsed_s,
            phase=phase,
            pools=[
                PoolRow(
                    s.pool_id,
                    clouds.get(s.pool_id, "-"),
                    s.pending,
                    s.claimed,
                    s.requested,
                    s.running,
                    s.stopping,
                    done.get((s.pool_id, "completed"), 0),
                    s.errors_last_hour,
                )
                for s in statuses
            ],
            api_calls=progress.samples[-1].api_calls if progress.samples else {},
            agents=agents,
            hand_made=len(self.rack.machines) if self.rack else 0,
            hand_made_registered=self.rack.registered() if self.rack else 0,
            preempted=sum(
                len(p.events("worker-preempted")) for p in self.supervisor.processes.values()
            ),
            processes={name: crashed.get(name, "running") for name in self.supervisor.processes},
            market=self._market_line(progress),
        )

    def _drained(self, progress: Progress, statuses: list[Any]) -> bool:
        live_vms = any(vm.state in LIVE_VM_STATES for vms in progress.vms.values() for vm in vms)
        return not any_busy(statuses) and not live_vms

    def _pool_clouds(self) -> dict[str, str]:
        return {p.pool_id: p.cloud for p in self.pools}

    # -- the end -------------------------------------------------------------------------------

    def _facts(self, engine: Engine, progress: Progress) -> RunFacts:
        """Read what the report needs before the clouds and the processes are stopped."""
        assert self.config is not None and self.supervisor is not None
        kinds = {p.id: p.kind for p in self.config.providers}
        scans = [
            ScanSample(
                cloud=kinds.get(line["provider"], ""),
                provider=line["provider"],
                region=line["region"],
                api_calls=int(line["api_calls"]),
                duration_s=float(line["duration_s"]),
            )
            for process in self.supervisor.processes.values()
            for line in process.events("scan")
        ]
        for kind, client in self.clouds.items():
            progress.vms[kind] = self._own(client.instances())
        workers = list_workers(engine, limit=None)
        live_rows: dict[str, int] = {}
        for worker in workers:
            if worker.state != WorkerState.STOPPED:
                kind = kinds.get(worker.provider_id, "")
                live_rows[kind] = live_rows.get(kind, 0) + 1
        return RunFacts(
            pool_clouds=self._pool_clouds(),
            samples=progress.samples,
            tasks=task_store.list_tasks(engine, limit=None),
            workers=workers,
            scans=scans,
            leaked_vms={
                kind: sum(1 for vm in vms if vm.state in LIVE_VM_STATES)
                for kind, vms in progress.vms.items()
            },
            leaked_resources=self._leftover_resources(),
            live_rows=live_rows,
            crashed={c.name: _cloud_of(c.name) for c in self.supervisor.crashes()},
            submitted=dict(progress.submitted),
            drained=progress.drained,
            market=self._market_facts(engine),
        )

    def _leftover_resources(self) -> dict[str, int]:
        """Resources besides VMs still held by the clouds that count them (Azure: NICs, public
        IPs and disks): what a deployment made must go with its worker."""
        return {
            kind: leftovers(client)
            for kind, client in self.clouds.items()
            if (leftovers := CLOUDS[kind].leftovers) is not None
        }

    def _write_report(self, report: dict[str, Any]) -> None:
        out = self.run_spec.out_dir
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        write_png(report, out / "report.png")

    def _summarise(self, report: dict[str, Any]) -> None:
        from rich.table import Table

        table = Table(title="wm demo: summary")
        table.add_column("figure")
        columns = dict(report["clouds"])
        machines = report["hand_made"]["machines"]
        if machines:
            columns[HAND_MADE] = report["hand_made"]["figures"]
        for column in ("run", *columns):
            table.add_column(column, justify="right")
        for name, value in report["run"].items():
            row = [value, *(columns[c][name] for c in columns)]
            table.add_row(name, *("-" if v is None else f"{v:g}" for v in row))
        self.console.print(table)
        for m in machines:
            self.console.print(
                f"hand-made {m['workerPoolId']} {m['workerGroup']}/{m['workerId']}: "
                f"{'registered' if m['registered'] else 'never registered'}, "
                f"{m['tasks_completed']} tasks, {m['state']}",
                highlight=False,
            )
        if "market" in report:
            for line in market_report.summary(report["market"]):
                self.console.print(line, highlight=False)
        out = self.run_spec.out_dir
        self.console.print(f"report: {out}/report.json, {out}/report.png; logs: {self.logs}")
        if report["healthy"]:
            self.console.print(
                "[green]healthy[/green]: every task ran, nothing crashed, "
                "nothing was left in the clouds"
            )
        else:
            for problem in report["problems"]:
                self.console.print(f"[red]unhealthy[/red]: {problem}")

    def _say(self, message: str) -> None:
        self.console.print(f"== {message}", highlight=False)


def _cloud_of(process_name: str) -> str:
    """The cloud a Procfile process serves (scanner-aws -> aws), or "" for all of them."""
    return next((kind for kind in report_module.CLOUDS if process_name.endswith(kind)), "")


@contextlib.contextmanager
def own_log(path: Path, names: tuple[str, ...] = ("wm",)) -> Iterator[None]:
    """The demo process's own log lines (its simulated workers', and those of the loggers
    named) go to a file, not the screen."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="a")
    handler.setFormatter(JsonLineFormatter())
    loggers = [logging.getLogger(name) for name in names]
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.handlers[:] = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
    try:
        yield
    finally:
        handler.close()
        for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate
