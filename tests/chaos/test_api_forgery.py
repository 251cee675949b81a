"""Forged identity proofs against the real web process (issue 9, items 10 and 11).

`wm run web` runs as an OS process on real Postgres, trusting the three simulated clouds'
keys; the workers were launched on those clouds by the real providers. Each forgery is posted
for a worker that is waiting to register, and every one must get the very same 400 answer, leave
the row exactly as it was (still `requested`, no secret), and make no outbound connection: the
URLs forgeries name point at a local listener that must never see one, or at addresses the
fetcher must refuse before any I/O (its own counter and log say so). The worker's genuine proof
must still register afterwards, so a test here would fail were a forgery accepted or the row
spoiled.

The verifiers' reasons for each forgery are tested in tests/integration/identity/; what this
adds is the whole path through HTTP, the API's answer, the database and the network.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from tests.support.api_stack import (
    KINDS,
    ApiStack,
    Listener,
    in_parallel,
    listener,
    module_api,
    secret_hash,
)
from wm.model import WorkerRecord
from wm.providers.azure.names import vm_name
from wmsim.azure import attested
from wmsim.gcp.identity import identity_jwks
from wmsim.trust import new_rsa_key

# One answer per cloud for every refused proof, worker-manager's words (a 400 InputError).
REJECTED = {
    "aws": (400, "InputError", "Instance identity document validation error"),
    "gcp": (400, "InputError", "Token validation error"),
    "azure": (400, "InputError", "Signature validation error"),
}
NONCE = "a1b2c3d4e5f6"


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("forgery")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


@pytest.fixture(scope="module")
def trap() -> Iterator[Listener]:
    with listener() as found:
        yield found


@pytest.fixture(scope="module")
def stranger_key():
    return new_rsa_key()  # a key no provider trusts


@dataclass(frozen=True)
class Scene:
    """What a forger has to work with: the target worker, another genuine worker of the same
    pool, a key of its own and a listener to point URLs at."""

    api: ApiStack
    target: WorkerRecord
    other: WorkerRecord
    key: Any
    trap: Listener

    @property
    def sim(self) -> Any:
        return self.api.sims[_kind(self.target)]


def _kind(worker: WorkerRecord) -> str:
    return worker.provider_id.split("-")[0]


# -- EC2: {"document", "signature"} ----------------------------------------------------------


def aws_mint(scene: Scene, **changes: Any) -> dict[str, str]:
    return scene.sim.mint_identity(scene.target.cloud_id, **changes)


def aws_edited(scene: Scene) -> dict[str, str]:
    proof = scene.sim.identity_proof(scene.target.cloud_id)
    return {**proof, "document": proof["document"].replace('"privateIp" : "', '"privateIp" : "1')}


def aws_spliced(scene: Scene) -> dict[str, str]:
    mine = scene.sim.identity_proof(scene.target.cloud_id)
    theirs = scene.sim.identity_proof(scene.other.cloud_id)
    return {"document": mine["document"], "signature": theirs["signature"]}


def aws_older_than_row(scene: Scene) -> dict[str, str]:
    before = scene.target.created - timedelta(hours=1)
    return aws_mint(scene, changes={"pendingTime": before.strftime("%Y-%m-%dT%H:%M:%SZ")})


AWS_FORGERIES: dict[str, Callable[[Scene], Any]] = {
    "wrong-key": lambda s: aws_mint(s, key=s.key),
    "edited-document": aws_edited,
    "another-instances-valid-document": lambda s: s.sim.identity_proof(s.other.cloud_id),
    "signature-of-another-document": aws_spliced,
    "another-account": lambda s: aws_mint(s, changes={"accountId": "999999999999"}),
    "wrong-instance-id": lambda s: aws_mint(s, changes={"instanceId": "i-0123456789abcdef0"}),
    "wrong-region": lambda s: aws_mint(s, changes={"region": "eu-west-1"}),
    "another-image": lambda s: aws_mint(s, changes={"imageId": "ami-00000000000000000"}),
    "instance-older-than-the-worker": aws_older_than_row,
    "pending-time-in-the-future": lambda s: aws_mint(
        s, changes={"pendingTime": "2099-01-01T00:00:00Z"}
    ),
    "junk": lambda s: {"document": "{}", "signature": "c2ln"},
}


# -- GCE: {"token"}, a JWT ---------------------------------------------------------------------


def gcp_token(scene: Scene, worker: WorkerRecord | None = None, **overrides: Any) -> str:
    worker = worker or scene.target
    audience = scene.api.stack.config().root_url
    return scene.sim.mint_identity_token(
        worker.worker_group, worker.worker_id, audience, **overrides
    )


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def gcp_edit(token: str, edit: Callable[[dict, dict], None]) -> str:
    """A genuine token with its header or claims edited and its signature kept."""
    header, claims, signature = token.split(".")
    header_json, claims_json = json.loads(unb64url(header)), json.loads(unb64url(claims))
    edit(header_json, claims_json)
    parts = [b64url(json.dumps(header_json).encode()), b64url(json.dumps(claims_json).encode())]
    return ".".join([*parts, signature])


def gcp_claims_of_target(scene: Scene) -> str:
    target = scene.target

    def name_the_target(_header: dict, claims: dict) -> None:
        claims["google"]["compute_engine"].update(
            instance_id=target.cloud_id, instance_name=target.worker_id
        )

    return gcp_edit(gcp_token(scene, scene.other), name_the_target)


def gcp_alg(alg: str) -> Callable[[Scene], dict[str, str]]:
    def forge(scene: Scene) -> dict[str, str]:
        token = gcp_edit(gcp_token(scene), lambda header, _claims: header.update(alg=alg))
        return {"token": ".".join([*token.split(".")[:2], "e30"])}

    return forge


def gcp_hs256(scene: Scene) -> dict[str, str]:
    # The classic confusion: HMAC keyed with the public key material the verifier trusts.
    header, claims, _ = gcp_edit(
        gcp_token(scene), lambda header, _claims: header.update(alg="HS256")
    ).split(".")
    key = json.dumps(identity_jwks()).encode()
    mac = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return {"token": f"{header}.{claims}.{b64url(mac)}"}


def gcp_names_its_key(field: str) -> Callable[[Scene], dict[str, str]]:
    def forge(scene: Scene) -> dict[str, str]:
        url = f"{scene.trap.url}/keys"
        value = url if field in ("jku", "x5u") else {"kty": "RSA", "kid": "x", "n": "AQAB"}
        return {"token": gcp_token(scene, key=scene.key, header={field: value})}

    return forge


GCP_FORGERIES: dict[str, Callable[[Scene], Any]] = {
    "wrong-key": lambda s: {"token": gcp_token(s, key=s.key)},
    "unknown-key-id": lambda s: {"token": gcp_token(s, key=s.key, header={"kid": "someone"})},
    "edited-claims": lambda s: {"token": gcp_claims_of_target(s)},
    "another-instances-valid-token": lambda s: {"token": gcp_token(s, s.other)},
    "another-project": lambda s: {
        "token": gcp_token(s, compute_engine={"project_id": "someone-elses-project"})
    },
    "wrong-audience": lambda s: {"token": gcp_token(s, claims={"aud": "https://other.test"})},
    "wrong-issuer": lambda s: {"token": gcp_token(s, claims={"iss": "https://evil.test"})},
    "wrong-subject-edited-in": lambda s: {
        "token": gcp_edit(gcp_token(s), lambda _h, claims: claims.update(sub="1"))
    },
    "wrong-instance-id": lambda s: {
        "token": gcp_token(s, compute_engine={"instance_id": "4300000000000000999"})
    },
    "wrong-zone": lambda s: {"token": gcp_token(s, compute_engine={"zone": "europe-west4-b"})},
    "expired": lambda s: {"token": gcp_token(s, issued_at=time.time() - 7200)},
    "alg-none": gcp_alg("none"),
    "alg-None": gcp_alg("None"),
    "alg-HS256-keyed-with-the-public-keys": gcp_hs256,
    "header-jku-to-a-listener": gcp_names_its_key("jku"),
    "header-x5u-to-a-listener": gcp_names_its_key("x5u"),
    "header-embedded-jwk": gcp_names_its_key("jwk"),
    "junk": lambda s: {"token": "a.b.c"},
}


# -- Azure: {"document": base64 PKCS#7}, as worker-runner sends it (no nonce) ----------------------


def azure_mint(scene: Scene, worker: WorkerRecord | None = None, **overrides: Any) -> dict:
    return scene.sim.mint_attested(vm_name((worker or scene.target).worker_id), **overrides)


def replace_in_der(document: str, old: str, new: str) -> str:
    der = base64.b64decode(document)
    assert len(old) == len(new) and der.count(old.encode()) == 1
    return base64.b64encode(der.replace(old.encode(), new.encode())).decode()


def azure_edited(signed_attributes: bool) -> Callable[[Scene], dict]:
    """Another VM's genuine document with its signed vmId swapped for the target's: with
    signed attributes, the content then differs from the message digest that was signed."""

    def forge(scene: Scene) -> dict:
        proof = azure_mint(scene, scene.other, signed_attributes=signed_attributes)
        mine = scene.target.provider_data["vmId"]
        theirs = scene.other.provider_data["vmId"]
        return {**proof, "document": replace_in_der(proof["document"], theirs, mine)}

    return forge


def azure_wrong_key(scene: Scene) -> dict:
    genuine = attested.make_signer()
    return azure_mint(scene, signer=attested.Signer(genuine.certificate, scene.key, genuine.chain))


def azure_aia(url: str) -> Callable[[Scene], dict]:
    """A chain that does not complete without fetching the signer's issuer from `url`."""

    def forge(scene: Scene) -> dict:
        target = url.format(trap=scene.trap.host_port)
        return azure_mint(scene, signer=attested.make_signer(unlisted_issuer=True, aia_url=target))

    return forge


