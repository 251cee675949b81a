"""Start all three simulated clouds from the config's [sim] section (for `wmsim serve`)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from wmsim.config import SimConfig

# cloud kind -> module with `serve(config: SimCloudConfig, state_dir: Path) -> sim`
SIM_MODULES = {"aws": "wmsim.aws.ec2", "gcp": "wmsim.gcp.gce", "azure": "wmsim.azure.arm"}


class RunningSim(Protocol):
    endpoint: str

    def stop(self) -> None: ...


@dataclass(frozen=True)
class SimEndpoint:
    kind: str
    endpoint: str
    cert_path: str | None  # the PEM to trust, for clouds served over https
    identity_trust_path: str | None = None  # what verifies its workers' identity proofs

    def provider_settings(self) -> dict[str, Any]:
        """The config keys that point a provider of this kind at this simulated cloud."""
        settings: dict[str, Any] = {"endpoint": self.endpoint, "credentials": "simulated"}
        trust = self.identity_trust_path
        match self.kind:
            case "aws":
                settings["identity_certificate"] = trust
            case "gcp":
                settings["identity_jwks"] = trust
            case "azure":
                settings |= {
                    "ca_bundle": self.cert_path,
                    "authority": self.endpoint,
                    "identity_roots": [trust],
                }
        return {key: value for key, value in settings.items() if value is not None}


def start_all(sim: SimConfig, kinds: tuple[str, ...] = tuple(SIM_MODULES)) -> list[Any]:
    state_dir = Path(sim.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    started = []
    try:
        for kind in kinds:
            module = importlib.import_module(SIM_MODULES[kind])
            started.append(module.serve(getattr(sim, kind), state_dir))
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
