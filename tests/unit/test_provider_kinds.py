"""The contract every provider kind keeps: its description in wm.kinds.KINDS has every part,
each well formed, and its package wm.providers.<kind> does what the description promises. A
kind that lacks a part fails here, by name, instead of falling back to another kind's value."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin

import pytest

from wm.calls import CallClass
from wm.config.base import BudgetLimit, ProviderConfigBase
from wm.config.loader import ProviderConfig
from wm.kinds import KINDS, BootFacts, KindDescription, describe
from wm.kinds.base import ONCE, WHILE_RUNNING
from wm.kinds.gcp import GcpProviderConfig
from wm.pools.definition import DefinitionInvalid, parse_pool_definition
from wm.pools.json_check import check
from wm.pools.schemas import CONFIG_SCHEMAS

# The keywords wm.pools.json_check interprets (its module docstring): a schema using any other would
# be checked as if the keyword were not there.
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "uniqueItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "enum",
        "allOf",
        "oneOf",
        "forbidden",
        "notAllOf",
        "hint",
        "pick",
        "none",
        "both",
    }
)
# Taskcluster worker-manager's provider types (services/worker-manager/src/providers/index.js)
TASKCLUSTER_PROVIDER_TYPES = frozenset({"aws", "google", "azure", "static", "testing"})
FACTS = BootFacts(
    root_url="https://tc.example.com",
    pool_id="proj/pool",
    provider_id="cloud-1",
    worker_group="group-1",
    launch_config_id="lc-1",
    worker_config={"a": 1},
    owner="someone@example.com",
)
SDK_ROOTS = ("boto3", "botocore", "google.cloud", "google.api_core", "azure")


def schema_problems(schema: Any, path: str = "schema") -> list[str]:
    """Keywords wm.pools.json_check does not know, anywhere in a schema."""
    if not isinstance(schema, Mapping):
        return [f"{path}: not a schema object"]
    problems = [f"{path}.{key}: unknown keyword" for key in schema if key not in SCHEMA_KEYWORDS]
    for name, sub in (schema.get("properties") or {}).items():
        problems += schema_problems(sub, f"{path}.properties.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            problems += schema_problems(schema[key], f"{path}.{key}")
    for key in ("allOf", "oneOf"):
        for index, sub in enumerate(schema.get(key, ())):
            problems += schema_problems(sub, f"{path}.{key}[{index}]")
    return problems


# The parts a kind no scanner lists (its description's `scanned` is False: static) has
# nothing for, and what they must be then: no budgets, no create batch.
NOT_SCANNED_PARTS: Mapping[str, Any] = {"published_budgets": {}, "create_batch_max": 0}


def _part_problem(
    field: dataclasses.Field[Any], value: Any, description: KindDescription
) -> str | None:
    """What is wrong with one part, judged by the type the description declares for it."""
    declared = typing.get_type_hints(KindDescription)[field.name]
    origin = get_origin(declared) or declared
    if not description.scanned and field.name in NOT_SCANNED_PARTS:
        empty = NOT_SCANNED_PARTS[field.name]
        return None if value == empty else f"must be {empty!r}: no scanner lists the kind"
    if origin is bool:
        return None if isinstance(value, bool) else "must be a boolean"
    if field.name == "pool_config_schema":
        if not description.hand_made:
            return None if value is None else "must be None: the launch configs' schema is used"
        return None if isinstance(value, Mapping) and value else "must be the pool config schema"
    if origin is str:
        return None if isinstance(value, str) and value else "must be a non-empty string"
    if origin is int:
        return None if isinstance(value, int) and value > 0 else "must be a positive integer"
    if origin is type:
        ok = isinstance(value, type) and issubclass(value, ProviderConfigBase)
        return None if ok else "must be a ProviderConfigBase model"
    if origin is Mapping:
        return None if isinstance(value, Mapping) and value else "must be a non-empty mapping"
    if origin is Callable:
        return None if callable(value) else "must be callable"
    return f"has a type the contract does not know ({declared}): teach it here"


def kind_problems(key: str, description: KindDescription) -> list[str]:
    """Everything a kind's description lacks or gets wrong, each `kind.part: what`."""
    problems = []
    for field in dataclasses.fields(KindDescription):
        problem = _part_problem(field, getattr(description, field.name), description)
        if problem:
            problems.append(f"{key}.{field.name}: {problem}")
    if problems:
        return problems  # the checks below read the parts
    if description.name != key:
        problems.append(f"{key}.name: {description.name!r} is not its key in KINDS")
    literal = description.config_model.model_fields["kind"].annotation
    if get_args(literal) != (key,):
        problems.append(f"{key}.config_model: its `kind` is {literal}, not Literal[{key!r}]")
    if description.config_model.published_budgets is not description.published_budgets:
        problems.append(f"{key}.config_model: its published_budgets are not the description's")
    for call_class, limit in description.published_budgets.items():
        if type(call_class) is not CallClass or not isinstance(limit, BudgetLimit):
            problems.append(f"{key}.published_budgets: {call_class!r} is not CallClass->limit")
    if description.provider_type not in TASKCLUSTER_PROVIDER_TYPES:
        problems.append(f"{key}.provider_type: {description.provider_type!r} is not Taskcluster's")
    problems += [
        f"{key}.launch_config_{p}" for p in schema_problems(description.launch_config_schema)
    ]
    if description.pool_config_schema is not None:
        problems += [
            f"{key}.pool_config_{p}" for p in schema_problems(description.pool_config_schema)
        ]
    return problems