AZURE_FORGERIES: dict[str, Callable[[Scene], Any]] = {
    "wrong-key": azure_wrong_key,
    "untrusted-chain": lambda s: azure_mint(s, signer=attested.make_signer(trusted=False)),
    "edited-content": azure_edited(signed_attributes=False),
    "content-differs-from-the-signed-digest": azure_edited(signed_attributes=True),
    "another-vms-valid-document": lambda s: azure_mint(s, s.other),
    "another-subscription": lambda s: azure_mint(
        s, changes={"subscriptionId": "11111111-2222-3333-4444-555555555555"}
    ),
    "wrong-signer-name": lambda s: azure_mint(
        s, signer=attested.make_signer(common_name="evil.example.com")
    ),
    "signer-name-look-alike": lambda s: azure_mint(
        s, signer=attested.make_signer(common_name="metadata.azure.com.evil.test")
    ),
    "expired-attested-data": lambda s: azure_mint(
        s, created_on=s.target.created - timedelta(hours=8), lifetime_s=6 * 3600
    ),
    "attested-data-older-than-the-worker": lambda s: azure_mint(
        s, created_on=s.target.created - timedelta(minutes=30)
    ),
    "detached-signature": lambda s: azure_mint(s, detached=True),
    "aia-to-a-local-listener": azure_aia("http://{trap}/ca.crt"),
    "aia-to-the-metadata-address": azure_aia("http://169.254.169.254/metadata/ca.crt"),
    "aia-to-the-metadata-address-as-a-number": azure_aia("http://2852039166/ca.crt"),
    "aia-to-the-ec2-ipv6-metadata-address": azure_aia("http://[fd00:ec2::254]/ca.crt"),
    "aia-to-gce-metadata": azure_aia("http://metadata.google.internal/computeMetadata/v1/"),
    "aia-to-an-allowed-name-on-another-port": azure_aia("http://www.microsoft.com:8080/ca.crt"),
    "aia-look-alike-host": azure_aia("http://www.microsoft.com.evil.test/ca.crt"),
    "junk": lambda s: {"document": "MIIB"},
}
# Forgeries whose URL the fetcher must refuse (counted and logged by the web process itself).
REFUSED_URLS = {name for name in AZURE_FORGERIES if name.startswith("aia-")}

