"""A worker's issued credentials checked without wm's verification code.

Everything expected here is written out from Taskcluster's sources (WM src/util.js
createCredentials; clients/client/src/client.js createTemporaryCredentials) and recomputed with
hmac/hashlib, so a mistake shared by wm's issuing and verifying code cannot hide.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from datetime import UTC, datetime, timedelta

from wm.tc.credentials import (
    IssuerCredentials,
    new_worker_secret,
    worker_credentials,
)

ISSUER_ID = "static/taskcluster/worker-manager"
ISSUER_TOKEN = "issuer-secret-access-token-0123456789abcdef"
NOW = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)
EXPIRES = NOW + timedelta(seconds=345_600)  # the default reregistrationTimeout
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_a_registered_worker_gets_named_credentials_with_exactly_the_ten_scopes():
    credentials = worker_credentials(
        IssuerCredentials(ISSUER_ID, ISSUER_TOKEN),
        provider_id="aws",
        worker_pool_id="proj-x/ci",
        worker_group="us-east-1",
        worker_id="i-0123456789abcdef0",
        expires=EXPIRES,
        now=NOW,
    ).as_json()

    assert credentials["clientId"] == "worker/aws/proj-x/ci/us-east-1/i-0123456789abcdef0"
    cert = json.loads(credentials["certificate"])
    assert set(cert) == {"version", "scopes", "start", "expiry", "seed", "signature", "issuer"}
    assert cert["version"] == 1
    assert cert["issuer"] == ISSUER_ID
    assert cert["scopes"] == [
        "assume:worker-type:proj-x/ci",
        "assume:worker-pool:proj-x/ci",
        "assume:worker-id:us-east-1/i-0123456789abcdef0",
        "queue:worker-id:us-east-1/i-0123456789abcdef0",
        "secrets:get:worker-type:proj-x/ci",
        "secrets:get:worker-pool:proj-x/ci",
        "queue:claim-work:proj-x/ci",
        "worker-manager:remove-worker:proj-x/ci/us-east-1/i-0123456789abcdef0",
        "worker-manager:reregister-worker:proj-x/ci/us-east-1/i-0123456789abcdef0",
        "worker-manager:should-worker-terminate:proj-x/ci/us-east-1/i-0123456789abcdef0",
    ]
    fifteen_minutes_ago_ms = int((NOW - EPOCH).total_seconds() * 1000) - 15 * 60 * 1000
    assert cert["start"] == fifteen_minutes_ago_ms
    assert cert["expiry"] == int((EXPIRES - EPOCH).total_seconds() * 1000)
    assert re.fullmatch(r"[A-Za-z0-9_-]{44}", cert["seed"])

    signed = "\n".join(
        [
            "version:1",
            f"clientId:{credentials['clientId']}",
            f"issuer:{ISSUER_ID}",
            f"seed:{cert['seed']}",
            f"start:{cert['start']}",
            f"expiry:{cert['expiry']}",
            "scopes:",
            *cert["scopes"],
        ]
    )
    key = ISSUER_TOKEN.encode()
    expected_signature = hmac.new(key, signed.encode(), hashlib.sha256).digest()
    assert base64.b64decode(cert["signature"]) == expected_signature

    derived = hmac.new(key, cert["seed"].encode(), hashlib.sha256).digest()
    assert credentials["accessToken"] == base64.urlsafe_b64encode(derived).decode().rstrip("=")


def test_each_worker_secret_is_fresh_and_44_url_safe_characters():
    secrets = {new_worker_secret() for _ in range(50)}
    assert len(secrets) == 50
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{44}", s) for s in secrets)
