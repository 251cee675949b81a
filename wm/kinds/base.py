"""What a provider kind is: one frozen description per kind (wm/kinds/<kind>.py), registered
in wm.kinds.KINDS. Pure data and pure functions, no I/O and no cloud SDK: everything wm
needs to know about a kind without talking to its cloud. What a kind *does* (its provider and
identity verifier) lives in its package wm.providers.<kind>."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wm.calls import CallClass
from wm.config.base import BudgetLimit, ProviderConfigBase
from wm.model import Offering, WorkerState
from wm.pools.json_check import Schema

MANAGED_BY = "taskcluster"  # the managed-by tag or label worker-manager puts on what it makes


@dataclass(frozen=True)
class BootFacts:
    """What every worker is told at boot, whatever its cloud: worker-runner takes these from
    its boot data (and its workerId from the cloud itself)."""

    root_url: str  # the deployment's Taskcluster root URL
    pool_id: str  # workerPoolId
    provider_id: str  # providerId
    worker_group: str  # the launch config's worker group (region, zone, location)
    launch_config_id: str
    worker_config: Mapping[str, Any]
    owner: str  # the pool definition's owner


@dataclass(frozen=True)
class Registration:
    """How registerWorker finds a worker of a kind ready: the state it must be in, and
    worker-manager's words to one in another state."""

    state: WorkerState
    refusal: str


# A cloud's VM registers once, when it first boots (worker-manager's words to one that is not
# requested; also when a concurrent registration won).
ONCE = Registration(WorkerState.REQUESTED, "This worker is either stopped or running")
# A machine made by createWorker registers while running, as often as it restarts (static.js's
# words; also when its write finds it stopped meanwhile).
WHILE_RUNNING = Registration(WorkerState.RUNNING, "worker is not running")


def no_problems(launch_config: Mapping[str, Any], path: str) -> list[str]:
    """For a kind whose launch configs need no check beyond their schema (or no warnings)."""
    return []


def no_offering(launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
    """For a kind whose launch configs launch in no cloud market (static)."""
    return None


def never(launch_config: Mapping[str, Any]) -> bool:
    """For a kind that has no template form."""
    return False


@dataclass(frozen=True)
class KindDescription:
    """Every per-kind part of wm, for one provider kind (a config's `kind`)."""

    # The config's `kind` value, the key in KINDS and the package wm.providers.<name>.
    name: str
    # The pydantic model of a `[[providers]]` table of this kind: its `kind` is Literal[name].
    config_model: type[ProviderConfigBase]
    # Taskcluster's providerType for this kind (worker-manager's listProviders answer).
    provider_type: str
    # A launch config of this kind's pool definitions (Taskcluster's config-<type>.yml).
    launch_config_schema: Schema
    # Where worker-manager takes a launch config's worker group from (a value past the schema;
    # only a string is used).
    worker_group: Callable[[Mapping[str, Any]], Any]
    # The candidates for a pool whose provider is gone (null-provider), which is read leniently:
    # this kind's keys, in the order worker-manager would look.
    worker_group_guesses: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    # Whether a launch config is launched as a template deployment (Azure's ARM form).
    template_form: Callable[[Mapping[str, Any]], bool]
    # Accepted launch configs worth a word (keys wm overrides), each `path.key: why`.
    override_warnings: Callable[[Mapping[str, Any], str], list[str]]
    # Launch configs the schema accepts but whose every launch would fail, each `path.key: why`.
    launch_config_problems: Callable[[Mapping[str, Any], str], list[str]]
    # The cloud's published API limits per call class, the shared budget's defaults.
    published_budgets: Mapping[CallClass, BudgetLimit]
    # Whether those limits are per region (each region of a provider a bucket of its own per
    # call class, EC2's) or per account.
    budgets_per_region: bool
    # Workers per create call (one RunInstances, one GCE bulk insert, one round of ARM PUTs).
    create_batch_max: int
    # registerWorker's refusal of a proof of this kind (worker-manager's InputError message).
    proof_rejected: str
    # The boot data worker-runner reads, as worker-manager writes it: where it is written is
    # the provider's business, the keys and values are this.
    boot_data: Callable[[BootFacts], Mapping[str, Any]]
    # Where a launch config launches as its cloud prices and runs out of it, from the launch
    # config (verbatim) and its worker group (LaunchConfigRecord.region): what the launch
    # choice benches, prices and scores. None when the launch config does not say (a missing
    # or non-string instance type; a kind with no cloud).
    offering: Callable[[Mapping[str, Any], str], Offering | None]
    # Whether its workers are made and changed by createWorker and updateWorker (Taskcluster's
    # static provider; every other answers "not supported"): such a pool's definition carries
    # no launch configs but the one its workers belong to, a removed or expired worker stops
    # at once (nothing to delete), and a provisioner's job for its providers is stopping the
    # workers whose `expires` passed. Imported from a legacy worker-manager, they stay there.
    # wm knows two ways a worker comes to be, so `scanned` and `registration` follow from it.
    hand_made: bool = False
    # The whole pool `config` schema of this kind; None: the launching kinds' (min/max
    # capacity, scaling ratio, lifecycle, launch configs of `launch_config_schema`).
    pool_config_schema: Schema | None = None

    @property
    def scanned(self) -> bool:
        """Whether a scanner lists this kind's providers' clouds, region by region, and a
        provisioner launches in them: `wm run scanner|provisioner --kind` offers it, those
        processes build its provider (its package's `make`), a pool's worker groups must be
        among its provider's regions, and the take-over's scans adopt its imported VMs. False
        (hand-made): none of its workers is in a cloud wm lists: no budgets (published_budgets
        empty), no create batch (create_batch_max 0), no package `make`."""
        return not self.hand_made

    @property
    def registration(self) -> Registration:
        """How registerWorker finds its workers: a cloud's VM once, from requested; a hand-made
        worker while running, as often as it restarts."""
        return WHILE_RUNNING if self.hand_made else ONCE