FORGERIES = [
    pytest.param(kind, name, forge, id=f"{kind}-{name}")
    for kind, table in (("aws", AWS_FORGERIES), ("gcp", GCP_FORGERIES), ("azure", AZURE_FORGERIES))
    for name, forge in table.items()
]


@pytest.mark.parametrize(("kind", "name", "forge"), FORGERIES)
def test_a_forged_proof_gets_the_same_answer_and_changes_nothing(
    api: ApiStack, trap: Listener, stranger_key, kind: str, name: str, forge
):
    target, other = api.launch(kind, 2)
    proof = forge(Scene(api, target, other, stranger_key, trap))
    before = api.row(target.worker_id)
    refused_before = api.metric("wm_identity_fetches_total", outcome="refused")

    reply = api.register(target, proof)

    assert reply.refusal() == REJECTED[kind], name
    assert reply.json()["requestInfo"]["payload"] == "(OMITTED)"  # a proof is never echoed
    assert api.row(target.worker_id) == before  # every column: still requested, same version
    assert before["state"] == "requested" and before["secret_hash"] is None
    assert trap.connections == []
    assert api.metric("wm_identity_fetches_total", outcome="fetched") == 0
    assert api.metric("wm_identity_fetches_total", outcome="failed") == 0
    refused = api.metric("wm_identity_fetches_total", outcome="refused") - refused_before
    assert refused == (1 if name in REFUSED_URLS else 0)
    # The genuine worker is not locked out by a forger: its own proof still registers.
    genuine = api.register(target, api.proof(target))
    assert genuine.status == 200, genuine.body
    assert api.row(target.worker_id)["secret_hash"] == secret_hash(genuine.json()["secret"])


