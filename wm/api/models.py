"""Request and response bodies of the worker API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ID = Field(min_length=1, max_length=200)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RegisterRequest(_Body):
    pool_id: str = ID
    provider_id: str = ID
    worker_group: str = ID
    worker_id: str = ID
    identity_proof: dict[str, Any]


class RegisterResponse(_Body):
    worker_id: str
    secret: str  # present once; only its hash is stored
    expires: datetime  # re-register before this
    worker_config: dict[str, Any]


class ReregisterRequest(_Body):
    pool_id: str = ID
    worker_group: str = ID
    worker_id: str = ID
    secret: str = Field(min_length=1, max_length=200)


class ReregisterResponse(_Body):
    worker_id: str
    secret: str
    expires: datetime


class ShouldTerminateResponse(_Body):
    should_terminate: bool
    reason: str | None = None


class WorkerErrorReport(_Body):
    worker_id: str = ID
    title: str = Field(min_length=1, max_length=500)
    description: str = Field(default="", max_length=10_000)
    extra: dict[str, Any] = Field(default_factory=dict)


class Problem(_Body):
    """Every error answer: a stable code and a message naming what is wrong."""

    code: str
    message: str
