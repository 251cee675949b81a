"""The parts of config.toml's schema that both wm.config.loader and the provider kinds build on.

A provider kind's config model (wm/kinds/<kind>.py) extends `ProviderConfigBase`; wm.config.loader
puts the kinds' models into its discriminated union. Both import this module, so neither has
to import the other's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from wm.calls import CallClass
from wm.config.provider_ids import PROVIDER_ID_PATTERN

# The validation context's key for the directory of the config file being read.
CONFIG_DIR = "config_dir"


def _against_config_dir(value: str, info: ValidationInfo) -> str:
    base = (info.context or {}).get(CONFIG_DIR)
    if base is None or Path(value).is_absolute():
        return value
    return str(Path(base) / value)


class _PathMarker:
    """Marks a config value that names a file (wm.config.loader.referenced_files finds them)."""


PATH_MARKER = _PathMarker()
# A file a config names: relative to the config file's directory, as an operator reads it,
# not to wherever the process was started.
ConfigPath = Annotated[str, AfterValidator(_against_config_dir), PATH_MARKER]

# The shared budget's buckets hold this many seconds of refill less than the cloud's: calls
# reach the cloud a little earlier or later than they took their tokens, and a bucket run at
# the cloud's very limit would be throttled by that jitter alone.
JITTER_RESERVE_S = 0.5


def removed_setting(key: str, instead: str) -> Any:
    """A config table's before-validator for `key`, a setting wm no longer has: refused saying
    what to do instead, not as a bare unknown key."""

    def refuse(cls: type[BaseModel], data: Any) -> Any:
        if isinstance(data, dict) and key in data:
            raise ValueError(f"{key} is no longer a setting: {instead}")
        return data

    return model_validator(mode="before")(classmethod(refuse))


class Frozen(BaseModel):
    """A config table: frozen, no unknown keys, and strict: a value of another type is refused
    naming its key, never coerced (`port = "8080"`, `scan_interval_s = true`). An integer is
    a number, and a TOML array a tuple."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _arrays_as_tuples(cls, data: Any) -> Any:
        # Strict tuples take tuples only; TOML (and JSON) arrays arrive as lists.
        if isinstance(data, dict):
            return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return data


class GateConfig(Frozen):
    """Limits for every SDK call made to one provider (see wm/providers/gate.py)."""

    timeout_s: float = Field(30.0, gt=0)  # per call, retries not included
    concurrency: int = Field(16, ge=1)  # calls in flight at once, per process
    # This process's own pace for the provider's calls. Unset (the default), each call class
    # has a bucket at the cloud's published limit (the kind's published_budgets, with the
    # provider's `budgets`); set, one bucket of calls_per_s for every call in their place. The
    # shared budget, when the process has one, holds either way.
    calls_per_s: float | None = Field(None, gt=0)  # refill rate
    burst: int | None = Field(None, ge=1)  # bucket size; default: 2 s of calls_per_s

    @property
    def cap(self) -> tuple[float, int] | None:
        """The all-classes cap (rate, size), if configured."""
        if self.calls_per_s is None:
            return None
        return self.calls_per_s, self.burst or max(1, round(2 * self.calls_per_s))

    @model_validator(mode="after")
    def _burst_needs_a_rate(self) -> GateConfig:
        if self.burst is not None and self.calls_per_s is None:
            raise ValueError("burst: set calls_per_s too (burst is the size of its bucket)")
        return self

    max_attempts: int = Field(4, ge=1)  # first call included
    backoff_base_s: float = Field(0.5, ge=0)  # full-jitter backoff: uniform(0, base * 2**n)
    backoff_max_s: float = Field(20.0, ge=0)
    pause_after_failures: int = Field(8, ge=1)  # consecutive retryable failures before a pause
    pause_s: float = Field(30.0, ge=0)  # how long the provider stays paused


