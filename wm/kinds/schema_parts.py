"""The building blocks of Taskcluster's worker pool schemas (services/worker-manager/schemas/
constants.yml and the lc-* entries), as data for wm.pools.json_check: each kind's launch config
schema (wm/kinds/<kind>.py) and the pool and request schemas (wm.pools.schemas) are made of
them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from wm.pools.json_check import Schema

ID_MAX_CHARS = 38
MAX_REREGISTRATION_TIMEOUT_S = 2592000  # 30 days: credentials live no longer

IDENTIFIER: Schema = {
    "type": "string",
    "pattern": r"[a-zA-Z0-9_-]*",
    "minLength": 1,
    "maxLength": ID_MAX_CHARS,
    "hint": "must be 1 to 38 letters, digits, '-' or '_'",
}
INTEGER_MIN_0: Schema = {"type": "integer", "minimum": 0}
INTEGER_MIN_1: Schema = {"type": "integer", "minimum": 1}
INITIAL_WEIGHT: Schema = {"type": "number", "minimum": 0, "maximum": 1}
OBJECT: Schema = {"type": "object"}
STRING: Schema = {"type": "string"}
ARRAY: Schema = {"type": "array"}
BOOLEAN: Schema = {"type": "boolean"}
UNIQUE_STRINGS: Schema = {"type": "array", "uniqueItems": True, "items": STRING}


def closed(properties: Mapping[str, Schema], **more: Any) -> Schema:
    """An object holding only these properties."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **more}


def holds(key: str, *, without: str = "") -> Callable[[Any], bool]:
    return lambda v: isinstance(v, Mapping) and key in v and not (without and without in v)


def worker_manager(**extra: Schema) -> Schema:
    """A launch config's `workerManager` section (the constants' lc-* entries)."""
    return closed(
        {
            "launchConfigId": IDENTIFIER,
            "capacityPerInstance": INTEGER_MIN_1,
            "initialWeight": INITIAL_WEIGHT,
            "maxCapacity": INTEGER_MIN_0,
            **extra,
        }
    )