SCANNED = [key for key, d in KINDS.items() if d.scanned]
HAND_MADE = [key for key, d in KINDS.items() if d.hand_made]


@pytest.mark.parametrize("key", list(KINDS))
def test_every_kind_has_every_part(key: str):
    assert kind_problems(key, KINDS[key]) == []


def test_a_description_lacking_parts_is_named_part_by_part():
    aws = KINDS["aws"]
    incomplete = dataclasses.replace(
        aws, proof_rejected="", published_budgets={}, create_batch_max=0, boot_data=None
    )

    assert kind_problems("aws", incomplete) == [
        "aws.published_budgets: must be a non-empty mapping",
        "aws.create_batch_max: must be a positive integer",
        "aws.proof_rejected: must be a non-empty string",
        "aws.boot_data: must be callable",
    ]


def test_a_description_borrowing_another_kinds_parts_is_refused():
    borrowed = dataclasses.replace(KINDS["aws"], config_model=GcpProviderConfig)

    assert kind_problems("aws", borrowed) == [
        "aws.config_model: its `kind` is typing.Literal['gcp'], not Literal['aws']",
        "aws.config_model: its published_budgets are not the description's",
    ]


def test_a_schema_with_a_keyword_the_checker_ignores_is_refused():
    typo = dataclasses.replace(
        KINDS["gcp"], launch_config_schema={"type": "object", "requried": ["zone"]}
    )

    assert kind_problems("gcp", typo) == ["gcp.launch_config_schema.requried: unknown keyword"]


def test_a_kind_no_scanner_lists_with_budgets_or_a_batch_is_refused():
    static = KINDS["static"]
    launching_parts = dataclasses.replace(
        static, published_budgets=KINDS["aws"].published_budgets, create_batch_max=5
    )

    assert kind_problems("static", launching_parts)[:2] == [
        "static.published_budgets: must be {}: no scanner lists the kind",
        "static.create_batch_max: must be 0: no scanner lists the kind",
    ]


@pytest.mark.parametrize("key", sorted(KINDS))
def test_a_kinds_workers_come_from_a_cloud_it_scans_or_from_create_worker_never_both(key: str):
    # wm knows two ways a worker comes to be: a cloud it scans launches it (a VM registers
    # once, from requested), or createWorker makes it (running, registering as it restarts).
    description = KINDS[key]

    assert description.scanned is not description.hand_made
    assert description.registration == (WHILE_RUNNING if description.hand_made else ONCE)


def test_an_unknown_kind_fails_loudly_naming_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown provider kind 'testing'.*'aws'"):
        describe("testing")


@pytest.mark.parametrize("key", list(KINDS))
def test_every_kind_is_a_member_of_the_config_union(key: str):
    (union, *_) = get_args(ProviderConfig)
    assert KINDS[key].config_model in get_args(union)


