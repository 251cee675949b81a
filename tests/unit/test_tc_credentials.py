"""Issuing and verifying temporary credentials, against the real `taskcluster` package."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import taskcluster

from wm.tc.credentials import (
    ISSUER_SCOPES,
    CertificateInvalid,
    IssuerCredentials,
    issue_temporary_credentials,
    parse_certificate,
    verify_certificate,
    worker_credentials,
)

ISSUER = IssuerCredentials("static/taskcluster/worker-manager", "issuer-token-abc")
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NAME = "worker/aws/proj/ci/us-east-1/i-1"


def wm_issued(**changes):
    args = dict(
        provider_id="aws",
        worker_pool_id="proj/ci",
        worker_group="us-east-1",
        worker_id="i-1",
        expires=NOW + timedelta(days=4),
        now=NOW,
    )
    return worker_credentials(ISSUER, **(args | changes))


def verify(certificate, *, name=NAME, issuer=ISSUER, scopes=ISSUER_SCOPES, now=NOW):
    return verify_certificate(
        parse_certificate(certificate),
        credential_name=name,
        issuer=issuer,
        issuer_scopes=scopes,
        now=now,
    )


def test_wm_signs_exactly_as_the_taskcluster_client_does():
    start, expiry = NOW - timedelta(minutes=15), NOW + timedelta(days=4)
    scopes = ["queue:claim-work:proj/ci", "assume:worker-id:g/w"]
    theirs = taskcluster.createTemporaryCredentials(
        ISSUER.client_id, ISSUER.access_token, start, expiry, scopes, name=NAME
    )
    their_cert = json.loads(theirs["certificate"])

    ours = issue_temporary_credentials(
        ISSUER, name=NAME, scopes=scopes, start=start, expiry=expiry, seed=their_cert["seed"]
    )

    assert json.loads(ours.certificate) == their_cert
    assert ours.access_token == theirs["accessToken"].decode()
    assert ours.client_id == theirs["clientId"]


def test_a_certificate_from_the_taskcluster_client_verifies():
    issued = taskcluster.createTemporaryCredentials(
        ISSUER.client_id,
        ISSUER.access_token,
        NOW - timedelta(minutes=15),
        NOW + timedelta(hours=1),
        ["queue:claim-work:proj/ci"],
        name=NAME,
    )
    granted = verify(issued["certificate"])
    assert granted.access_token == issued["accessToken"].decode()
    assert granted.scopes == ("queue:claim-work:proj/ci",)
    assert granted.expires == NOW + timedelta(hours=1)


def test_an_unnamed_certificate_verifies_against_its_own_client():
    issued = taskcluster.createTemporaryCredentials(
        ISSUER.client_id, ISSUER.access_token, NOW, NOW + timedelta(hours=1), ["queue:*"]
    )
    assert "issuer" not in json.loads(issued["certificate"])
    granted = verify(issued["certificate"], name=ISSUER.client_id, scopes=["*"])
    assert granted.access_token == issued["accessToken"].decode()


def test_wm_issued_worker_credentials_verify_and_carry_the_worker_expiry():
    issued = wm_issued()
    granted = verify(issued.certificate)
    assert granted.access_token == issued.access_token
    assert granted.expires == NOW + timedelta(days=4)
    assert len(granted.scopes) == 10


def tampered(**changes):
    cert = json.loads(wm_issued().certificate)
    cert.update(changes)
    return cert


def without(key):
    cert = json.loads(wm_issued().certificate)
    del cert[key]
    return cert


SIGNATURE_INVALID = "ext.certificate.signature is not valid, or wrong clientId provided"


@pytest.mark.parametrize(
    ("scenario", "certificate", "kwargs", "message"),
    [
        ("not an object", ["a"], {}, "ext.certificate must be a JSON object"),
        ("version 2", tampered(version=2), {}, "ext.certificate.version must be 1"),
        ("seed missing", without("seed"), {}, "ext.certificate.seed must be a string"),
        ("seed short", tampered(seed="x" * 43), {}, "ext.certificate.seed must be 44 characters"),
        ("start a string", tampered(start="0"), {}, "ext.certificate.start must be a number"),
        ("expiry missing", without("expiry"), {}, "ext.certificate.expiry must be a number"),
        ("scopes a string", tampered(scopes="a"), {}, "ext.certificate.scopes must be an array"),
        (
            "a scope with a newline",
            tampered(scopes=["a\nb"]),
            {},
            "ext.certificate.scopes must be an array of valid scopes",
        ),
        (
            "not yet valid",
            wm_issued(now=NOW + timedelta(minutes=21)).certificate,
            {},
            "ext.certificate.start > now",
        ),
        (
            "expired more than 5 minutes ago",
            wm_issued(expires=NOW - timedelta(minutes=6)).certificate,
            {},
            "ext.certificate.expiry < now",
        ),
        (
            "longer than 31 days",
            tampered(expiry=json.loads(wm_issued().certificate)["start"] + 32 * 86_400_000),
            {},
            "ext.certificate cannot last longer than 31 days!",
        ),
        (
            "issuer may not create this client",
            wm_issued().certificate,
            {"scopes": [s for s in ISSUER_SCOPES if not s.startswith("auth:")]},
            "doesn't have `auth:create-client:worker/aws/proj/ci/us-east-1/i-1`",
        ),
        (
            "scopes beyond the issuer's",
            tampered(scopes=["queue:claim-work:proj/ci", "auth:*"]),
            {},
            "doesn't satisfy all certificate scopes queue:claim-work:proj/ci, auth:*",
        ),
        ("a scope removed", tampered(scopes=["queue:claim-work:proj/ci"]), {}, SIGNATURE_INVALID),
        ("expiry extended", tampered(expiry=tampered()["expiry"] + 1000), {}, SIGNATURE_INVALID),
        ("another seed", tampered(seed="A" * 44), {}, SIGNATURE_INVALID),
        ("signature missing", without("signature"), {}, SIGNATURE_INVALID),
        (
            "used under another worker's name",
            wm_issued().certificate,
            {"name": "worker/aws/proj/ci/us-east-1/i-2"},
            SIGNATURE_INVALID,
        ),
        (
            "signed by another token",
            wm_issued().certificate,
            {"issuer": IssuerCredentials(ISSUER.client_id, "another-token")},
            SIGNATURE_INVALID,
        ),
        (
            "clientId without issuer",
            tampered(clientId="x"),
            {"name": ISSUER.client_id, "scopes": ["*"]},
            "ext.certificate.clientId must only be used with ext.certificate.issuer",
        ),
    ],
)
def test_a_bad_certificate_is_refused_with_taskclusters_reason(
    scenario, certificate, kwargs, message
):
    with pytest.raises(CertificateInvalid) as refused:
        verify(certificate, **kwargs)
    assert message in str(refused.value)


def test_expiry_within_the_five_minute_slack_still_verifies():
    issued = wm_issued(expires=NOW - timedelta(minutes=4))
    assert verify(issued.certificate).expires == NOW - timedelta(minutes=4)


@pytest.mark.parametrize(
    ("scenario", "kwargs", "message"),
    [
        ("over 31 days", {"expiry": NOW + timedelta(days=32)}, "31 days"),
        ("issuer named as itself", {"name": ISSUER.client_id}, "different from the name"),
        ("a scope not a string", {"scopes": ["a", 1]}, "scopes must be strings"),
    ],
)
def test_issuing_refuses_what_the_auth_service_would(scenario, kwargs, message):
    args = dict(name=NAME, scopes=["a"], start=NOW, expiry=NOW + timedelta(days=1)) | kwargs
    with pytest.raises(ValueError, match=message):
        issue_temporary_credentials(ISSUER, **args)
