"""Fuzzed identity proofs (issue 9, item 10): whatever a forger sends, a verifier only ever
answers IdentityRejected, never another exception (which the API would have answered 500 before
it learnt to fail closed, and which still means a verifier bug: it is logged as
`identity-verifier-failed`).

Two kinds of junk, from fixed seeds so every run sends the same proofs:
- genuine proofs mangled byte by byte (flips, cuts, splices): the parsers' edges;
- genuinely signed proofs whose claims hold values of every JSON type: the claim checks' edges
  (these pass the signature, so each check sees exactly what a compromised key would send).

Then a sample of both goes through the real web process: the same 400 answer for every one, and
not one `identity-verifier-failed` or `api-error` in its log.

Found this way: corrupt certificates inside Azure attested data raised ValueError, TypeError,
InvalidVersion or DuplicateExtension from the lazily parsed names and extensions (fixed in
wm/providers/azure/identity.py).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from tests.support.api_stack import ApiStack, module_api
from wm.model import WorkerRecord
from wm.providers import build_verifier
from wm.providers.azure.names import vm_name
from wm.workers.identity import ExpectedIdentity, IdentityRejected
from wmsim.gcp.identity import IDENTITY_KEY_NAME
from wmsim.trust import signing_key

SEED = 20261204
MANGLED_PER_CLOUD = 3000
TYPED_PER_CLOUD = 150
THROUGH_THE_API_PER_CLOUD = 40
# One answer per cloud for every refused proof, worker-manager's words (a 400 InputError).
REJECTED = {
    "aws": (400, "InputError", "Instance identity document validation error"),
    "gcp": (400, "InputError", "Token validation error"),
    "azure": (400, "InputError", "Signature validation error"),
}
NONCE = "f00d"


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("fuzz")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


def expected(api: ApiStack, worker: WorkerRecord) -> ExpectedIdentity:
    """What the API builds for this worker (wm/workers/registration_policy.py `decide`)."""
    config = api.stack.config()
    return ExpectedIdentity(
        deployment_id=config.deployment_id,
        provider_id=worker.provider_id,
        pool_id=worker.pool_id,
        worker_id=worker.worker_id,
        region=worker.worker_group,
        cloud_id=worker.cloud_id,
        audience=config.root_url,
        provider_data=worker.provider_data,
        requested_at=worker.created,
        tc_worker_id=worker.tc_worker_id,
    )


def verifier(api: ApiStack, kind: str):
    config = api.stack.config()
    provider = next(p for p in config.providers if p.kind == kind)
    return build_verifier(provider, config.deployment_id, config.root_url)


# -- mangling ---------------------------------------------------------------------------------


def mangle(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    choice = rng.random()
    if choice < 0.5:
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif choice < 0.75:
        del out[rng.randrange(len(out)) :]
    else:
        start = rng.randrange(len(out))
        del out[start : start + rng.randint(1, 64)]
    return bytes(out)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mangled_proofs(kind: str, genuine: dict[str, str], rng: random.Random) -> Iterator[dict]:
    for _ in range(MANGLED_PER_CLOUD):
        if kind == "aws":
            field = rng.choice(["document", "signature"])
            text = mangle(rng, genuine[field].encode()).decode("utf-8", "replace")
            yield {**genuine, field: text}
        elif kind == "gcp":
            segments = genuine["token"].split(".")
            index = rng.randrange(3)
            segments[index] = b64url(mangle(rng, unb64url(segments[index])))
            yield {"token": ".".join(segments)}
        else:
            der = mangle(rng, base64.b64decode(genuine["document"]))
            yield {"document": base64.b64encode(der).decode()}


# -- genuinely signed claims of every type ------------------------------------------------------


def junk_value(rng: random.Random, depth: int = 0) -> Any:
    simple: list[Any] = [
        None,
        True,
        False,
        0,
        -1,
        2**70,
        1e308,
        -1e308,
        0.5,
        "",
        "x" * 3000,
        "\u202e\u0000\ud7ff",
        "2030-01-01T00:00:00Z",
        "99/99/99 99:99:99 -9999",
        "00000000-0000-0000-0000-000000000000",
    ]
    if depth < 2 and rng.random() < 0.3:
        return rng.choice([[junk_value(rng, depth + 1)], {"k": junk_value(rng, depth + 1)}, [], {}])
    return rng.choice(simple)


EC2_FIELDS = [
    *("accountId", "region", "availabilityZone", "imageId", "instanceType"),
    *("instanceId", "pendingTime"),
]
GCE_FIELDS = ["project_id", "zone", "instance_id", "instance_name", "instance_creation_timestamp"]


def resigned(token: str, edit: Callable[[dict], None]) -> str:
    """The token with its claims edited and signed again with the simulated Google key: PyJWT
    refuses to encode claims of the wrong type, a forger with the key would not."""
    header, claims, _ = token.split(".")
    payload = json.loads(unb64url(claims))
    edit(payload)
    signing_input = f"{header}.{b64url(json.dumps(payload).encode())}"
    key = signing_key(IDENTITY_KEY_NAME)
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def typed_proofs(api: ApiStack, kind: str, worker: WorkerRecord, rng: random.Random) -> Iterator:
    sim = api.sims[kind]
    audience = api.stack.config().root_url
    for _ in range(TYPED_PER_CLOUD):
        if kind == "aws":
            field = rng.choice(EC2_FIELDS)
            yield sim.mint_identity(worker.cloud_id, changes={field: junk_value(rng)})
        elif kind == "gcp":
            token = sim.identity_token(worker.worker_group, worker.worker_id, audience)
            if rng.random() < 0.5:
                claim = rng.choice(["aud", "iss", "google", "sub", "iat", "exp"])
                yield {
                    "token": resigned(
                        token, lambda claims, claim=claim: claims.update({claim: junk_value(rng)})
                    )
                }
            else:
                field = rng.choice(GCE_FIELDS)

                def edit(claims: dict, field: str = field) -> None:
                    claims["google"]["compute_engine"][field] = junk_value(rng)

                yield {"token": resigned(token, edit)}
        else:
            # Not the nonce: worker-runner asks for none, so any signed nonce is accepted.
            field = rng.choice(["vmId", "subscriptionId", "timeStamp"])
            yield sim.mint_attested(
                vm_name(worker.worker_id), NONCE, changes={field: junk_value(rng)}
            )


def unexpected_errors(check: Callable[[dict], None], proofs: Iterator[dict]) -> dict[str, int]:
    """Exception type and message -> how many proofs raised it (anything but a rejection)."""
    found: dict[str, int] = {}
    for proof in proofs:
        try:
            check(proof)
        except IdentityRejected:
            continue
        except Exception as exc:
            key = f"{type(exc).__name__}: {str(exc)[:120]}"
            found[key] = found.get(key, 0) + 1
    return found


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_mangled_and_oddly_typed_proofs_are_only_ever_rejected(api: ApiStack, kind: str):
    (worker,) = api.launch(kind, 1)
    genuine = api.proof(worker)
    check = verifier(api, kind)
    expectation = expected(api, worker)
    check.verify(genuine, expectation)  # the seed proof itself is accepted
    rng = random.Random(f"{SEED}-{kind}")

    errors = unexpected_errors(
        lambda p: check.verify(p, expectation), mangled_proofs(kind, genuine, rng)
    )
    errors |= unexpected_errors(
        lambda p: check.verify(p, expectation), typed_proofs(api, kind, worker, rng)
    )
    assert errors == {}


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_fuzzed_proofs_through_the_web_process_all_get_the_same_answer(api: ApiStack, kind: str):
    (worker,) = api.launch(kind, 1)
    genuine = api.proof(worker)
    rng = random.Random(f"{SEED}-api-{kind}")
    mangled = list(mangled_proofs(kind, genuine, rng))
    typed = list(typed_proofs(api, kind, worker, rng))
    sample = rng.sample(mangled, THROUGH_THE_API_PER_CLOUD // 2)
    sample += rng.sample(typed, THROUGH_THE_API_PER_CLOUD // 2)
    before = api.row(worker.worker_id)
    for proof in sample:
        if proof == genuine:
            continue  # a mangling that changed nothing
        reply = api.register(worker, proof)
        assert reply.refusal() == REJECTED[kind], proof
    assert api.row(worker.worker_id) == before
    assert api.events("identity-verifier-failed") == [] and api.events("api-error") == []
    assert api.register(worker, genuine).status == 200


def test_a_fuzzed_proof_older_than_its_worker_is_still_only_rejected(api: ApiStack):
    # The times a row gives the checks (requested_at) are part of what they compare against.
    (worker,) = api.launch("azure", 1)
    later = expected(api, worker)
    later = ExpectedIdentity(**{**later.__dict__, "requested_at": worker.created + timedelta(1)})
    genuine = api.proof(worker)
    rng = random.Random(f"{SEED}-late")
    errors = unexpected_errors(
        lambda p: verifier(api, "azure").verify(p, later),
        typed_proofs(api, "azure", worker, rng),
    )
    assert errors == {}
    with pytest.raises(IdentityRejected, match="older than the worker"):
        verifier(api, "azure").verify(genuine, later)
