"""registerWorker's policy as a table: what the database holds of the named pool and worker,
what the registration claims, and the refusal (worker-manager's code and words) or the identity
its proof must then show."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from wm.model import WorkerRecord, WorkerState
from wm.take_over.registration import Signer, reregisters_on_its_credentials
from wm.workers.identity import ExpectedIdentity
from wm.workers.registration_policy import (
    Deployment,
    Refusal,
    RegistrationRequest,
    RegistrationTarget,
    decide,
    proof_rejected,
)

WRITTEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
DEPLOYMENT = Deployment(
    deployment_id="dep-1",
    audience="https://tc.example",
    verifiable_providers={"aws-a", "gcp-a", "rack"},
    provider_kinds={"aws-a": "aws", "gcp-a": "gcp", "rack": "static"},
)
REQUEST = RegistrationRequest(
    pool_id="proj/linux", provider_id="aws-a", worker_group="us-east-1", worker_id="i-0abc"
)
WORKER = WorkerRecord(
    worker_id="w-key-1",
    pool_id="proj/linux",
    worker_group="us-east-1",
    provider_id="aws-a",
    state=WorkerState.REQUESTED,
    capacity=1,
    launch_config_id="lc-1",
    created=WRITTEN,
    last_modified=WRITTEN,
    idempotency_token="tok",
    cloud_id="i-0abc",
    tc_worker_id="i-0abc",
    provider_data={"imageId": "ami-1"},
)
TARGET = RegistrationTarget(
    pool_exists=True,
    worker=WORKER,
    pool_provider_id="aws-a",
    reregistration_timeout_s=3600.0,
    worker_config={"a": 1},
)
# A worker createWorker made on a static provider: running from the start, no cloud id.
HAND_MADE = replace(
    WORKER,
    worker_id="proj/mac/rack-a/mac-1",
    pool_id="proj/mac",
    worker_group="rack-a",
    provider_id="rack",
    state=WorkerState.RUNNING,
    launch_config_id="hand-made",
    cloud_id=None,
    tc_worker_id="mac-1",
    provider_data={"staticSecretSha256": "abc"},
)
STATIC_TARGET = replace(TARGET, worker=HAND_MADE, pool_provider_id="rack")
STATIC_REQUEST = RegistrationRequest(
    pool_id="proj/mac", provider_id="rack", worker_group="rack-a", worker_id="mac-1"
)


@pytest.mark.parametrize(
    ("scenario", "target", "request_", "code", "message"),
    [
        (
            "the pool does not exist",
            RegistrationTarget(pool_exists=False, worker=None),
            REQUEST,
            "ResourceNotFound",
            "Worker pool does not exist",
        ),
        (
            "no verifier is configured for the provider",
            TARGET,
            replace(REQUEST, provider_id="azure-z"),
            "ResourceNotFound",
            "Provider does not exist",
        ),
        (
            "the pool holds no such worker",
            replace(TARGET, worker=None),
            REQUEST,
            "ResourceNotFound",
            "Worker not found",
        ),
        (
            "the pool uses another provider",
            replace(TARGET, pool_provider_id="gcp-a"),
            REQUEST,
            "InputError",
            "Worker pool does not use this provider",
        ),
        (
            "the pool was deleted and never used the provider",
            replace(TARGET, pool_provider_id=None, previous_provider_ids=("gcp-a",)),
            REQUEST,
            "InputError",
            "Worker pool does not use this provider",
        ),
        (
            "the registration deadline passed",
            replace(TARGET, expired=True),
            REQUEST,
            "InputError",
            "Worker has expired",
        ),
        (
            "the worker was launched by another provider of the pool",
            replace(
                TARGET,
                previous_provider_ids=("gcp-a",),
                worker=replace(WORKER, provider_id="aws-a"),
            ),
            replace(REQUEST, provider_id="gcp-a"),
            "InputError",
            "Worker does not belong to this provider",
        ),
        (
            "the worker is already running",
            replace(TARGET, worker=replace(WORKER, state=WorkerState.RUNNING)),
            REQUEST,
            "InputError",
            "This worker is either stopped or running",
        ),
        (
            "the worker was stopped",
            replace(TARGET, worker=replace(WORKER, state=WorkerState.STOPPED)),
            REQUEST,
            "InputError",
            "This worker is either stopped or running",
        ),
        (
            # worker-manager's order: the pool is judged before the provider is looked up.
            "an unknown pool and an unknown provider",
            RegistrationTarget(pool_exists=False, worker=None),
            replace(REQUEST, provider_id="azure-z"),
            "ResourceNotFound",
            "Worker pool does not exist",
        ),
        (
            "a static worker that was removed",
            replace(STATIC_TARGET, worker=replace(HAND_MADE, state=WorkerState.STOPPED)),
            STATIC_REQUEST,
            "InputError",
            "worker is not running",
        ),
        (
            "a static worker past its expires",
            replace(STATIC_TARGET, expired=True),
            STATIC_REQUEST,
            "InputError",
            "Worker has expired",
        ),
        (
            "a static worker claimed through a cloud provider of the pool",
            replace(STATIC_TARGET, previous_provider_ids=("aws-a",)),
            replace(STATIC_REQUEST, provider_id="aws-a"),
            "InputError",
            "Worker does not belong to this provider",
        ),
        (
            # ...and the deadline before the state: an expired running worker is "expired".
            "an expired worker already running",
            replace(TARGET, expired=True, worker=replace(WORKER, state=WorkerState.RUNNING)),
            REQUEST,
            "InputError",
            "Worker has expired",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_a_registration_is_refused_with_worker_managers_words(
    scenario, target, request_, code, message
):
    assert decide(target, request_, DEPLOYMENT) == Refusal(code, message), scenario


@pytest.mark.parametrize(
    ("scenario", "target", "request_"),
    [
        ("a requested worker of its pool's provider", TARGET, REQUEST),
        (
            "a worker of the provider a deleted pool moved away from (it drains)",
            replace(TARGET, pool_provider_id=None, previous_provider_ids=("aws-a",)),
            REQUEST,
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_an_accepted_registration_names_the_identity_its_proof_must_show(
    scenario, target, request_
):
    assert decide(target, request_, DEPLOYMENT) == ExpectedIdentity(
        deployment_id="dep-1",
        provider_id="aws-a",
        pool_id="proj/linux",
        worker_id="w-key-1",
        region="us-east-1",
        cloud_id="i-0abc",
        tc_worker_id="i-0abc",
        audience="https://tc.example",
        provider_data={"imageId": "ami-1"},
        requested_at=WRITTEN,
    ), scenario


def test_a_running_static_worker_registers_and_again_after_a_restart():
    expected = decide(STATIC_TARGET, STATIC_REQUEST, DEPLOYMENT)
    again = decide(
        replace(STATIC_TARGET, worker=replace(HAND_MADE, registered_at=WRITTEN)),
        STATIC_REQUEST,
        DEPLOYMENT,
    )

    assert isinstance(expected, ExpectedIdentity) and isinstance(again, ExpectedIdentity)
    assert (expected.worker_id, expected.provider_data) == (
        "proj/mac/rack-a/mac-1",
        {"staticSecretSha256": "abc"},
    )


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("aws", "Instance identity document validation error"),
        ("gcp", "Token validation error"),
        ("azure", "Signature validation error"),
        ("static", "bad staticSecret in workerIdentityProof"),
        (None, "Invalid proof"),
    ],
)
def test_a_refused_proof_is_answered_in_its_kinds_words(kind, message):
    assert proof_rejected(kind) == Refusal("InputError", message)


# -- an imported worker (wm.take_over.marks): made by a legacy worker-manager, moved to wm ---------

ISSUER = "static/taskcluster/worker-manager"
IMPORTED = replace(
    WORKER,
    worker_id="proj/linux/us-east-1/i-0abc",
    state=WorkerState.RUNNING,
    cloud_id=None,  # no scan has adopted its VM yet
    provider_data={"importedFrom": "https://tc.example.com"},
)
ITS_CLIENT = "worker/aws-a/proj/linux/us-east-1/i-0abc"


def test_an_imported_worker_not_yet_registered_proves_the_id_worker_manager_gave_it():
    waiting = replace(TARGET, worker=replace(IMPORTED, state=WorkerState.REQUESTED))

    expected = decide(waiting, REQUEST, DEPLOYMENT)

    assert isinstance(expected, ExpectedIdentity)
    assert (expected.cloud_id, expected.tc_worker_id, expected.region) == (
        "i-0abc",
        "i-0abc",
        "us-east-1",
    )
    assert expected.worker_id == "proj/linux/us-east-1/i-0abc"


def test_a_worker_wm_launched_still_needs_its_recorded_cloud_id():
    unresolved = replace(TARGET, worker=replace(WORKER, cloud_id=None))

    expected = decide(unresolved, REQUEST, DEPLOYMENT)

    assert isinstance(expected, ExpectedIdentity) and expected.cloud_id is None


@pytest.mark.parametrize(
    ("scenario", "worker", "signer", "accepted"),
    [
        ("its own credentials", IMPORTED, Signer(ITS_CLIENT, ISSUER), True),
        (
            "another worker's",
            IMPORTED,
            Signer("worker/aws-a/proj/linux/us-east-1/i-0b", ISSUER),
            False,
        ),
        (
            "another provider's name",
            IMPORTED,
            Signer("worker/gcp-a/proj/linux/us-east-1/i-0abc", ISSUER),
            False,
        ),
        ("the operator", IMPORTED, Signer("static/wm-operator", None), False),
        ("a namesake permanent client", IMPORTED, Signer(ITS_CLIENT, None), False),
        ("issued by another client", IMPORTED, Signer(ITS_CLIENT, "project/issuer"), False),
        ("unsigned", IMPORTED, Signer(None, None), False),
        ("no authentication", IMPORTED, None, False),
        (
            "a worker wm launched",
            replace(IMPORTED, provider_data={}),
            Signer(ITS_CLIENT, ISSUER),
            False,
        ),
        (
            "an imported worker stopping",
            replace(IMPORTED, state=WorkerState.STOPPING),
            Signer(ITS_CLIENT, ISSUER),
            False,
        ),
        (
            # Read as requested by the import, it registered with worker-manager before the
            # switch: the credentials worker-manager gave it say so.
            "an imported worker registered with worker-manager after the import",
            replace(IMPORTED, state=WorkerState.REQUESTED),
            Signer(ITS_CLIENT, ISSUER),
            True,
        ),
        (
            "an imported worker stopped",
            replace(IMPORTED, state=WorkerState.STOPPED),
            Signer(ITS_CLIENT, ISSUER),
            False,
        ),
        ("no worker", None, Signer(ITS_CLIENT, ISSUER), False),
    ],
)
def test_an_imported_worker_reregisters_on_its_own_credentials_alone(
    scenario, worker, signer, accepted
):
    assert reregisters_on_its_credentials(worker, signer, ISSUER) is accepted, scenario
