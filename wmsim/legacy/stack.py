"""A whole legacy deployment in one object: the stand-in's HTTP service, its provisioner and
worker scanner, and its fleet of simulated workers, on the simulated clouds and wm's Postgres
(whose builtin queue stands in for the Taskcluster queue of both services)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from wmsim.agent import AgentSettings
from wmsim.legacy.auth import PermanentClient
from wmsim.legacy.fleet import LegacyFleet
from wmsim.legacy.manager import LegacyWorkerManager
from wmsim.legacy.provisioner import LegacyProvider, LegacyProvisioner


@dataclass
class LegacyStack:
    manager: LegacyWorkerManager
    provisioner: LegacyProvisioner
    fleet: LegacyFleet

    @classmethod
    def create(
        cls,
        *,
        engine: Engine,
        providers: Sequence[LegacyProvider],
        issuer_client_id: str,
        issuer_access_token: str,
        root_url: str | None = None,
        clients: Mapping[str, PermanentClient] | None = None,
        issuer_scopes: Sequence[str] | None = None,
        pools: Sequence[Mapping[str, object]] = (),
        agent_settings: AgentSettings | None = None,
        interval_s: float = 0.3,
    ) -> LegacyStack:
        """Serve and load `pools`; the loops are not running yet (`run()`: so that an ingress
        can be pointed at `manager.base_url` first). `root_url`: what the VMs are told (the
        ingress routing `<rootUrl>/api/worker-manager/`); None: the stand-in's own address."""
        manager = LegacyWorkerManager(
            root_url,
            issuer_client_id,
            issuer_access_token,
            providers={p.provider_id: p.provider_type for p in providers},
            clients=clients,
            issuer_scopes=issuer_scopes,
        )
        manager.start()
        manager.load_pools(pools)  # type: ignore[arg-type]
        provisioner = LegacyProvisioner(manager, engine, providers, interval_s=interval_s)
        fleet = LegacyFleet(
            manager, engine, providers, agent_settings or AgentSettings(), interval_s=interval_s
        )
        return cls(manager, provisioner, fleet)

    @classmethod
    def start(cls, **options: Any) -> LegacyStack:
        """`create(**options)` and `run()`."""
        stack = cls.create(**options)
        stack.run()
        return stack

    def run(self) -> LegacyStack:
        """Start the provisioner and scanner loop and the fleet's."""
        self.provisioner.start()
        self.fleet.start()
        return self

    def stop(self) -> None:
        """Stop the loops and the agents, then the service (VMs are left as they are)."""
        self.provisioner.stop()
        self.fleet.stop()
        self.manager.stop()

    def __enter__(self) -> LegacyStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