@pytest.mark.parametrize("key", SCANNED)
def test_every_kind_has_a_package_that_makes_its_provider_and_verifier(key: str):
    package = importlib.import_module(f"wm.providers.{key}")

    assert callable(package.make)
    assert callable(package.make_verifier)


@pytest.mark.parametrize("key", HAND_MADE)
def test_a_hand_made_kind_has_a_verifier_and_no_provider(key: str):
    package = importlib.import_module(f"wm.providers.{key}")

    assert callable(package.make_verifier)
    assert not hasattr(package, "make")


@pytest.mark.parametrize("key", HAND_MADE)
def test_a_hand_made_kind_takes_its_own_pool_config_and_no_launch_configs(key: str):
    body = {
        "providerId": "hand-1",
        "description": "",
        "owner": "someone@example.com",
        "emailOnError": False,
        "config": {"lifecycle": {"reregistrationTimeout": 3600}, "workerConfig": {"a": 1}},
    }
    definition = parse_pool_definition("proj/pool", body, {"hand-1": key})
    body["config"] = {"minCapacity": 0, "maxCapacity": 1, "launchConfigs": []}

    with pytest.raises(DefinitionInvalid) as refused:
        parse_pool_definition("proj/pool", body, {"hand-1": key})

    assert [lc.worker_config for lc in definition.launch_configs] == [{"a": 1}]
    assert definition.lifecycle.reregistration_timeout_s == 3600
    assert list(refused.value.problems) == [
        "config.minCapacity: unknown key (allowed: lifecycle, workerConfig)",
        "config.maxCapacity: unknown key (allowed: lifecycle, workerConfig)",
        "config.launchConfigs: unknown key (allowed: lifecycle, workerConfig)",
    ]


@pytest.mark.parametrize("key", SCANNED)
def test_every_kinds_pool_schema_is_the_one_definitions_are_checked_against(key: str):
    body = {
        "providerId": "cloud-1",
        "description": "",
        "owner": "someone@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 1, "launchConfigs": []},
    }
    parse_pool_definition("proj/pool", body, {"cloud-1": key})  # no launch config: loads
    body["config"]["launchConfigs"] = [{"workerConfig": {}, "x": {}}]

    with pytest.raises(DefinitionInvalid) as refused:
        parse_pool_definition("proj/pool", body, {"cloud-1": key})

    expected = check(body["config"], CONFIG_SCHEMAS[key], "config")
    assert expected and list(refused.value.problems) == expected
    assert all(p.startswith("config.launchConfigs[0]") for p in expected)


@pytest.mark.parametrize("key", list(KINDS))
def test_every_kinds_boot_data_tells_worker_runner_where_it_belongs(key: str):
    data = KINDS[key].boot_data(FACTS)

    told = set(map(str, data.values()))
    assert {FACTS.root_url, FACTS.pool_id, FACTS.provider_id, FACTS.worker_group} <= told


@pytest.mark.parametrize("key", list(KINDS))
def test_every_kinds_launch_config_judgements_take_any_launch_config(key: str):
    description = KINDS[key]
    for launch_config in ({}, {"armDeployment": {}}, {"launchConfig": {"UserData": "x"}}):
        assert isinstance(description.template_form(launch_config), bool)
        for judge in (description.override_warnings, description.launch_config_problems):
            notes = judge(launch_config, "config.launchConfigs[0]")
            assert all(n.startswith("config.launchConfigs[0].") for n in notes)


# What each kind's package imports: never another cloud's SDK, and its own only when a
# provider builds its clients. A scanner for one cloud then never loads the other clouds' SDKs.
_LOADED_SDKS = """
import sys
import procs.provisioner, procs.scanner, procs.web
from wm.providers import kind_package
for kind in {kinds!r}:
    kind_package(kind)
roots = {roots!r}
print(sorted(m for m in sys.modules if any(m == r or m.startswith(r + ".") for r in roots)))
"""


def test_importing_every_kinds_package_loads_no_cloud_sdk():
    script = _LOADED_SDKS.format(kinds=list(KINDS), roots=SDK_ROOTS)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)

    assert run.stdout.strip() == "[]"