# A genuine proof with a field its provider's form does not have: registerWorker's schema
# refuses it (as Taskcluster's does), before any verifier reads it.
OUT_OF_FORM: dict[str, Callable[[dict], dict]] = {
    "aws": lambda proof: {**proof, "nonce": NONCE},
    "gcp": lambda proof: {**proof, "document": proof["token"]},
    "azure": lambda proof: {**proof, "nonce": NONCE},
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_proof_out_of_its_form_is_refused_by_the_schema_and_changes_nothing(
    api: ApiStack, kind: str
):
    (target,) = api.launch(kind, 1)
    genuine = api.proof(target)
    before = api.row(target.worker_id)

    reply = api.register(target, OUT_OF_FORM[kind](genuine))

    status, code, message = reply.refusal()
    assert (status, code) == (400, "InputValidationError")
    assert message.startswith("Schema validation error:\nworkerIdentityProof.")
    assert reply.json()["requestInfo"]["payload"] == "(OMITTED)"
    assert all(value not in reply.body.decode() for value in genuine.values())
    assert api.row(target.worker_id) == before
    assert api.register(target, genuine).status == 200


def test_the_fetcher_logged_every_refusal_by_its_reason_only(
    api: ApiStack, trap: Listener, stranger_key
):
    # The log shows the reasons and never the URLs, which are the forger's text. The URL
    # forgeries are sent here (pytest-xdist may run the tests above in another worker).
    for name in sorted(REFUSED_URLS):
        target, other = api.launch("azure", 2)
        forged = AZURE_FORGERIES[name](Scene(api, target, other, stranger_key, trap))
        assert api.register(target, forged).status == 400
    reasons = {line["reason"] for line in api.events("identity-fetch-refused")}
    assert {"URL host is an IP address", "URL host is not on the allow-list"} <= reasons
    assert "URL port is not allowed" in reasons
    log = api.log_text()
    assert "169.254.169.254" not in log and "evil.test" not in log and "2852039166" not in log


@pytest.mark.parametrize("kind", KINDS)
def test_fifty_parallel_copies_of_one_valid_proof_register_exactly_once(api: ApiStack, kind):
    (worker,) = api.launch(kind, 1)
    proof = api.proof(worker)
    running_before = len(api.events("worker-running"))

    def attempt(_index: int):
        # Shed requests (429) are sent again at once: every copy gets a real answer.
        while True:
            reply = api.register(worker, proof)
            if reply.status != 429:
                return reply

    replies = in_parallel(50, attempt)

    statuses = sorted(r.status for r in replies)
    assert statuses == [200] + [400] * 49, statuses
    (winner,) = [r for r in replies if r.status == 200]
    row = api.row(worker.worker_id)
    assert row["state"] == "running" and row["secret_hash"] == secret_hash(winner.json()["secret"])
    assert all(r.json()["code"] == "InputError" for r in replies if r.status == 400)
    mine = [e for e in api.events("worker-running") if e["worker"] == worker.worker_id]
    assert len(mine) == 1 and len(api.events("worker-running")) == running_before + 1
