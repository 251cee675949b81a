"""The one reader of configuration: `config.toml` plus the environment, into frozen typed objects.

Every problem in a file is reported at once, each with its key path
(`pools[2].launch_configs[0].capacity_per_worker: must be >= 1`). Secrets are never read from
the file: a key that looks like one is itself an error. No other module reads `os.environ`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from wm.calls import CallClass
from wm.errors import ConfigError
from wm.provider_ids import PROVIDER_ID_PATTERN, gce_label_problem

DEFAULT_CONFIG_PATH = "config.toml"
# Packages installed beside wm may keep top-level tables of their own in the same file (the
# simulator's [sim] and [demo]), each declaring the table's name in this entry-point group. wm
# reads the names only, never loads them, and leaves those tables to their owner: any other
# unknown table is refused, so a typo in wm's own sections still stops the process.
SECTIONS_ENTRY_POINT_GROUP = "wm.config_sections"
SECRET_KEY_PATTERN = re.compile(
    r"(password|passwd|secret|token|access_key|private_key|credential_json)", re.IGNORECASE
)
# Keys whose names match SECRET_KEY_PATTERN but hold no secret.
NOT_SECRET_KEYS = frozenset({"credentials"})
ID_PATTERN = r"^[a-z0-9][a-z0-9._/-]{0,62}$"
MAX_PORT = 65535
DATABASE_SCHEMES = frozenset({"postgres", "postgresql"})  # postgres://: Heroku-style platforms
CREATE_BATCH_MAX = 100  # workers per create call (EC2 RunInstances, GCE bulk insert)
# The shared budget's buckets hold this many seconds of refill less than the cloud's: calls
# reach the cloud a little earlier or later than they took their tokens, and a bucket run at
# the cloud's very limit would be throttled by that jitter alone.
JITTER_RESERVE_S = 0.5
# Call classes whose one call costs a token per worker created: a bucket smaller than a batch
# would never hold enough, and every such call would be throttled.
PER_WORKER_CALL_CLASSES = frozenset({CallClass.RUN_INSTANCES})
# Where the deployment's API lives when nothing says otherwise: the web process on its default
# port (standalone, the demo). Workers find wm at `<root_url>/api/worker-manager/v1/`.
DEFAULT_ROOT_URL = "http://127.0.0.1:8080"
ROOT_URL_SCHEMES = frozenset({"http", "https"})
POOLS_MOVED = (
    "pools: [[pools]] moved out of config.toml: worker pools are Taskcluster worker pool "
    "definitions, applied with `wm pools apply FILE` or the API's createWorkerPool; "
    "`wm pools convert` writes them from this file's [[pools]] tables (README: Moving from "
    "[[pools]])"
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GateConfig(_Frozen):
    """Limits for every SDK call made to one provider (see wm/providers/gate.py)."""

    timeout_s: float = Field(30.0, gt=0)  # per call, retries not included
    concurrency: int = Field(16, ge=1)  # calls in flight at once, per process
    calls_per_s: float = Field(20.0, gt=0)  # token bucket refill rate
    burst: int = Field(40, ge=1)  # token bucket size
    max_attempts: int = Field(4, ge=1)  # first call included
    backoff_base_s: float = Field(0.5, ge=0)  # full-jitter backoff: uniform(0, base * 2**n)
    backoff_max_s: float = Field(20.0, ge=0)
    pause_after_failures: int = Field(8, ge=1)  # consecutive retryable failures before a pause
    pause_s: float = Field(30.0, ge=0)  # how long the provider stays paused


class BudgetLimit(_Frozen):
    """One of a cloud account's API rate limits, as a token bucket shared by every process."""

    burst: float = Field(gt=0)  # bucket size
    per_s: float = Field(gt=0)  # refill rate

    @property
    def usable_burst(self) -> float:
        """The bucket size wm runs at: the cloud's, less the jitter reserve (at least half)."""
        return max(self.burst / 2, self.burst - self.per_s * JITTER_RESERVE_S)


