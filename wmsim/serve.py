"""Start the simulated clouds from the config's [sim] section (for `wmsim serve`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmsim.cloud import RunningSim
from wmsim.clouds import CLOUDS, sim_cloud
from wmsim.config import SimConfig
from wmsim.market_sim import MarketSettings


@dataclass(frozen=True)
class SimEndpoint:
    kind: str
    endpoint: str
    cert_path: str | None  # the PEM to trust, for clouds served over https
    identity_trust_path: str | None = None  # what verifies its workers' identity proofs

    def provider_settings(self) -> dict[str, Any]:
        """The config keys that point a provider of this kind at this simulated cloud."""
        settings = sim_cloud(self.kind).provider_settings(
            self.endpoint, self.cert_path, self.identity_trust_path
        )
        return {key: value for key, value in settings.items() if value is not None}


def start_all(sim: SimConfig, kinds: tuple[str, ...] = tuple(CLOUDS)) -> list[RunningSim]:
    state_dir = Path(sim.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    started: list[RunningSim] = []
    market = None
    if sim.market is not None:
        market = MarketSettings(sim.market, sim.market_seed, sim.market_speed)
    try:
        for kind in kinds:
            running = sim_cloud(kind).serve(getattr(sim, kind), state_dir)
            started.append(running)
            if market is not None:
                running.use_market(market, initial=True)
    except BaseException:
        for running in started:
            running.stop()
        raise
    return started


def describe(kinds: tuple[str, ...], sims: list[Any]) -> list[SimEndpoint]:
    return [
        SimEndpoint(
            kind,
            sim.endpoint,
            str(getattr(sim, "cert_path", "") or "") or None,
            str(sim.identity_trust_path),
        )
        for kind, sim in zip(kinds, sims, strict=True)
    ]