class BudgetLimit(Frozen):
    """One of a cloud account's API rate limits, as a token bucket shared by every process."""

    burst: float = Field(gt=0)  # bucket size
    per_s: float = Field(gt=0)  # refill rate

    @property
    def usable_burst(self) -> float:
        """The bucket size wm runs at: the cloud's, less the jitter reserve (at least half)."""
        return max(self.burst / 2, self.burst - self.per_s * JITTER_RESERVE_S)


class SignalsConfig(Frozen):
    """A provider's `signals` table: how often wm reads its cloud's signal sources (prices,
    capacity, pre-emption priors) for the launch choice (wm/scanning/signals_job.py)."""

    # None: collect when the launch choice reads signals (a pool in shadow or cost mode);
    # true or false: always, never.
    enabled: bool | None = None
    # Refresh cadences; None: the source's own (EC2 prices 10 min, GCE and Azure prices daily,
    # capacity 15 min, pre-emption priors daily).
    price_interval_s: float | None = Field(None, gt=0)
    capacity_interval_s: float | None = Field(None, gt=0)
    preemption_interval_s: float | None = Field(None, gt=0)
    # A source that failed is tried again after this long (or its cadence, if shorter).
    retry_s: float = Field(120.0, gt=0)
    # The operating system prices are read for (EC2's ProductDescription, Azure's meters).
    os: Literal["linux", "windows"] = "linux"


class ProviderConfigBase(Frozen):
    """What every provider of every kind is configured with; each kind's model adds its own
    keys and its `kind` literal."""

    # The kind's published API limits per call class (its description's published_budgets).
    published_budgets: ClassVar[Mapping[CallClass, BudgetLimit]] = {}

    # Taskcluster's providerId, as the deployment names it (wm/config/provider_ids.py): it is in
    # scopes and workers' client ids, so it cannot be renamed to suit wm.
    id: Annotated[str, Field(pattern=PROVIDER_ID_PATTERN)]
    regions: Annotated[tuple[str, ...], Field(min_length=1)]  # scan units: regions, or zones on GCE
    endpoint: str | None = None  # override the cloud's API endpoint (the simulated clouds)
    credentials: Literal["default", "simulated"] = "default"  # simulated: fixed fake credentials
    scan_interval_s: float = Field(30.0, gt=0)
    max_scan_s: float = Field(300.0, gt=0)  # a scan running longer than this is abandoned
    provision_interval_s: float | None = Field(None, gt=0)  # defaults to intervals.provision_s
    gate: GateConfig = GateConfig()
    # The cloud account whose API limits this provider shares with every process and with
    # other providers naming the same account (default: the provider's own id).
    account: Annotated[str, Field(min_length=1)] | None = None
    budgets: Mapping[str, BudgetLimit] = Field(default_factory=dict)  # call class -> limit
    shared_budget: bool = True  # processes with a database draw from the shared budget
    # Whether this provider's images run worker-runner, which registers each worker. Images
    # without one count as running when the cloud says so, and never expire for want of a
    # registration (the chaos scenarios' VMs, an image being brought up).
    workers_register: bool = True
    # Taking over from a live worker-manager (README: "Moving a deployment onto wm"): its scans
    # also list the VMs worker-manager made for this providerId (found by worker-manager's own
    # tags and labels), adopt those `wm import` brought in, and report, never delete, the rest.
    adopt_legacy: bool = False
    # The launch choice's signals read from this provider's cloud.
    signals: SignalsConfig = SignalsConfig()

    @property
    def budget_account(self) -> str:
        return self.account or self.id

    def budget_limits(self) -> dict[CallClass, BudgetLimit]:
        """The published limits of this provider's cloud, with the config's overrides (whose
        classes the loader checked against the published ones)."""
        overrides = {CallClass(name): limit for name, limit in self.budgets.items()}
        return {**self.published_budgets, **overrides}

    @field_validator("regions")
    @classmethod
    def _distinct_regions(cls, regions: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(regions)) != len(regions):
            raise ValueError("regions must be distinct")
        return regions