# The clouds' published defaults, per call class (EC2 per account and region: RunInstances'
# resource bucket counts instances; ARM per principal and subscription; GCE per project, its
# per-minute quotas as buckets). A provider's `budgets` overrides any of them.
PUBLISHED_BUDGETS: Mapping[str, Mapping[CallClass, BudgetLimit]] = {
    "aws": {
        CallClass.RUN_INSTANCES: BudgetLimit(burst=1000, per_s=2),
        CallClass.MUTATING: BudgetLimit(burst=200, per_s=5),
        CallClass.DESCRIBE: BudgetLimit(burst=100, per_s=20),
    },
    "azure": {
        CallClass.WRITE: BudgetLimit(burst=200, per_s=10),
        CallClass.DELETE: BudgetLimit(burst=200, per_s=10),
        CallClass.READ: BudgetLimit(burst=250, per_s=25),
    },
    "gcp": {
        CallClass.WRITE: BudgetLimit(burst=1500, per_s=25),
        CallClass.READ: BudgetLimit(burst=1500, per_s=25),
    },
}


class _ProviderBase(_Frozen):
    # Taskcluster's providerId, as the deployment names it (wm/provider_ids.py): it is in
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

    @property
    def budget_account(self) -> str:
        return self.account or self.id

    def budget_limits(self) -> dict[CallClass, BudgetLimit]:
        """The published limits of this provider's cloud, with the config's overrides (whose
        classes the loader checked against the published ones)."""
        overrides = {CallClass(name): limit for name, limit in self.budgets.items()}
        return {**PUBLISHED_BUDGETS[self.kind], **overrides}  # type: ignore[attr-defined]

    @field_validator("regions")
    @classmethod
    def _distinct_regions(cls, regions: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(regions)) != len(regions):
            raise ValueError("regions must be distinct")
        return regions


class AwsProviderConfig(_ProviderBase):
    kind: Literal["aws"]
    # PEM files of AWS's public certificates for instance identity documents, by region; a
    # region without one falls back to `identity_certificate`, then to the packaged ones.
    identity_certificates: Mapping[str, str] = Field(default_factory=dict)
    identity_certificate: str | None = None


class GcpProviderConfig(_ProviderBase):
    kind: Literal["gcp"]
    project: Annotated[str, Field(min_length=1)]
    operation_poll_s: float = Field(1.0, gt=0)  # between zone operation polls
    identity_jwks: str | None = None  # JWKS file trusted for identity tokens; else Google's keys
    # The service account every worker VM runs as: without one a VM cannot fetch an identity
    # token. The email goes on the instance; the numeric unique id is what tokens carry as
    # `sub`, and is checked (a token of any other account in the project is refused).
    worker_service_account_email: Annotated[str, Field(min_length=3)] | None = None
    worker_service_account_id: Annotated[str, Field(pattern=r"^[0-9]{1,32}$")] | None = None

    @field_validator("id")
    @classmethod
    def _fits_gce_labels(cls, value: str) -> str:
        # Its VMs are found by a label holding the id: refused here, not by GCE at launch.
        problem = gce_label_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _service_account_whole(self) -> GcpProviderConfig:
        if (self.worker_service_account_email is None) != (self.worker_service_account_id is None):
            raise ValueError(
                "worker_service_account_email and worker_service_account_id go together: "
                "set both (the account's email and its numeric unique id) or neither"
            )
        return self

    @model_validator(mode="after")
    def _registering_workers_have_an_account(self) -> GcpProviderConfig:
        # Without one its VMs cannot fetch an identity token: every registration would be
        # refused, and every worker expire unregistered.
        if self.workers_register and self.worker_service_account_email is None:
            raise ValueError(
                f"provider {self.id!r} has workers_register = true (the default) but no "
                "worker_service_account_email and worker_service_account_id: its VMs could "
                "not fetch an identity token, so every registration would be refused; set "
                "the service account the worker VMs run as, or workers_register = false"
            )
        return self


class AzureProviderConfig(_ProviderBase):
    kind: Literal["azure"]
    subscription_id: Annotated[str, Field(min_length=1)]
    resource_group: Annotated[str, Field(min_length=1)]  # holds this deployment's VMs
    ca_bundle: str | None = None  # PEM file to trust (the simulated cloud's certificate)
    authority: str | None = None  # Entra ID authority host; the endpoint when simulated
    # PEM files adding to the Microsoft roots and intermediates wm ships for attested data:
    # self-signed certificates become trusted roots, the others intermediates (a private CA, the
    # simulated ARM). Empty for real Azure.
    identity_roots: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _no_subnet_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and "subnet_id" in data:
            raise ValueError(
                "subnet_id is no longer a provider setting: each launch config names its "
                "subnet, as Taskcluster's do; move the value into the launch configs' "
                "`subnetId` and remove the key"
            )
        return data


