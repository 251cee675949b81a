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

from pydantic import BaseModel, ConfigDict, Field, field_validator

ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"  # no control characters
ID_MAX_CHARS = 200
ID = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def unstorable(value: Any) -> str | None:
    """Why Postgres could not store `value` as text or JSONB (naming where inside it), or None.
    Never quotes the value. Iterative: a body nested as deep as the JSON parser allows must not
    exhaust the stack."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        where, item = pending.pop()
        at = f" (at {where})" if where else ""
        if isinstance(item, str) and "\x00" in item:
            return f"text must not contain NUL characters{at}"
        if isinstance(item, float) and not math.isfinite(item):
            return f"numbers must be finite{at}"
        if isinstance(item, dict):
            for key, inner in item.items():
                if "\x00" in key:
                    return f"keys must not contain NUL characters{at}"
                pending.append((f"{where}.{key}" if where else key, inner))
        elif isinstance(item, list):
            pending.extend((f"{where}[{i}]", inner) for i, inner in enumerate(item))
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

    @field_validator("title", "description", "extra")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        problem = unstorable(value)
        if problem:
            raise ValueError(problem)
        return value


class Problem(_Body):
    """Every error answer: a stable code and a message naming what is wrong."""

    code: str
    message: str
