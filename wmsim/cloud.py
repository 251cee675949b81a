"""What the rest of wmsim uses of one simulated cloud: its `[sim.<kind>]` settings, and the
`SimCloud` each cloud subpackage (wmsim/aws, wmsim/gcp, wmsim/azure) describes itself by.

`wmsim serve`, the fleet, the control client and the demo reach a cloud only through its
SimCloud, found by wm's kind name in the one table (wmsim/clouds.py), never by comparing kind
names: a fourth cloud's simulator is its subpackage plus an entry in that table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field

from wm.config.base import Frozen

if TYPE_CHECKING:
    from wmsim.bootdata import CloudMetadata
    from wmsim.signals import SignalValues


class SimCloudConfig(Frozen):
    """Behaviour of one simulated cloud: a `[sim.aws]`, `[sim.gcp]` or `[sim.azure]` table."""

    port: int = Field(0, ge=0, le=65535)  # 0: any free port
    latency_ms: float = Field(0.0, ge=0)  # mean per-call latency
    latency_jitter_ms: float = Field(0.0, ge=0)
    boot_s: float = Field(0.0, ge=0)  # created to running
    delete_s: float = Field(0.0, ge=0)  # delete issued to gone
    failure_rate: float = Field(0.0, ge=0, le=1)  # share of calls answered with a 5xx
    fault_spread: Literal["random", "even"] = "random"  # even: rates exact, runs repeatable
    preempt_share: float = Field(0.0, ge=0, le=1)  # share of spot VMs pre-empted / evicted
    preempt_within_s: float = Field(60.0, ge=0)  # ... at a uniform moment this long after boot
    throttle_rate: float = Field(0.0, ge=0, le=1)  # share answered with the cloud's throttle
    quota_instances: int | None = Field(None, ge=0)  # more live instances than this: quota error
    page_size_max: int | None = Field(None, ge=1)  # cap on list page size
    # The create-rate bucket in VMs (EC2: 1,000 then 2/s); unset: creates are not rate-limited.
    create_burst: int | None = Field(None, ge=1)
    create_per_s: float = Field(0.0, ge=0)


class RunningSim(Protocol):
    """A simulated cloud `wmsim serve` started."""

    endpoint: str
    signals: SignalValues  # what its signal APIs serve (wmsim/signals.py)

    def stop(self) -> None: ...

    # Obey a market scenario (a wmsim.market_sim.MarketSettings, or None for none); `initial`:
    # also after a reset.
    def use_market(self, settings: Any, *, initial: bool = False) -> None: ...


class SimControl(Protocol):
    """A running sim's `/_sim/` control endpoints (wmsim/control.py's SimClient)."""

    def control(self, path: str, body: Any) -> Any: ...

    def resources(self) -> list[str]: ...


@dataclass(frozen=True)
class LegacyLaunch:
    """What Taskcluster's worker-manager knows when its provisioner makes one VM of a pool
    (its provider's `provision`): the launchers of wmsim/<kind>/legacy.py make it exactly as
    worker-manager does, with its tags, labels, names and boot data, so that wm's adoption is
    tested against what a live deployment really holds."""

    # The cloud account, as wm's provider config keys for this sim name it: what
    # SimCloud.provider_settings gives (endpoint, ca_bundle...), plus `project` (GCE) or
    # `subscription_id` and `resource_group` (Azure), and GCE's
    # `worker_service_account_email`.
    settings: Mapping[str, Any]
    provider_id: str  # worker-manager's providerId
    root_url: str  # the deployment's rootUrl
    pool_id: str
    owner: str  # the pool definition's owner
    launch_config_id: str
    launch_config: Mapping[str, Any]  # Taskcluster's launch config, as in the pool definition
    description: str = ""  # the pool definition's (GCE: an instance without one gets it)


@dataclass(frozen=True)
class LegacyVm:
    """One VM worker-manager made: what it records on its worker row."""

    worker_id: str  # EC2 instance id, GCE numeric instance id (op.targetId), Azure VM name
    worker_group: str  # EC2 region, GCE zone, Azure location
    capacity: int
    # worker-manager's providerData for the row (names of what it made, where it is).
    provider_data: Mapping[str, Any]


def imported_when_called(target: str) -> Callable[..., Any]:
    """The function `module:name`, imported at its first call: a cloud's SimCloud names its
    simulator and launchers this way, so that reading the table of clouds does not import
    them (they pull in moto and the clouds' SDKs)."""
    module_name, _, name = target.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module_name), name)(*args, **kwargs)

    return call


def _same(value: str) -> str:
    return value


def _publish_nothing(client: SimControl, launch_configs: list[Any]) -> None:
    return None


@dataclass(frozen=True)
class SimCloud:
    """One simulated cloud, as the rest of wmsim uses it."""

    kind: str  # wm's kind name: aws, gcp, azure
    # Start it on the table's port, keeping its certificates and trust files in the directory.
    serve: Callable[[SimCloudConfig, Path], RunningSim]
    # wm's provider config keys that point a provider of this kind at the sim: from its
    # endpoint, the PEM to trust (https sims) and the file verifying its identity proofs.
    provider_settings: Callable[[str, str | None, str | None], dict[str, Any]]
    # A VM's metadata reader, as worker-runner's provider of this cloud reads it: from the
    # VM's metadata base URL and the PEM to trust.
    metadata_reader: Callable[[str, str | None], CloudMetadata]
    # A launch config of this cloud moved onto its spot VMs, in its own parameters.
    on_spot: Callable[[Mapping[str, Any]], dict[str, Any]]
    colour: str  # the demo's plot
    # The demo's share of the work for this cloud (the production mix), split over its pools.
    demo_share: float
    # How the sim addresses a VM's metadata, from wm's cloud id: the workerId worker-runner
    # reports there.
    vm_key: Callable[[str], str] = _same
    # wm's provider id from a VM's provider tag as the cloud shows it (GCE escapes labels).
    provider_tag: Callable[[str], str] = _same
    # The demo, before it applies pools of this kind: what an operator publishes in the cloud
    # for their launch configs (template specs, images).
    publish_for: Callable[[SimControl, list[Any]], None] = _publish_nothing
    # The demo, at the end: resources besides VMs still held (None: the cloud has none to
    # count).
    leftovers: Callable[[SimControl], int] | None = None
    # Make one VM as Taskcluster's worker-manager does, through the real SDK
    # (wmsim/<kind>/legacy.py): a live deployment's fleet, for `wm import` and adoption.
    legacy_launch: Callable[[LegacyLaunch], LegacyVm] | None = None
    # Delete one such VM as worker-manager's removeWorker does (with the `settings` of
    # LegacyLaunch): the stand-in's own removals.
    legacy_terminate: Callable[[Mapping[str, Any], LegacyVm], None] | None = None
    # `wmsim demo --take-over` moves a provider of this kind from the legacy worker-manager
    # to wm (Firefox CI's plan: Azure first, the provider that stalls the others).
    moves_first: bool = False
