"""Taskcluster worker pool definitions: parse and check them as worker-manager's schemas do.

Pure, no I/O. The body is what `createWorkerPool` takes
(services/worker-manager/schemas/v1/create-worker-pool-request.yml; `updateWorkerPool` also
allows `workerPoolId`, `created`, `lastModified`) and `config` follows the provider's schema
(config-aws.yml, config-google.yml, config-azure.yml, worker-lifecycle.yml), transcribed in
wm.pools.schemas and checked by wm.pools.json_check: every problem names its key path, and all of
them are reported at once.

Exactly as strict as Taskcluster, no stricter. Where that needed deciding:
- Formats are ajv-formats 2.1.1's, which worker-manager's validator uses: `owner` is an
  email by its regex, `created`/`lastModified` date-times by its check.
- No `maxCapacity >= minCapacity` check: worker-manager has none (src/api.js), and its
  estimator then keeps minCapacity running; wm does the same, with a warning naming both.
- EC2 `launchConfig`: the schema's `not: {required: [IamInstanceProfile, UserData, MinCount,
  MaxCount]}` refuses only a launch config holding all four, so each alone loads.
  worker-manager overrides UserData, MinCount and MaxCount silently; wm does too, and also
  replaces ClientToken with its own idempotency token (Taskcluster would pass a given one on,
  and every later RunInstances would return the first call's instances). Refusing them would
  refuse what Taskcluster accepts, so they load and are named in `PoolDefinition.warnings`.
- Two launch configs of one pool with the same id (given, or derived): Taskcluster's upsert
  (db version 0116 `upsert_worker_pool_launch_configs`) answers 409 when their content outside
  `workerManager` differs -- here a problem naming both paths -- and otherwise keeps the later
  entry's `workerManager`; wm keeps the later entry too, with a warning.
- `config` is kept verbatim. worker-manager's ajv (`useDefaults`) writes the lifecycle
  defaults into a given `lifecycle` object before storing it; wm applies them on reading.
- The lifecycle figures are `Provider.interpretLifecycle`'s, which uses `||`: a
  reregistrationTimeout of 0 means the default.
- A `null-provider` pool (pending deletion) takes any config object; its figures and launch
  configs are read leniently: what is well formed is used, the rest takes the defaults.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from wm.errors import WmError
from wm.kinds import KINDS
from wm.kinds.schema_parts import INITIAL_WEIGHT, INTEGER_MIN_0, INTEGER_MIN_1
from wm.pools.files import read_definitions
from wm.pools.json_check import Schema, check, json_equal
from wm.pools.schemas import (
    CONFIG_SCHEMAS,
    CREATE_BODY,
    NULL_PROVIDER,
    POOL_ID_PATTERN,
    UPDATE_BODY,
)

DEFAULT_REREGISTRATION_TIMEOUT_S = 345600  # 4 days (worker-lifecycle.yml, interpretLifecycle)
DEFAULT_QUEUE_INACTIVITY_TIMEOUT_S = 7200
DEFAULT_SCALING_RATIO = 1.0  # the estimator's default
# The launch config id of the workers of a pool no cloud launches for (a static pool).
HAND_MADE_LAUNCH_CONFIG_ID = "hand-made"


class DefinitionInvalid(WmError):
    """A definition the schemas refuse; every problem names the key path it is about."""

    def __init__(self, problems: list[str] | tuple[str, ...]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class UnknownProvider(DefinitionInvalid):
    """A well-formed definition naming no configured provider: Taskcluster's 400 InputError
    "Invalid Provider", which lists the valid provider ids."""

    def __init__(self, provider_id: str, valid_provider_ids: tuple[str, ...]) -> None:
        self.provider_id = provider_id
        self.valid_provider_ids = valid_provider_ids
        super().__init__([_unknown_provider_problem(provider_id, valid_provider_ids)])


@dataclass(frozen=True)
class Lifecycle:
    registration_timeout_s: float | None  # as given; None when the definition has none
    reregistration_timeout_s: float
    queue_inactivity_timeout_s: float

    @property
    def effective_registration_timeout_s(self) -> float:
        """Provider.interpretLifecycle: registrationTimeout when set and below the
        reregistration timeout, the reregistration timeout otherwise."""
        given = self.registration_timeout_s
        if given is not None and given < self.reregistration_timeout_s:
            return given
        return self.reregistration_timeout_s


@dataclass(frozen=True)
class LaunchConfigDefinition:
    launch_config_id: str  # workerManager.launchConfigId, or the derived `lc-…` id
    worker_group: str  # EC2 region, GCE zone, Azure location
    capacity_per_instance: int
    initial_weight: float
    max_capacity: int | None
    worker_config: Mapping[str, Any]
    # Verbatim, with workerManager.launchConfigId filled in: what the provider launches from.
    body: Mapping[str, Any]
    arm_deployment: bool = False  # Azure ARM-template form: launched as a deployment


@dataclass(frozen=True)
class PoolDefinition:
    worker_pool_id: str
    provider_id: str
    description: str
    owner: str
    email_on_error: bool
    config: Mapping[str, Any]  # verbatim, as given
    min_capacity: int
    max_capacity: int
    scaling_ratio: float
    lifecycle: Lifecycle
    launch_configs: tuple[LaunchConfigDefinition, ...] = field(default_factory=tuple)
    # Accepted but worth saying: keys wm overrides, launch configs merged by id.
    warnings: tuple[str, ...] = ()


def parse_pool_definition(
    worker_pool_id: str, body: Any, providers: Mapping[str, str], *, update: bool = False
) -> PoolDefinition:
    """Check a createWorkerPool body against Taskcluster's schemas for its provider.

    `providers` maps each configured provider id to its kind (a key of wm.kinds.KINDS);
    NULL_PROVIDER is always accepted (any config object). Raises DefinitionInvalid with every
    problem, each naming its key path (UnknownProvider when the provider is the only one).
    With `update`, checks an updateWorkerPool body, which may also hold `workerPoolId` (the
    pool's own), `created` and `lastModified` (ignored).
    """
    problems = _pool_id_problems(worker_pool_id)
    problems += check(body, UPDATE_BODY if update else CREATE_BODY)
    if not isinstance(body, Mapping):
        raise DefinitionInvalid(problems)
    given_id = body.get("workerPoolId")
    if update and isinstance(given_id, str) and given_id != worker_pool_id:
        problems.append(f"workerPoolId: must be the pool's own id {worker_pool_id!r} when given")
    kind, valid_ids = _provider_kind(body.get("providerId"), providers, problems)
    if kind is not None and isinstance(body.get("config"), Mapping):
        problems += check(body["config"], CONFIG_SCHEMAS[kind], "config")
    if valid_ids is not None:
        if not problems:
            raise UnknownProvider(body["providerId"], valid_ids)
        problems.append(_unknown_provider_problem(body["providerId"], valid_ids))
    if problems:
        raise DefinitionInvalid(problems)
    return _definition(worker_pool_id, body, kind or NULL_PROVIDER)


def parse_definition_documents(text: str, source: str) -> list[tuple[str, dict]]:
    """The worker pool definitions of a file for `wm pools apply`: a JSON object or list, or
    YAML documents (`---`) each an object or a list. Returns (workerPoolId, the rest: a
    createWorkerPool body to give parse_pool_definition) per definition, in file order.
    Raises DefinitionInvalid naming the file, the definition's number and line for bad
    syntax, a definition that is not an object, a value JSON cannot hold (YAML sets, binary,
    non-string keys), a missing workerPoolId or one defined twice in the file."""
    read = read_definitions(text, source)
    if read.problems:
        raise DefinitionInvalid(read.problems)
    return read.definitions


def _pool_id_problems(worker_pool_id: Any) -> list[str]:
    if isinstance(worker_pool_id, str) and re.fullmatch(POOL_ID_PATTERN, worker_pool_id):
        return []
    return [
        f"workerPoolId: {worker_pool_id!r} is not a worker pool id <provisionerId>/<workerType> "
        "(1-38 letters, digits, '-' or '_'; '/'; 1-38 lowercase letters, digits or '-', "
        "starting with a letter and not ending with '-')"
    ]


def _provider_kind(
    provider_id: Any, providers: Mapping[str, str], problems: list[str]
) -> tuple[str | None, tuple[str, ...] | None]:
    """The provider's config schema kind; or, when it is unknown, the valid provider ids."""
    if not isinstance(provider_id, str) or any(p.startswith("providerId:") for p in problems):
        return None, None
    if provider_id == NULL_PROVIDER:
        return NULL_PROVIDER, None
    if provider_id not in providers:
        return None, (*providers, NULL_PROVIDER)
    kind = providers[provider_id]
    if kind not in KINDS:
        raise ValueError(f"provider {provider_id!r}: kind {kind!r} is not one of {tuple(KINDS)}")
    return kind, None


def _unknown_provider_problem(provider_id: str, valid: tuple[str, ...]) -> str:
    ids = ", ".join(valid)
    return f"providerId: unknown provider {provider_id!r} (valid provider ids: {ids})"


def _definition(worker_pool_id: str, body: Mapping[str, Any], kind: str) -> PoolDefinition:
    config = copy.deepcopy(dict(body["config"]))
    warnings: list[str] = []
    if kind != NULL_PROVIDER and KINDS[kind].hand_made:
        launch_configs: tuple[LaunchConfigDefinition, ...] = (_hand_made_launch_config(config),)
    else:
        launch_configs = _launch_configs(worker_pool_id, kind, config, warnings)
    min_capacity = _lenient(config.get("minCapacity"), INTEGER_MIN_0, 0)
    max_capacity = _lenient(config.get("maxCapacity"), INTEGER_MIN_0, 0)
    # (A hand-made pool's schema has no capacities: both are 0 there.)
    if kind != NULL_PROVIDER and max_capacity < min_capacity:
        warnings.append(
            f"config.maxCapacity ({max_capacity}) is below config.minCapacity ({min_capacity}): "
            f"the pool keeps minCapacity ({min_capacity}) running anyway, as worker-manager does"
        )
    return PoolDefinition(
        worker_pool_id=worker_pool_id,
        provider_id=body["providerId"],
        description=body["description"],
        owner=body["owner"],
        email_on_error=body["emailOnError"],
        config=config,
        min_capacity=min_capacity,
        max_capacity=max_capacity,
        scaling_ratio=float(
            _lenient(config.get("scalingRatio"), {"type": "number"}, DEFAULT_SCALING_RATIO)
        ),
        lifecycle=_lifecycle(config.get("lifecycle")),
        launch_configs=launch_configs,
        warnings=tuple(warnings),
    )


def _lenient(value: Any, schema: Schema, default: Any) -> Any:
    """The value when it is well formed (past the schemas it always is), else the default:
    what a null-provider config holds is read, never checked."""
    if value is None or check(value, schema):
        return default
    return int(value) if schema.get("type") == "integer" else value


def _lifecycle(given: Any) -> Lifecycle:
    given = given if isinstance(given, Mapping) else {}
    integer: Schema = {"type": "integer"}
    reregistration = _lenient(given.get("reregistrationTimeout"), integer, None)
    inactivity = _lenient(given.get("queueInactivityTimeout"), integer, None)
    return Lifecycle(
        registration_timeout_s=_lenient(given.get("registrationTimeout"), integer, None),
        reregistration_timeout_s=reregistration or DEFAULT_REREGISTRATION_TIMEOUT_S,
        queue_inactivity_timeout_s=inactivity or DEFAULT_QUEUE_INACTIVITY_TIMEOUT_S,
    )


def _launch_configs(
    worker_pool_id: str, kind: str, config: Mapping[str, Any], warnings: list[str]
) -> tuple[LaunchConfigDefinition, ...]:
    given = config.get("launchConfigs")
    if not isinstance(given, list):
        return ()
    by_id: dict[str, tuple[int, LaunchConfigDefinition]] = {}  # id -> (first index, entry)
    problems: list[str] = []
    for index, launch_config in enumerate(given):
        path = f"config.launchConfigs[{index}]"
        if not isinstance(launch_config, Mapping):  # only a null-provider config gets here
            warnings.append(f"{path}: not an object; left out")
            continue
        entry = _launch_config(worker_pool_id, kind, launch_config)
        if kind != NULL_PROVIDER:  # a pool pending deletion is read, not judged
            warnings.extend(KINDS[kind].override_warnings(launch_config, path))
            problems += KINDS[kind].launch_config_problems(launch_config, path)
        earlier = by_id.get(entry.launch_config_id)
        if earlier is None:
            by_id[entry.launch_config_id] = (index, entry)
            continue
        first = earlier[0]
        if json_equal(
            _without_worker_manager(given[first]), _without_worker_manager(launch_config)
        ):
            warnings.append(
                f"{path}: the launch config of config.launchConfigs[{first}] (id "
                f"{entry.launch_config_id}) again; this later entry's workerManager is kept"
            )
            by_id[entry.launch_config_id] = (first, entry)
        else:
            problems.append(
                f"{path}.workerManager.launchConfigId: {entry.launch_config_id!r} is also the id "
                f"of config.launchConfigs[{first}], whose configuration differs (an id names "
                "one configuration forever)"
            )
    if problems:
        raise DefinitionInvalid(problems)
    return tuple(entry for _, entry in sorted(by_id.values(), key=lambda pair: pair[0]))


def _hand_made_launch_config(config: Mapping[str, Any]) -> LaunchConfigDefinition:
    """The one launch config of a pool whose workers no cloud launches (a static pool): the
    row its workers belong to, holding the pool's workerConfig, which registration hands them.
    Its id never changes, so a new workerConfig updates it in place and no worker is told its
    launch config was archived; it launches nothing (its kind's providers get no pass)."""
    worker_config = config.get("workerConfig")
    return LaunchConfigDefinition(
        launch_config_id=HAND_MADE_LAUNCH_CONFIG_ID,
        worker_group="",
        capacity_per_instance=1,
        initial_weight=0.0,
        max_capacity=0,
        worker_config=worker_config if isinstance(worker_config, Mapping) else {},
        body={"workerManager": {"launchConfigId": HAND_MADE_LAUNCH_CONFIG_ID}},
    )


def _launch_config(
    pool_id: str, kind: str, launch_config: Mapping[str, Any]
) -> LaunchConfigDefinition:
    manager = launch_config.get("workerManager")
    manager = manager if isinstance(manager, Mapping) else {}
    given_id = manager.get("launchConfigId")
    if isinstance(given_id, str):
        launch_config_id = given_id
    else:
        launch_config_id = derive_launch_config_id(pool_id, launch_config)
    capacity = _lenient(manager.get("capacityPerInstance"), INTEGER_MIN_1, None)
    if capacity is None:  # the deprecated top-level key, then 1
        capacity = _lenient(launch_config.get("capacityPerInstance"), INTEGER_MIN_1, 1)
    worker_config = launch_config.get("workerConfig")
    return LaunchConfigDefinition(
        launch_config_id=launch_config_id,
        worker_group=_worker_group(kind, launch_config),
        capacity_per_instance=capacity,
        initial_weight=float(_lenient(manager.get("initialWeight"), INITIAL_WEIGHT, 1)),
        max_capacity=_lenient(manager.get("maxCapacity"), INTEGER_MIN_0, None),
        worker_config=worker_config if isinstance(worker_config, Mapping) else {},
        body={**launch_config, "workerManager": {**manager, "launchConfigId": launch_config_id}},
        arm_deployment=_template_form(kind, launch_config),
    )


def _worker_group(kind: str, launch_config: Mapping[str, Any]) -> str:
    """Where worker-manager takes the worker group from (the kind's description says: the
    region on EC2, the zone on GCE, the location or ARM `location` parameter on Azure); for a
    null-provider pool, whichever kind's key is there."""
    if kind == NULL_PROVIDER:
        candidates = [c for d in KINDS.values() for c in d.worker_group_guesses(launch_config)]
    else:
        candidates = [KINDS[kind].worker_group(launch_config)]
    return next((c for c in candidates if isinstance(c, str)), "")


def _template_form(kind: str, launch_config: Mapping[str, Any]) -> bool:
    """Launched as a template deployment; a null-provider pool's as any kind would."""
    if kind == NULL_PROVIDER:
        return any(d.template_form(launch_config) for d in KINDS.values())
    return KINDS[kind].template_form(launch_config)


def _without_worker_manager(launch_config: Any) -> Any:
    if not isinstance(launch_config, Mapping):
        return launch_config
    return {k: v for k, v in launch_config.items() if k != "workerManager"}


# Launch config ids: db version 0105's get_or_create_launch_config_id, which hashes the
# Postgres jsonb text of the launch config without workerManager.


def derive_launch_config_id(worker_pool_id: str, launch_config: Mapping[str, Any]) -> str:
    """The id worker-manager derives for a launch config without workerManager.launchConfigId:
    `'lc-' || left(md5(worker_pool_id || (config - 'workerManager')::text), 20)`."""
    text = worker_pool_id + jsonb_text(_without_worker_manager(launch_config))
    return "lc-" + hashlib.md5(text.encode("utf-8")).hexdigest()[:20]


def jsonb_text(value: Any) -> str:
    """The text Postgres prints for `value` stored as jsonb the way worker-manager stores it.

    jsonb orders an object's keys by their UTF-8 length, then bytewise, and separates with
    `", "` and `": "`. Numbers reach Postgres as JavaScript's JSON.stringify wrote them (every
    number a double, in its shortest form) and come back as numeric prints them: plain
    decimal notation, no exponent, no trailing zeros in a fraction.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _jsonb_string(value)
    if isinstance(value, int | float):
        return _jsonb_number(value)
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: (len(k.encode("utf-8")), k.encode("utf-8")))
        return "{" + ", ".join(f"{_jsonb_string(k)}: {jsonb_text(value[k])}" for k in keys) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(jsonb_text(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


_JSONB_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _jsonb_string(text: str) -> str:
    """Postgres's escape_json: the short escapes, \\u00xx for other control characters."""

    def escape(char: str) -> str:
        if char in _JSONB_ESCAPES:
            return _JSONB_ESCAPES[char]
        return f"\\u{ord(char):04x}" if char < " " else char

    return '"' + "".join(escape(c) for c in text) + '"'


def _jsonb_number(value: float) -> str:
    try:
        double = float(value)
    except OverflowError:
        return "null"  # JavaScript reads it as Infinity, which JSON.stringify writes as null
    if not math.isfinite(double):
        return "null"
    if double == 0:
        return "0"  # JSON.stringify(-0) is "0"
    text = format(Decimal(repr(double)), "f")  # repr: the shortest digits, as JavaScript's
    return text.rstrip("0").rstrip(".") if "." in text else text
