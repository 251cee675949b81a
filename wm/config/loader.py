"""The one reader of configuration: `config.toml` plus the environment, into frozen typed objects.

Every problem in a file is reported at once, each with its key path
(`pools[2].launch_configs[0].capacity_per_worker: must be >= 1`). Secrets are never read from
the file: a key that looks like one is itself an error. No other module reads `os.environ`.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError, field_validator

from wm.calls import CallClass
from wm.config.base import (
    CONFIG_DIR,
    JITTER_RESERVE_S,
    PATH_MARKER,
    BudgetLimit,
    Frozen,
    removed_setting,
)
from wm.config.base import GateConfig as GateConfig  # where callers have always found it
from wm.config.launch_choice import LaunchChoiceConfig
from wm.config.provider_ids import PROVIDER_ID_PATTERN
from wm.errors import ConfigError
from wm.kinds import KINDS, KindDescription

DEFAULT_CONFIG_PATH = "config.toml"
# How long a process keeps quiet about a failure it has just reported to Sentry (wm/ops/repeats.py).
DEFAULT_REPEAT_WINDOW_S = 600.0
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


ProviderConfig = Annotated[
    # One model per kind, each with its `kind` literal: wm.kinds.KINDS.
    Union[tuple(d.config_model for d in KINDS.values())],  # noqa: UP007
    Field(discriminator="kind"),
]


class QueueConfig(Frozen):
    source: Literal["builtin", "taskcluster"] = "builtin"
    task_queue_prefix: str = ""  # Taskcluster: task queue id = prefix + pool id


class IntervalsConfig(Frozen):
    provision_s: float = Field(10.0, gt=0)
    # A row the list did not show is looked up only past this age: listing lags creation.
    missing_grace_s: float = Field(30.0, ge=0)
    # A tagged VM without a live row is terminated only past this age.
    orphan_grace_s: float = Field(300.0, ge=0)

    _no_intent_recovery = removed_setting(
        "intent_recovery_s",
        "an unanswered create is looked up once its provider's gate could no longer be "
        "retrying it (timeout_s x max_attempts plus backoffs); remove the key",
    )


class RetentionConfig(Frozen):
    stopped_workers_s: float = Field(7 * 24 * 3600.0, gt=0)  # rows of stopped workers
    pool_errors_s: float = Field(7 * 24 * 3600.0, gt=0)


class WebConfig(Frozen):
    port: int = Field(8080, ge=1, le=65535)  # $PORT wins

    _no_public_url = removed_setting(
        "public_url",
        "set the top-level root_url (the Taskcluster root URL workers are given, also the GCE "
        "token audience) and remove this key",
    )


def base_url(value: str, example: str, what: str) -> str:
    """An http(s) URL with nothing after its host and port, in one form, without the slash
    (Taskcluster's clients join it with "/api/...")."""
    parts = urlsplit(value)
    if parts.scheme not in ROOT_URL_SCHEMES or not parts.netloc:
        raise ValueError(f"must be an http(s) URL such as {example}")
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"must be {what} alone: no path, query or fragment")
    return value.rstrip("/")


class TakeOverConfig(Frozen):
    """A move from a live worker-manager: where its web process still answers."""

    # The legacy worker-manager's own base URL (behind the rootUrl, which routes to wm now):
    # wm's web process forwards there every request for a pool or provider it has not taken
    # over, unchanged (method, path, query, body, Host, Authorization).
    legacy_url: str

    @field_validator("legacy_url")
    @classmethod
    def _plain_legacy_url(cls, value: str) -> str:
        return base_url(value, "http://worker-manager.internal", "a base URL")


class DatabaseConfig(Frozen):
    # How long a process started beside `release` waits for `wm db upgrade` to bring the
    # schema to the revision it needs, before it exits saying so.
    schema_wait_s: float = Field(300.0, ge=0)


class MetricsConfig(Frozen):
    # The first of the provisioner's and scanners' metrics ports (procs/ports.py gives each
    # process type its own, the nine from here on); 0: no metrics server in those processes.
    port: int = Field(0, ge=0, le=65535 - 8)


class Environment(Frozen):
    """What comes from the environment: secrets and platform settings."""

    database_url: str | None = None  # DATABASE_URL
    sentry_dsn: str | None = None  # SENTRY_DSN
    # SENTRY_REPEAT_WINDOW_S: a failure's repeats within it are counted, not sent (0: all sent)
    sentry_repeat_window_s: float = DEFAULT_REPEAT_WINDOW_S
    port: int | None = None  # PORT
    operator_token: str | None = None  # WM_OPERATOR_TOKEN
    taskcluster_root_url: str | None = None  # TASKCLUSTER_ROOT_URL
    taskcluster_client_id: str | None = None  # TASKCLUSTER_CLIENT_ID
    taskcluster_access_token: str | None = None  # TASKCLUSTER_ACCESS_TOKEN

    def __repr__(self) -> str:
        # Never print secrets, even in a traceback's locals.
        return "Environment(<redacted>)"

    __str__ = __repr__


