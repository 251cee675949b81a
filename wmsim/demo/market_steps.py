"""The demo's `--market` steps (a mixin of wmsim/demo/run.py's Demo, whose state it reads):
the demo's pools choosing by cost, the market's clock started with the workload once every wm
process runs, the live line of what is billed and where VMs run, and the facts the report's
market section is made from."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from wm.config import loader as config_module
from wm.config.loader import Config
from wm.db.pools import load_launch_configs
from wm.errors import WmError
from wm.kinds import KINDS
from wm.providers.base import TAG_LAUNCH_CONFIG, TAG_POOL
from wmsim.control import LIVE_VM_STATES, SimClient
from wmsim.demo import market as market_module
from wmsim.demo import market_report
from wmsim.demo import report as report_module
from wmsim.demo.interrupts import raise_if_stop_asked
from wmsim.demo.market_report import ConfigPlace, MarketFacts
from wmsim.demo.progress import Progress
from wmsim.demo.supervisor import (
    APPLY_POOLS,
    CLOUDS_PROCESS,
    RELEASE,
    START_TIMEOUT_S,
    Supervisor,
    read_toml,
)


class MarketSteps:
    scenario: Any
    pools: list[Any]
    effective_path: Path
    config: Config | None
    run_spec: Any
    clouds: dict[str, SimClient]
    market_speed: float
    market_started_at: float
    supervisor: Supervisor | None

    def _say(self, message: str) -> None: ...

    def _write_toml(self, data: Any) -> None: ...

    def _choose_by_cost(self) -> None:
        """--market: the demo's pools choose where to launch by cost (`[launch_choice]`)."""
        if self.scenario is None:
            return
        effective = read_toml(self.effective_path)
        pool_ids = [p.pool_id for p in self.pools if p.cloud in report_module.CLOUDS]
        effective["launch_choice"] = market_module.by_cost(
            effective.get("launch_choice", {}), pool_ids
        )
        self._write_toml(effective)
        self.config = config_module.load(
            self.effective_path, environ={"DATABASE_URL": self.run_spec.database_url}
        )
        self._say(f"launch choice: cost for {', '.join(pool_ids)}")

    def _start_market(self) -> None:
        """--market: start each cloud's market clock again as the workload starts, so the
        scripted dry spells fall where the demo's time says."""
        if self.scenario is None:
            return
        self._wait_for_children()
        demo = self.run_spec.demo
        for client in self.clouds.values():
            client.use_market(demo.market, seed=demo.market_seed, speed=self.market_speed)
        self.market_started_at = time.time()
        spells = market_module.dry_spells(self.scenario, self.market_speed)
        self._say(
            f"market {self.scenario.name} (seed {demo.market_seed}), "
            f"{self.market_speed:g} market seconds a second: "
            + "; ".join(f"{s.place} dry at {s.at_s:.0f} s for {s.for_s:.0f} s" for s in spells)
        )

    def _wait_for_children(self) -> None:
        """Until every wm process and per-provider child (provisioner-aws, ...) has logged
        `process-started`: on a busy machine they take seconds to import, and a dry spell set
        for a third of the way in must find wm launching already."""
        assert self.supervisor is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            raise_if_stop_asked()
            processes = self.supervisor.processes
            wm_processes = set(processes) - {CLOUDS_PROCESS, RELEASE, APPLY_POOLS}
            children = {
                e.get("child") for p in processes.values() for e in p.events("child-started")
            }
            started = {
                e.get("process") for p in processes.values() for e in p.events("process-started")
            }
            if wm_processes | children <= started:
                return
            if crashes := self.supervisor.crashes():
                raise WmError(
                    f"{crashes[0].name} exited ({crashes[0].exit_code}):\n{crashes[0].tail}"
                )
            time.sleep(0.2)
        raise WmError(f"wm's processes did not all start within {START_TIMEOUT_S:g}s")

    def _market_line(self, progress: Progress) -> str:
        """--market: what the clouds billed so far, where the live VMs run (launch config),
        and which places are dry now."""
        if self.scenario is None:
            return ""
        # GCE labels hold the pool id escaped (no "/"): read back by its letters and digits.
        pools = {_letters(p.pool_id): p.pool_id for p in self.pools}
        where: dict[str, int] = {}
        for vms in progress.vms.values():
            for vm in vms:
                if vm.state in LIVE_VM_STATES:
                    tag = vm.tags.get(TAG_POOL, "?")
                    pool = pools.get(_letters(tag), tag)
                    config = f"{pool}/{vm.tags.get(TAG_LAUNCH_CONFIG, '?')}"
                    where[config] = where.get(config, 0) + 1
        t = time.time() - self.market_started_at
        dry = [
            f"{s.place} since {s.at_s:.0f} s"
            for s in market_module.dry_spells(self.scenario, self.market_speed)
            if s.at_s <= t < s.at_s + s.for_s
        ]
        return (
            f"billed ${market_report.total_cost(progress.ledgers):.2f}; VMs "
            + (", ".join(f"{c} {n}" for c, n in sorted(where.items())) or "none")
            + (f"; dry: {', '.join(dry)}" if dry else "")
        )

    def _market_facts(self, engine: Engine) -> MarketFacts | None:
        """--market: the clouds' ledgers, where each launch config launches, and wm's
        `launch-choice` and `offering-bench` lines."""
        if self.scenario is None or self.supervisor is None:
            return None
        kinds = {p.pool_id: p.cloud for p in self.pools}
        configs = []
        for lc in load_launch_configs(engine, pool_ids=sorted(kinds)):
            kind = kinds.get(lc.pool_id, "")
            offering = KINDS[kind].offering(lc.configuration, lc.region) if kind in KINDS else None
            if offering is not None:
                configs.append(
                    ConfigPlace(
                        lc.pool_id,
                        lc.launch_config_id,
                        market_module.place(kind, offering.region, offering.zone),
                        offering.key,
                    )
                )
        processes = list(self.supervisor.processes.values())
        return MarketFacts(
            scenario=self.scenario.name,
            seed=self.run_spec.demo.market_seed,
            speed=self.market_speed,
            started_at=self.market_started_at,
            bucket_s=market_module.bucket_s(self.run_spec.demo),
            ledgers={kind: client.ledger() for kind, client in self.clouds.items()},
            spells=market_module.dry_spells(self.scenario, self.market_speed),
            configs=configs,
            choices=[line for p in processes for line in p.events("launch-choice")],
            benches=[line for p in processes for line in p.events("offering-bench")],
        )


def _letters(value: str) -> str:
    return "".join(c for c in value.lower() if c.isalnum())
