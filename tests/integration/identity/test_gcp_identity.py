"""GCE identity tokens: the real GCP provider creates the instances on the simulated GCE, the
sim mints their identity tokens (RS256, its own JWKS), and the verifier built from a config
trusting that JWKS accepts exactly the right one."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fixtures.identity import (
    IDENTITY_AUDIENCE,
    RecordingFetch,
    expected_identity,
    http_get_json,
    over_the_wire,
)
from tests.fixtures.sim_gce import (
    GCE_DEPLOYMENT,
    GCE_OTHER_ZONE,
    GCE_WORKER_ACCOUNT,
    GCE_ZONE,
    gcp_config,
)
from wm.errors import ConfigError
from wm.model import LaunchSpec, WorkerRef
from wm.providers import build_verifier
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult
from wm.providers.gcp import identity as gcp_identity
from wm.providers.gcp.provider import GcpProvider
from wm.workers.identity import ExpectedIdentity, IdentityRejected
from wmsim.gcp.gce import SimGce
from wmsim.gcp.identity import identity_jwks, service_account_id
from wmsim.gcp.launch_config import example_launch_config
from wmsim.trust import new_rsa_key

SPEC = LaunchSpec(
    launch_config_id="lc-identity",
    region=GCE_ZONE,
    capacity_per_worker=1,
    launch_config=example_launch_config(
        GCE_ZONE, machine_type="e2-small", launch_config_id="lc-identity"
    ),
)


@pytest.fixture
def launched(gcp_provider: GcpProvider) -> list[LaunchResult]:
    intents = (LaunchIntent("w-gce-1", "t-1"), LaunchIntent("w-gce-2", "t-2"))
    results = gcp_provider.create(LaunchBatch("proj-ci/identity", SPEC, intents, "batch-id"))
    assert all(r.cloud_id for r in results)
    return results


def expected(result: LaunchResult, **changes: object) -> ExpectedIdentity:
    return expected_identity(
        result, provider_id="gcp-test", region=GCE_ZONE, deployment_id=GCE_DEPLOYMENT, **changes
    )


def token_for(sim: SimGce, result: LaunchResult, **overrides: object) -> str:
    return sim.mint_identity_token(GCE_ZONE, result.worker_id, IDENTITY_AUDIENCE, **overrides)


def rejected(verifier, token: str, expectation: ExpectedIdentity) -> str:
    with pytest.raises(IdentityRejected) as caught:
        verifier.verify(over_the_wire({"token": token}), expectation)
    return caught.value.reason


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def segments(token: str) -> tuple[dict, dict, str]:
    header, claims, signature = token.split(".")
    return json.loads(unb64url(header)), json.loads(unb64url(claims)), signature


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def assemble(header: dict, claims: dict, signature: str) -> str:
    parts = [b64url(json.dumps(header).encode()), b64url(json.dumps(claims).encode())]
    return ".".join([*parts, signature])


def test_the_provider_records_the_instance_id_and_zone(launched: list[LaunchResult]):
    data = launched[0].provider_data
    assert (data["instance_id"], data["zone"]) == (launched[0].cloud_id, GCE_ZONE)


def test_a_worker_recovered_by_look_up_records_the_same(
    gcp_provider: GcpProvider, launched: list[LaunchResult]
):
    ref = WorkerRef(launched[0].worker_id, GCE_ZONE, launched[0].cloud_id)
    found = gcp_provider.lookup([ref])[launched[0].worker_id]
    assert found.cloud_id == launched[0].cloud_id
    assert found.provider_data["instance_id"] == launched[0].provider_data["instance_id"]
    assert found.provider_data["zone"] == GCE_ZONE


def test_a_token_fetched_from_the_instance_verifies(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    url = f"{sim_gce.endpoint}/_sim/identity/{GCE_ZONE}/{launched[0].worker_id}"
    answer = http_get_json(f"{url}?audience={IDENTITY_AUDIENCE}&format=full")
    gcp_identity_verifier.verify(over_the_wire(answer), expected(launched[0]))
    # What GCE mints: for the requested audience (root_url), as the VM's service account,
    # naming the numeric instance id worker-runner registers as.
    _, claims, _ = segments(answer["token"])
    assert claims["aud"] == IDENTITY_AUDIENCE
    assert claims["sub"] == service_account_id(GCE_WORKER_ACCOUNT)
    assert claims["google"]["compute_engine"]["instance_id"] == launched[0].tc_worker_id


def test_a_token_of_another_service_account_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    # Anyone who may create instances in the project could give one another account.
    other = service_account_id("someone@wm-test.iam.gserviceaccount.com")
    token = token_for(sim_gce, launched[0], claims={"sub": other})
    assert "service account" in rejected(gcp_identity_verifier, token, expected(launched[0]))


def test_without_a_configured_worker_service_account_every_token_is_refused(
    sim_gce: SimGce, launched: list[LaunchResult]
):
    config = gcp_config(sim_gce.endpoint).model_copy(
        update={
            "identity_jwks": str(sim_gce.identity_trust_path),
            "worker_service_account_email": None,
            "worker_service_account_id": None,
        }
    )
    verifier = build_verifier(config, GCE_DEPLOYMENT, IDENTITY_AUDIENCE)
    token = token_for(sim_gce, launched[0])
    assert "service account" in rejected(verifier, token, expected(launched[0]))


def test_a_token_for_another_workerid_than_the_rows_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    token = token_for(sim_gce, launched[0])
    moved = expected(launched[0], tc_worker_id=launched[1].tc_worker_id)
    assert "instance id" in rejected(gcp_identity_verifier, token, moved)


def test_the_sim_serves_the_jwks_it_writes_for_configs(sim_gce: SimGce):
    served = http_get_json(f"{sim_gce.endpoint}/_sim/jwks")
    assert served == json.loads(Path(sim_gce.identity_trust_path).read_text()) == identity_jwks()


def test_a_token_for_an_instance_created_after_the_row_verifies(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    before = datetime.now(UTC) - timedelta(minutes=5)
    token = token_for(sim_gce, launched[0])
    gcp_identity_verifier.verify({"token": token}, expected(launched[0], requested_at=before))


def test_a_token_signed_with_another_key_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    token = token_for(sim_gce, launched[0], key=new_rsa_key())
    assert "signature" in rejected(gcp_identity_verifier, token, expected(launched[0]))


def test_a_token_naming_an_unknown_key_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    token = token_for(sim_gce, launched[0], key=new_rsa_key(), header={"kid": "someone-else"})
    assert "unknown signing key" in rejected(gcp_identity_verifier, token, expected(launched[0]))


def test_a_token_with_edited_claims_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    # The second worker's genuine token, edited to name the first: the signature breaks.
    header, claims, signature = segments(token_for(sim_gce, launched[1]))
    claims["google"]["compute_engine"].update(
        instance_id=launched[0].cloud_id, instance_name=launched[0].worker_id
    )
    edited = assemble(header, claims, signature)
    assert "signature" in rejected(gcp_identity_verifier, edited, expected(launched[0]))


def test_another_instances_valid_token_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    other = token_for(sim_gce, launched[1])
    gcp_identity_verifier.verify({"token": other}, expected(launched[1]))
    assert "instance id" in rejected(gcp_identity_verifier, other, expected(launched[0]))


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"claims": {"aud": "https://another-deployment.test"}}, "audience"),
        ({"claims": {"aud": [IDENTITY_AUDIENCE]}}, "audience"),
        ({"claims": {"iss": "https://accounts.example.com"}}, "issuer"),
        ({"claims": {"iss": "accounts.google.com"}}, "issuer"),
        ({"compute_engine": {"project_id": "someone-elses-project"}}, "project"),
        ({"compute_engine": {"zone": GCE_OTHER_ZONE}}, "zone"),
        ({"compute_engine": {"instance_name": "w-gce-2"}}, "instance name"),
        ({"compute_engine": {"instance_id": "4300000000000000999"}}, "instance id"),
        ({"claims": {"google": {}}}, "compute_engine"),
        ({"issued_in_s": -7200}, "expired"),
        ({"issued_in_s": 600}, "future"),
        ({"lifetime_s": 86400}, "lifetime"),
        ({"claims": {"exp": "tomorrow"}}, "exp"),
    ],
)
def test_a_genuinely_signed_token_with_wrong_claims_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier, overrides, reason
):
    # Times are relative to when the test runs: a suite can run long after its collection.
    if "issued_in_s" in overrides:
        overrides = {"issued_at": time.time() + overrides["issued_in_s"]}
    token = token_for(sim_gce, launched[0], **overrides)
    assert reason in rejected(gcp_identity_verifier, token, expected(launched[0]))


def test_a_token_older_than_the_worker_row_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    later = datetime.now(UTC) + timedelta(minutes=10)
    token = token_for(sim_gce, launched[0])
    reason = rejected(gcp_identity_verifier, token, expected(launched[0], requested_at=later))
    assert "older than the worker" in reason


def test_alg_none_and_hmac_tokens_are_rejected_before_any_key_work(
    sim_gce: SimGce, launched: list[LaunchResult]
):
    header, claims, _ = segments(token_for(sim_gce, launched[0]))
    public_jwks = json.dumps(identity_jwks()).encode()
    hs256 = {**header, "alg": "HS256"}
    signing_input = f"{b64url(json.dumps(hs256).encode())}.{b64url(json.dumps(claims).encode())}"
    # The classic confusion: HMAC keyed with the public key material.
    hmac_sig = hmac.new(public_jwks, signing_input.encode(), hashlib.sha256).digest()
    forged = {
        "none": assemble({**header, "alg": "none"}, claims, "e30"),
        "None": assemble({**header, "alg": "None"}, claims, "e30"),
        "HS256": f"{signing_input}.{b64url(hmac_sig)}",
        "RS512": assemble({**header, "alg": "RS512"}, claims, "e30"),
        "ES256": assemble({**header, "alg": "ES256"}, claims, "e30"),
    }
    loads: list[str] = []
    config = gcp_config(sim_gce.endpoint)
    verifier = gcp_identity.GcpIdentityVerifier(
        config.id,
        config.project,
        IDENTITY_AUDIENCE,
        gcp_identity.JwksKeys(lambda: loads.append("load") or (public_jwks, 60.0)),
        config.worker_service_account_id,
    )
    for alg, token in forged.items():
        assert "algorithm" in rejected(verifier, token, expected(launched[0])), alg
    assert loads == []  # not even the key set was looked at


@pytest.mark.parametrize("field", ["jku", "x5u", "jwk", "x5c"])
def test_a_token_naming_its_own_key_is_rejected(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier, field
):
    value = {"jku": "http://169.254.169.254/keys", "x5u": "http://127.0.0.1:1/cert"}.get(
        field, {"kty": "RSA"}
    )
    token = token_for(sim_gce, launched[0], header={field: value})
    assert "header" in rejected(gcp_identity_verifier, token, expected(launched[0]))


def test_without_a_jwks_file_only_googles_key_url_is_fetched(
    sim_gce: SimGce, launched: list[LaunchResult]
):
    # Production mode: keys from Google's URL (answered here with the sim's keys).
    fetch = RecordingFetch({gcp_identity.GOOGLE_JWKS_URL: json.dumps(identity_jwks()).encode()})
    verifier = gcp_identity.make_verifier(
        gcp_config(sim_gce.endpoint), GCE_DEPLOYMENT, IDENTITY_AUDIENCE, fetch=fetch
    )
    assert fetch.calls == []  # nothing fetched before a token needs a key
    verifier.verify({"token": token_for(sim_gce, launched[0])}, expected(launched[0]))
    smuggled = token_for(sim_gce, launched[0], header={"jku": "http://127.0.0.1:9/jwks"})
    assert "header" in rejected(verifier, smuggled, expected(launched[0]))
    assert fetch.calls == [gcp_identity.GOOGLE_JWKS_URL]


def test_junk_that_names_no_waiting_worker_never_fetches_keys(
    sim_gce: SimGce, launched: list[LaunchResult]
):
    fetch = RecordingFetch({gcp_identity.GOOGLE_JWKS_URL: b'{"keys": []}'})
    verifier = gcp_identity.make_verifier(
        gcp_config(sim_gce.endpoint), GCE_DEPLOYMENT, IDENTITY_AUDIENCE, fetch=fetch
    )
    for index in range(20):
        token = token_for(
            sim_gce,
            launched[0],
            compute_engine={"instance_id": str(index)},
            header={"kid": f"random-{index}"},
        )
        assert "instance id" in rejected(verifier, token, expected(launched[0]))
    assert fetch.calls == []


def test_a_bad_jwks_file_is_a_config_error(sim_gce: SimGce, tmp_path: Path):
    junk = tmp_path / "jwks.json"
    junk.write_text("[1, 2]")
    for path in (str(tmp_path / "missing.json"), str(junk)):
        config = gcp_config(sim_gce.endpoint).model_copy(update={"identity_jwks": path})
        with pytest.raises(ConfigError, match="identity_jwks"):
            build_verifier(config, GCE_DEPLOYMENT, IDENTITY_AUDIENCE)


def test_a_token_is_checked_at_the_verifiers_clock_not_at_pyjwts(
    sim_gce: SimGce, launched: list[LaunchResult], gcp_identity_verifier
):
    # Scenario: a token captured two hours ago (expired by the real clock), checked by a
    # verifier whose clock reads ten minutes after it was issued.
    issued = time.time() - 7200
    token = token_for(sim_gce, launched[0], issued_at=issued)
    then = datetime.fromtimestamp(issued + 600, UTC)
    config = gcp_config(sim_gce.endpoint).model_copy(
        update={"identity_jwks": str(sim_gce.identity_trust_path)}
    )
    at_its_time = build_verifier(config, GCE_DEPLOYMENT, IDENTITY_AUDIENCE, now=lambda: then)

    at_its_time.verify(over_the_wire({"token": token}), expected(launched[0]))
    assert "expired" in rejected(gcp_identity_verifier, token, expected(launched[0]))
    not_yet = token_for(sim_gce, launched[0], issued_at=issued, claims={"nbf": issued + 3600})
    assert "not valid yet" in rejected(at_its_time, not_yet, expected(launched[0]))