class Config(Frozen):
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
    database: DatabaseConfig = DatabaseConfig()
    # Set while moving from a live worker-manager: forwarding to it is on (None: off).
    take_over: TakeOverConfig | None = None
    # How each pool chooses among its launch configs (wm/config/launch_choice.py).
    launch_choice: LaunchChoiceConfig = LaunchChoiceConfig()
    providers: tuple[ProviderConfig, ...] = ()
    env: Environment = Environment()
    source: str = DEFAULT_CONFIG_PATH

    @field_validator("root_url")
    @classmethod
    def _plain_root_url(cls, value: str) -> str:
        return base_url(value, "https://tc.example.com", "the root URL")

    def provider(self, provider_id: str) -> ProviderConfig:
        for provider in self.providers:
            if provider.id == provider_id:
                return provider
        raise KeyError(provider_id)

    def provider_interval_s(self, provider: ProviderConfig) -> float:
        return provider.provision_interval_s or self.intervals.provision_s

    def scanned_regions(self) -> dict[str, tuple[str, ...]]:
        """Provider id -> the regions its scanners list, for every provider of a scanned kind
        (a static provider's pools have no worker group to cover)."""
        return {p.id: p.regions for p in self.providers if KINDS[p.kind].scanned}

    def provider_kinds(self) -> dict[str, str]:
        """Provider id -> kind: which schema a pool definition's config follows."""
        return {p.id: p.kind for p in self.providers}


def environment_from(environ: Mapping[str, str]) -> Environment:
    port = environ.get("PORT")
    window_s = _repeat_window_s(environ)
    return Environment(
        database_url=environ.get("DATABASE_URL") or None,
        sentry_dsn=environ.get("SENTRY_DSN") or None,
        sentry_repeat_window_s=DEFAULT_REPEAT_WINDOW_S if window_s is None else window_s,
        port=int(port) if port and port.isdigit() and 0 < int(port) <= MAX_PORT else None,
        operator_token=environ.get("WM_OPERATOR_TOKEN") or None,
        taskcluster_root_url=environ.get("TASKCLUSTER_ROOT_URL") or None,
        taskcluster_client_id=environ.get("TASKCLUSTER_CLIENT_ID") or None,
        taskcluster_access_token=environ.get("TASKCLUSTER_ACCESS_TOKEN") or None,
    )