ProviderConfig = Annotated[
    AwsProviderConfig | GcpProviderConfig | AzureProviderConfig, Field(discriminator="kind")
]


class QueueConfig(_Frozen):
    source: Literal["builtin", "taskcluster"] = "builtin"
    task_queue_prefix: str = ""  # Taskcluster: task queue id = prefix + pool id


class IntervalsConfig(_Frozen):
    provision_s: float = Field(10.0, gt=0)
    # A row the list did not show is looked up only past this age: listing lags creation.
    missing_grace_s: float = Field(30.0, ge=0)
    # A tagged VM without a live row is terminated only past this age.
    orphan_grace_s: float = Field(300.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _no_intent_recovery(cls, data: Any) -> Any:
        if isinstance(data, dict) and "intent_recovery_s" in data:
            raise ValueError(
                "intent_recovery_s is no longer a setting: an unanswered create is looked up "
                "once its provider's gate could no longer be retrying it (timeout_s x "
                "max_attempts plus backoffs); remove the key"
            )
        return data


class RetentionConfig(_Frozen):
    stopped_workers_s: float = Field(7 * 24 * 3600.0, gt=0)  # rows of stopped workers
    pool_errors_s: float = Field(7 * 24 * 3600.0, gt=0)


class WebConfig(_Frozen):
    port: int = Field(8080, ge=1, le=65535)  # $PORT wins

    @model_validator(mode="before")
    @classmethod
    def _no_public_url(cls, data: Any) -> Any:
        if isinstance(data, dict) and "public_url" in data:
            raise ValueError(
                "public_url is no longer a setting: set the top-level root_url (the Taskcluster "
                "root URL workers are given, also the GCE token audience) and remove this key"
            )
        return data


class MetricsConfig(_Frozen):
    port: int = Field(0, ge=0, le=65535)  # 0: no metrics server in worker processes


class Environment(_Frozen):
    """What comes from the environment: secrets and platform settings."""

    database_url: str | None = None  # DATABASE_URL
    sentry_dsn: str | None = None  # SENTRY_DSN
    port: int | None = None  # PORT
    operator_token: str | None = None  # WM_OPERATOR_TOKEN
    taskcluster_root_url: str | None = None  # TASKCLUSTER_ROOT_URL
    taskcluster_client_id: str | None = None  # TASKCLUSTER_CLIENT_ID
    taskcluster_access_token: str | None = None  # TASKCLUSTER_ACCESS_TOKEN

    def __repr__(self) -> str:
        # Never print secrets, even in a traceback's locals.
        return "Environment(<redacted>)"

    __str__ = __repr__


class Config(_Frozen):
    deployment_id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")]
    # The Taskcluster root URL of the deployment: written into every worker's boot data (its
    # workers call `<root_url>/api/worker-manager/v1/`), and the audience of GCE identity
    # tokens. $TASKCLUSTER_ROOT_URL wins.
    root_url: str = DEFAULT_ROOT_URL
    queue: QueueConfig = QueueConfig()
    intervals: IntervalsConfig = IntervalsConfig()
    retention: RetentionConfig = RetentionConfig()
    web: WebConfig = WebConfig()
    metrics: MetricsConfig = MetricsConfig()
    providers: tuple[ProviderConfig, ...] = ()
    env: Environment = Environment()
    source: str = DEFAULT_CONFIG_PATH

    @field_validator("root_url")
    @classmethod
    def _plain_root_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ROOT_URL_SCHEMES or not parts.netloc:
            raise ValueError("must be an http(s) URL such as https://tc.example.com")
        if parts.query or parts.fragment or parts.path not in ("", "/"):
            raise ValueError("must be the root URL alone: no path, query or fragment")
        # Taskcluster's clients join it with "/api/...": one form, without the slash.
        return value.rstrip("/")

    def provider(self, provider_id: str) -> ProviderConfig:
        for provider in self.providers:
            if provider.id == provider_id:
                return provider
        raise KeyError(provider_id)

    def provider_interval_s(self, provider: ProviderConfig) -> float:
        return provider.provision_interval_s or self.intervals.provision_s

    def provider_kinds(self) -> dict[str, str]:
        """Provider id -> kind: which schema a pool definition's config follows."""
        return {p.id: p.kind for p in self.providers}


def environment_from(environ: Mapping[str, str]) -> Environment:
    port = environ.get("PORT")
    return Environment(
        database_url=environ.get("DATABASE_URL") or None,
        sentry_dsn=environ.get("SENTRY_DSN") or None,
        port=int(port) if port and port.isdigit() and 0 < int(port) <= MAX_PORT else None,
        operator_token=environ.get("WM_OPERATOR_TOKEN") or None,
        taskcluster_root_url=environ.get("TASKCLUSTER_ROOT_URL") or None,
        taskcluster_client_id=environ.get("TASKCLUSTER_CLIENT_ID") or None,
        taskcluster_access_token=environ.get("TASKCLUSTER_ACCESS_TOKEN") or None,
    )


def environment_problems(environ: Mapping[str, str]) -> list[str]:
    """Malformed platform settings, named. A typo here must stop a process at start, not make
    it listen on another port or fail at its first query with a driver's traceback."""
    problems = []
    port = environ.get("PORT")
    if port and not (port.isdigit() and 0 < int(port) <= MAX_PORT):
        problems.append(f"PORT (environment): must be a port number 1-{MAX_PORT}, not {port!r}")
    url = environ.get("DATABASE_URL")
    if url and urlsplit(url).scheme.split("+")[0] not in DATABASE_SCHEMES:
        # Never quoted: the URL may hold the database password.
        problems.append(
            "DATABASE_URL (environment): must be a PostgreSQL URL "
            "(postgresql://user:password@host:port/database)"
        )
    return problems


def config_path(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(explicit or environ.get("WM_CONFIG") or DEFAULT_CONFIG_PATH)


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, validate and freeze a config file; raise ConfigError listing every problem."""
    environ = os.environ if environ is None else environ
    file = config_path(str(path) if path else None, environ)
    return parse(read_toml(file), environ=environ, source=str(file))


def read_toml(file: Path) -> dict[str, Any]:
    """The file's tables; ConfigError when it cannot be read as TOML."""
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(["file not found (set --config or WM_CONFIG)"], str(file)) from None
    except OSError as exc:  # a directory, no permission...
        raise ConfigError([f"cannot read it: {exc.strerror}"], str(file)) from None
    except UnicodeDecodeError:
        raise ConfigError(["not UTF-8 text (TOML files must be UTF-8)"], str(file)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"not valid TOML: {exc}"], str(file)) from None


@cache
def extension_sections() -> frozenset[str]:
    """The top-level tables that installed packages declare as theirs (names only)."""
    names = {ep.name for ep in entry_points(group=SECTIONS_ENTRY_POINT_GROUP)}
    return frozenset(names - set(Config.model_fields))  # wm's own keys stay wm's


def parse(
    raw: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    source: str,
    skip: frozenset[str] | None = None,
) -> Config:
    """Validate wm's part of a parsed file. `skip`: top-level tables left to their owners
    (default: those installed packages declare)."""
    skip = extension_sections() if skip is None else skip
    problems = secret_key_problems(raw) + cross_reference_problems(raw)
    problems += environment_problems(environ)
    if "env" in raw or "source" in raw:
        problems.append("env, source: not settable in the file")
    if "pools" in raw:
        problems.append(POOLS_MOVED)
    data = {k: v for k, v in raw.items() if k not in ("env", "source", "pools", *skip)}
    if environ.get("TASKCLUSTER_ROOT_URL"):
        # The deployment's root URL is one value: Taskcluster's own variable wins over the file.
        data["root_url"] = environ["TASKCLUSTER_ROOT_URL"]
    config = None
    try:
        config = Config(**data, env=environment_from(environ), source=source)
    except ValidationError as exc:
        problems = [*schema_problems(exc), *problems]
    if problems:
        raise ConfigError(problems, source)
    assert config is not None
    return config


def schema_problems(exc: ValidationError, union_tags: frozenset[str] | None = None) -> list[str]:
    """Each error as `key.path: message`. `union_tags`: the discriminator values pydantic puts
    in an error's location, left out of the path (default: the provider kinds)."""
    union_tags = _UNION_TAGS if union_tags is None else union_tags
    errors = exc.errors()
    locs = [tuple(part for part in e["loc"] if part not in union_tags) for e in errors]
    problems = []
    for error, loc in zip(errors, locs, strict=True):
        # Pydantic reports a sequence as too short when its only item is invalid: noise.
        if error["type"] == "too_short" and any(o[: len(loc)] == loc and o != loc for o in locs):
            continue
        if error["type"] == "union_tag_invalid":
            loc = (*loc, str(error["ctx"]["discriminator"]).strip("'"))
        problems.append(f"{format_key_path(list(loc))}: {_message(error)}")
    return problems


_UNION_TAGS = frozenset({"aws", "gcp", "azure"})


def _message(error: Mapping[str, Any]) -> str:
    ctx = error.get("ctx") or {}
    match error["type"]:
        case "greater_than_equal":
            return f"must be >= {ctx['ge']:g}"
        case "greater_than":
            return f"must be > {ctx['gt']:g}"
        case "less_than_equal":
            return f"must be <= {ctx['le']:g}"
        case "missing":
            return "required"
        case "extra_forbidden":
            return "unknown key"
        case "string_pattern_mismatch" if ctx["pattern"] == PROVIDER_ID_PATTERN:
            return (
                f"must match {PROVIDER_ID_PATTERN} (Taskcluster's providerId: 1 to 38 letters, "
                "digits, `-` and `_`)"
            )
        case "string_pattern_mismatch":
            return f"must match {ctx['pattern']}"
        case "too_short":
            return "must not be empty"
        case "union_tag_invalid" | "literal_error":
            return f"must be one of {ctx.get('expected', ctx.get('expected_tags'))}"
        case _:
            return str(error["msg"]).removeprefix("Value error, ")


def format_key_path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def secret_key_problems(raw: Any, path: tuple[Any, ...] = ()) -> list[str]:
    problems = []
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            here = (*path, key)
            if key not in NOT_SECRET_KEYS and SECRET_KEY_PATTERN.search(str(key)):
                problems.append(f"{format_key_path(list(here))}: secrets belong in the environment")
            problems += secret_key_problems(value, here)
    elif isinstance(raw, list):
        for index, value in enumerate(raw):
            problems += secret_key_problems(value, (*path, index))
    return problems


def _batch_fits_problems(raw: Any, key: str) -> list[str]:
    try:
        limit = BudgetLimit.model_validate(raw)
    except ValidationError:
        return []  # the schema's own check names what is wrong
    if limit.usable_burst >= CREATE_BATCH_MAX:
        return []
    least = min(2 * CREATE_BATCH_MAX, CREATE_BATCH_MAX + limit.per_s * JITTER_RESERVE_S)
    return [
        f"{key}.burst: must be at least {least:g} at per_s {limit.per_s:g}: one create call "
        f"launches up to {CREATE_BATCH_MAX} workers, and wm keeps {JITTER_RESERVE_S:g} s of "
        "refill in reserve"
    ]


def cross_reference_problems(raw: Mapping[str, Any]) -> list[str]:
    """Checks across sections, written against raw data so they run beside schema errors."""
    problems: list[str] = []
    regions_by_provider: dict[str, set[str]] = {}
    for index, provider in enumerate(_list(raw.get("providers"))):
        if not isinstance(provider, Mapping):
            continue
        known = PUBLISHED_BUDGETS.get(str(provider.get("kind")), {})
        budgets = provider.get("budgets")
        for call_class in budgets if isinstance(budgets, Mapping) and known else ():
            if call_class not in known:
                problems.append(
                    f"providers[{index}].budgets.{call_class}: unknown call class; "
                    f"one of {sorted(known)}"
                )
            elif call_class in PER_WORKER_CALL_CLASSES:
                problems += _batch_fits_problems(
                    budgets[call_class], f"providers[{index}].budgets.{call_class}"
                )
        pid = provider.get("id")
        if pid in regions_by_provider:
            problems.append(f"providers[{index}].id: duplicate provider id {pid!r}")
        regions = provider.get("regions")
        regions_by_provider[pid] = set(regions) if isinstance(regions, list) else set()
    return problems


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
