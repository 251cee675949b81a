"""An endpoint's scope check: public, refused, insufficient, allowed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wm.api.endpoint_table import BY_NAME
from wm.tc.authorize import authorize
from wm.tc.errors import TaskclusterError
from wm.tc.hawk import Authenticated, AuthenticationFailed

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PARAMS = {"workerPoolId": "proj/ci", "workerGroup": "g", "workerId": "w"}
WORKER = Authenticated(
    "worker/aws/proj/ci/g/w",
    "hawk",
    ("worker-manager:reregister-worker:proj/ci/g/w", "assume:anonymous"),
    NOW,
)
ANONYMOUS = Authenticated(None, "none", ("assume:anonymous",), NOW)


def never_called() -> Authenticated:
    raise AssertionError("a public endpoint must not authenticate")


def refused() -> Authenticated:
    raise AuthenticationFailed("Unauthorized: Bad mac")


def test_a_public_endpoint_never_authenticates():
    assert authorize(BY_NAME["registerWorker"].scopes, {}, never_called) is None


def test_a_worker_reregisters_itself():
    assert authorize(BY_NAME["reregisterWorker"].scopes, PARAMS, lambda: WORKER) is WORKER


def test_refused_credentials_are_a_401_asking_for_hawk():
    with pytest.raises(TaskclusterError) as error:
        authorize(BY_NAME["reregisterWorker"].scopes, PARAMS, refused)
    assert (error.value.code, error.value.status) == ("AuthenticationFailed", 401)
    assert error.value.headers == {"www-authenticate": "hawk"}
    assert error.value.message == "Unauthorized: Bad mac"


def test_another_workers_scope_is_a_403_naming_the_missing_scope():
    other = PARAMS | {"workerId": "w2"}
    with pytest.raises(TaskclusterError) as error:
        authorize(BY_NAME["removeWorker"].scopes, other, lambda: WORKER)
    assert (error.value.code, error.value.status) == ("InsufficientScopes", 403)
    assert error.value.details == {
        "required": "worker-manager:remove-worker:proj/ci/g/w2",
        "unsatisfied": "worker-manager:remove-worker:proj/ci/g/w2",
    }
    assert error.value.message.startswith("Client ID worker/aws/proj/ci/g/w does not have")


def test_without_credentials_the_403_asks_for_credentials():
    with pytest.raises(TaskclusterError) as error:
        authorize(BY_NAME["listWorkerPools"].scopes, {}, lambda: ANONYMOUS)
    assert error.value.code == "InsufficientScopes"
    assert error.value.message.startswith("This request requires Taskcluster credentials")