def _repeat_window_s(environ: Mapping[str, str]) -> float | None:
    """SENTRY_REPEAT_WINDOW_S as seconds; None when unset or not a number of seconds."""
    try:
        value = float(environ.get("SENTRY_REPEAT_WINDOW_S", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def environment_problems(environ: Mapping[str, str]) -> list[str]:
    """Malformed platform settings, named. A typo here must stop a process at start, not make
    it listen on another port or fail at its first query with a driver's traceback."""
    problems = []
    port = environ.get("PORT")
    if port and not (port.isdigit() and 0 < int(port) <= MAX_PORT):
        problems.append(f"PORT (environment): must be a port number 1-{MAX_PORT}, not {port!r}")
    window = environ.get("SENTRY_REPEAT_WINDOW_S")
    if window and _repeat_window_s(environ) is None:
        problems.append(
            f"SENTRY_REPEAT_WINDOW_S (environment): must be seconds, 0 or more, not {window!r}"
        )
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


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment with `extra` on top: what a child process of it runs with."""
    return {**os.environ, **extra}


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
        config = Config.model_validate(
            {**data, "env": environment_from(environ), "source": source},
            context={CONFIG_DIR: config_dir(source)},
        )
    except ValidationError as exc:
        problems = [*schema_problems(exc), *problems]
    if problems:
        raise ConfigError(problems, source)
    assert config is not None
    return config


def config_dir(source: str) -> str:
    """Where the files a config names are found: beside it."""
    return str(Path(source).resolve().parent)


def referenced_files(model: BaseModel, where: str = "") -> list[tuple[str, str]]:
    """Every file the config names (its ConfigPath values), with its key path."""
    found: list[tuple[str, str]] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        key = f"{where}.{name}" if where else name
        if _names_files(info.annotation) or any(m is PATH_MARKER for m in info.metadata):
            found += _paths(value, key)
        elif isinstance(value, BaseModel):
            found += referenced_files(value, key)
        elif isinstance(value, tuple) and all(isinstance(v, BaseModel) for v in value):
            for index, item in enumerate(value):
                found += referenced_files(item, f"{key}[{index}]")
    return found


def _names_files(annotation: Any) -> bool:
    return any(
        arg is PATH_MARKER or _names_files(arg)
        for arg in (*get_args(annotation), *getattr(annotation, "__metadata__", ()))
    )


def _paths(value: Any, key: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(key, value)]
    if isinstance(value, tuple):
        return [(f"{key}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return [(f"{key}.{k}", v) for k, v in value.items()]
    return []


def missing_files(config: Config) -> list[str]:
    """The files the config names that are not there (`wm config check`), each with its key
    path; a process would fail on each at start or at its first pass."""
    return [
        f"{key}: no file {path}"
        for key, path in referenced_files(config)
        if not Path(path).is_file()
    ]


def schema_problems(exc: ValidationError, union_tags: frozenset[str] | None = None) -> list[str]:
    """Each error as `key.path: message`. `union_tags`: the discriminator values pydantic puts
    in an error's location, left out of the path (default: the provider kinds)."""
    union_tags = frozenset(KINDS) if union_tags is None else union_tags
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
        case "tuple_type" if isinstance(error.get("input"), str):
            key = next((p for p in reversed(error["loc"]) if isinstance(p, str)), "key")
            return f"must be a list, not a string: {key} = [{json.dumps(error['input'])}]"
        case "tuple_type":
            return f"must be a list, not {_kind_of(error.get('input'))}"
        case "int_type":
            return f"must be an integer, not {_kind_of(error.get('input'))}"
        case "float_type":
            return f"must be a number, not {_kind_of(error.get('input'))}"
        case "bool_type":
            return f"must be true or false, not {_kind_of(error.get('input'))}"
        case "string_type":
            return f"must be a string, not {_kind_of(error.get('input'))}"
        case "model_type" | "dict_type" | "mapping_type":
            return f"must be a table, not {_kind_of(error.get('input'))}"
        case "union_tag_invalid" | "literal_error":
            return f"must be one of {ctx.get('expected', ctx.get('expected_tags'))}"
        case _:
            return str(error["msg"]).removeprefix("Value error, ")


def _kind_of(value: Any) -> str:
    """A wrong value as TOML would show it, with its type: what was written, and why no."""
    match value:
        case bool():
            return f"a boolean ({str(value).lower()})"
        case str():
            return f"a string ({json.dumps(value)})"
        case int() | float():
            return f"a number ({value!r})"
        case list() | tuple():
            return "a list"
        case Mapping():
            return "a table"
        case _:
            return f"a {type(value).__name__}"


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


def _batch_fits_problems(raw: Any, key: str, batch_max: int) -> list[str]:
    try:
        limit = BudgetLimit.model_validate(raw)
    except ValidationError:
        return []  # the schema's own check names what is wrong
    if limit.usable_burst >= batch_max:
        return []
    least = min(2 * batch_max, batch_max + limit.per_s * JITTER_RESERVE_S)
    return [
        f"{key}.burst: must be at least {least:g} at per_s {limit.per_s:g}: one create call "
        f"launches up to {batch_max} workers, and wm keeps {JITTER_RESERVE_S:g} s of "
        "refill in reserve"
    ]


def cross_reference_problems(raw: Mapping[str, Any]) -> list[str]:
    """Checks across sections, written against raw data so they run beside schema errors."""
    problems: list[str] = []
    regions_by_provider: dict[str, set[str]] = {}
    for index, provider in enumerate(_list(raw.get("providers"))):
        if not isinstance(provider, Mapping):
            continue
        # An unknown kind is the schema's to name; its budgets are not checked.
        description = KINDS.get(str(provider.get("kind")))
        budgets = provider.get("budgets")
        if description is not None and isinstance(budgets, Mapping):
            problems += _budget_problems(description, budgets, f"providers[{index}].budgets")
        pid = provider.get("id")
        if pid in regions_by_provider:
            problems.append(f"providers[{index}].id: duplicate provider id {pid!r}")
        regions = provider.get("regions")
        regions_by_provider[pid] = set(regions) if isinstance(regions, list) else set()
    return problems


def _budget_problems(
    description: KindDescription, budgets: Mapping[str, Any], key: str
) -> list[str]:
    known = description.published_budgets
    problems = []
    for call_class in budgets:
        if call_class not in known:
            problems.append(f"{key}.{call_class}: unknown call class; one of {sorted(known)}")
        elif call_class in PER_WORKER_CALL_CLASSES:
            problems += _batch_fits_problems(
                budgets[call_class], f"{key}.{call_class}", description.create_batch_max
            )
    return problems


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
