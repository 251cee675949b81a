"""Request and response bodies of the worker API.

Every value a request stores or looks up must be one Postgres takes as it is: text there cannot
hold NUL, and JSONB holds neither NUL nor NaN nor infinities. Such input is a 400 here, not a
driver error (a 500) later. Ids refuse every control character. Identity proofs are never
stored: whatever they hold is the verifier's to refuse, with the same answer for every proof.
Secrets and proofs are left out of the models' reprs, so no traceback or error report shows one.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"  # no control characters
ID_MAX_CHARS = 200
ID = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def unstorable(value: Any) -> str | None:
    """Why Postgres could not store `value` as text or JSONB, or None. Never quotes it.
    Iterative: a body nested as deep as the JSON parser allows must not exhaust the stack."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str) and "\x00" in item:
            return "text must not contain NUL characters"
        if isinstance(item, float) and not math.isfinite(item):
            return "numbers must be finite"
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return None


class RegisterRequest(_Body):
    pool_id: str = ID
    provider_id: str = ID
    worker_group: str = ID
    worker_id: str = ID
    identity_proof: dict[str, Any] = Field(repr=False)


class RegisterResponse(_Body):
    worker_id: str
    secret: str = Field(repr=False)  # present once; only its hash is stored
    expires: datetime  # re-register before this
    worker_config: dict[str, Any]


class ReregisterRequest(_Body):
    pool_id: str = ID
    worker_group: str = ID
    worker_id: str = ID
    secret: str = Field(min_length=1, max_length=200, repr=False)


class ReregisterResponse(_Body):
    worker_id: str
    secret: str = Field(repr=False)
    expires: datetime


class ShouldTerminateResponse(_Body):
    should_terminate: bool
    reason: str | None = None


class WorkerErrorReport(_Body):
    worker_id: str = ID
    title: str = Field(min_length=1, max_length=500)
    description: str = Field(default="", max_length=10_000)
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        problem = unstorable(data)
        if problem:
            raise ValueError(problem)
        return data


class Problem(_Body):
    """Every error answer: a stable code and a message naming what is wrong."""

    code: str
    message: str
