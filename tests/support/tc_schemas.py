"""Validating answers against Taskcluster's own rendered schemas (tests/fixtures/tc_schemas), and
Taskcluster's verdict on a request body: its schema with ajv's formats."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from wm.pools.json_check import is_date_time

SCHEMAS = Path(__file__).resolve().parent.parent / "fixtures" / "tc_schemas"


@functools.cache
def _registry() -> Registry:
    resources = []
    for path in SCHEMAS.glob("*.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"].rstrip("#"), Resource(schema, specification=DRAFT7)))
    return Registry().with_resources(resources)


def check(name: str, answer: Any) -> Any:
    """Raise unless `answer` is valid for schema `name` (e.g. "worker-full"); returns it."""
    schema = json.loads((SCHEMAS / f"{name}.json").read_text())
    validator = jsonschema.Draft7Validator(
        schema, registry=_registry(), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    validator.validate(answer)
    return answer


# ajv-formats 2.1.1 "full" email, verbatim (JavaScript's `$` is Python's `\Z`).
AJV_EMAIL = re.compile(
    r"^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\Z",
    re.I | re.ASCII,
)


@functools.cache
def _ajv_formats() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("email")(lambda s: not isinstance(s, str) or bool(AJV_EMAIL.match(s)))
    checker.checks("date-time")(lambda s: not isinstance(s, str) or is_date_time(s))
    return checker


def taskcluster_errors(name: str, value: Any) -> list[str]:
    """What worker-manager's validator says of `value` against schema `name`, one line per
    error (`path: message`); empty when it accepts. Python's `re.search` stands in for ajv's
    regular expressions: they differ on a value ending in a newline (JavaScript's `$` matches
    only at the end), so such values need a verdict of their own."""
    schema = json.loads((SCHEMAS / f"{name}.json").read_text())
    validator = jsonschema.Draft7Validator(
        schema, registry=_registry(), format_checker=_ajv_formats()
    )
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)
    ]
