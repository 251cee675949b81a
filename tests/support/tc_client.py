"""What tests of the worker-manager API need around the real `taskcluster` client: how it
reports a refusal, and credentials wm would issue but whose time is over."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import taskcluster

from wm.tc.credentials import IssuerCredentials, worker_credentials


def refused(call: Callable[[], Any]) -> tuple[int, str]:
    """Make a call the API must refuse; return its status and Taskcluster error code."""
    failures = (
        taskcluster.exceptions.TaskclusterRestFailure,
        taskcluster.exceptions.TaskclusterAuthFailure,
    )
    with pytest.raises(failures) as failure:
        call()
    return failure.value.status_code, failure.value.body["code"]


def expired_worker_credentials(
    issuer: IssuerCredentials, provider_id: str, pool_id: str, group: str, worker_id: str
) -> dict[str, str]:
    """A worker's credentials as wm issues them, signed by `issuer`, expired an hour ago."""
    now = datetime.now(UTC)
    return worker_credentials(
        issuer,
        provider_id=provider_id,
        worker_pool_id=pool_id,
        worker_group=group,
        worker_id=worker_id,
        expires=now - timedelta(hours=1),
        now=now - timedelta(hours=2),
    ).as_json()
