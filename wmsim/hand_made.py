"""Hand-made machines: workers no cloud API launches (a rack's macOS and FreeBSD machines, GPU
boxes, long-lived VMs made by hand), which join a worker-manager `static` pool.

How one joins, as an operator does it: worker-manager's createWorker makes the worker (running
from then on) with a shared secret; the machine's worker-runner is configured with its static
provider (tools/worker-runner/provider/static), whose config carries everything the cloud
providers read from a metadata service: rootURL, providerID, workerPoolID, workerGroup,
workerID and the secret. It registers with `workerIdentityProof: {staticSecret}`.

What is not a cloud here: there is no metadata service to read (the config is the boot data),
no termination notice to watch, and worker-runner's exit manager never calls removeWorker for a
static worker ("Host is not dynamically provisioned; exiting"): the machine stays in its rack.
Its worker does not leave when idle either: nobody would launch another. It stops when
worker-manager says so (shouldWorkerTerminate) or its credentials cannot be renewed.

This module is the simulated worker's static path; it is not a simulated cloud (there is no
API to serve), so it is not in wmsim/clouds.py's table.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings, WorkerAgent
from wmsim.bootdata import BootData

KIND = "static"  # worker-manager's provider type, and worker-runner's providerType
# The demo's share of the work for hand-made machines (the clouds' are in their SimCloud).
DEMO_SHARE = 0.04
COLOUR = "#6a3d9a"  # the demo's plot
# worker-manager's create-worker-request: providerInfo.staticSecret.
STATIC_SECRET = re.compile(r"^[a-zA-Z0-9_-]{44}$")
# worker-runner's config keys for the static provider (Go spelling: URL and ID capitalised).
REQUIRED_KEYS = ("rootURL", "providerID", "workerPoolID", "workerGroup", "workerID", "staticSecret")
# run.State.CheckProviderResults: what may not be empty, by the name worker-runner gives it.
UNSET_NAMES = {
    "rootURL": "RootURL",
    "workerPoolID": "WorkerPoolID",
    "workerGroup": "WorkerGroup",
    "workerID": "WorkerID",
}


class StaticConfigError(ValueError):
    """A worker-runner static provider config that worker-runner could not run with."""


@dataclass(frozen=True)
class StaticProviderConfig:
    """worker-runner's `provider:` block for `providerType: static`."""

    root_url: str
    provider_id: str
    worker_pool_id: str
    worker_group: str
    worker_id: str
    static_secret: str = field(repr=False)
    # TASKCLUSTER_WORKER_LOCATION beyond `cloud: static`; values are strings.
    worker_location: Mapping[str, str] = field(default_factory=dict)
    provider_metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_runner_config(cls, provider: Mapping[str, Any]) -> StaticProviderConfig:
        """Read a `provider:` block as worker-runner does (cfg.ProviderConfig.Unpack, then
        its provider's and run.State's checks), with worker-runner's messages: a missing key,
        one that is not a string, an empty identity, a non-string location. Keys it does not
        read are left alone, as worker-runner does."""
        if provider.get("providerType") != KIND:
            raise StaticConfigError(
                f"providerType is {provider.get('providerType')!r}, not {KIND!r}"
            )
        for key in REQUIRED_KEYS:
            if key not in provider:
                raise StaticConfigError(f"configuration value `provider.{key}` not found")
            if not isinstance(provider[key], str):
                raise StaticConfigError(
                    f"configuration value `provider.{key}` should have type string"
                )
        for key, state_name in UNSET_NAMES.items():
            if not provider[key]:
                raise StaticConfigError(f"provider did not set {state_name}")
        location = provider.get("workerLocation") or {}
        if not isinstance(location, Mapping):
            raise StaticConfigError("workerLocation is not a mapping")
        for key, value in location.items():
            if not isinstance(value, str):
                # worker-runner's own words
                raise StaticConfigError(f"workerLocation value {key} is not a string")
        metadata = provider.get("providerMetadata") or {}
        if not isinstance(metadata, Mapping):
            raise StaticConfigError("providerMetadata is not a mapping")
        return cls(
            root_url=provider["rootURL"],
            provider_id=provider["providerID"],
            worker_pool_id=provider["workerPoolID"],
            worker_group=provider["workerGroup"],
            worker_id=provider["workerID"],
            static_secret=provider["staticSecret"],
            worker_location=dict(location),
            provider_metadata=dict(metadata),
        )

    def runner_config(self) -> dict[str, Any]:
        """The `provider:` block an operator writes into the machine's worker-runner config."""
        block: dict[str, Any] = {
            "providerType": KIND,
            "rootURL": self.root_url,
            "providerID": self.provider_id,
            "workerPoolID": self.worker_pool_id,
            "workerGroup": self.worker_group,
            "workerID": self.worker_id,
            "staticSecret": self.static_secret,
        }
        if self.worker_location:
            block["workerLocation"] = dict(self.worker_location)
        if self.provider_metadata:
            block["providerMetadata"] = dict(self.provider_metadata)
        return block


@dataclass(frozen=True)
class StaticProvider:
    """worker-runner's static provider, as the agent reads a provider (wmsim.bootdata's
    CloudMetadata): the boot data is the config; nothing is fetched."""

    config: StaticProviderConfig

    def configure(self) -> BootData:
        c = self.config
        return BootData(
            root_url=normalize_root_url(c.root_url),
            provider_id=c.provider_id,
            worker_pool_id=c.worker_pool_id,
            worker_group=c.worker_group,
            worker_id=c.worker_id,
            proof=self.identity_proof(""),
            provider_metadata=dict(c.provider_metadata),
            dynamically_provisioned=False,
        )

    def terminating(self) -> bool:
        return False  # no cloud announces anything to a machine in a rack

    def identity_proof(self, audience: str) -> dict[str, str]:
        return {"staticSecret": self.config.static_secret}

    def worker_location(self) -> dict[str, str]:
        """TASKCLUSTER_WORKER_LOCATION as worker-runner's static provider sets it."""
        return {"cloud": KIND, **self.config.worker_location}


def normalize_root_url(root_url: str) -> str:
    """tcurls.NormalizeRootURL: no trailing slash."""
    return root_url.rstrip("/")


def new_static_secret() -> str:
    """A secret of the shape worker-manager takes (44 characters of [a-zA-Z0-9_-]): 33 random
    bytes in URL-safe base64."""
    return secrets.token_urlsafe(33)


def hand_made_worker(
    config: StaticProviderConfig,
    queue: BuiltinQueue,
    queue_worker_id: str,
    *,
    capacity: int = 1,
    settings: AgentSettings | None = None,
) -> WorkerAgent:
    """The simulated worker on a hand-made machine: worker-runner's static provider, a worker
    that never leaves for being idle (its settings' idle timeout is dropped)."""
    return WorkerAgent(
        metadata=StaticProvider(config),
        queue=queue,
        queue_worker_id=queue_worker_id,
        capacity=capacity,
        settings=replace(settings or AgentSettings(), idle_timeout_s=None),
    )
