"""Validating answers against Taskcluster's own rendered schemas (tests/fixtures/tc_schemas)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

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
