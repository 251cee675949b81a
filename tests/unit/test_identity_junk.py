"""Junk proofs are refused by cheap checks, before any key is loaded, any signature is checked
or anything is fetched (issue 9, item 14: a boot storm mixed with junk)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from wm.providers.aws.identity import AwsIdentityVerifier
from wm.providers.azure import identity as azure_identity
from wm.providers.gcp import identity as gcp_identity
from wm.providers.identity_fetch import Fetched
from wm.workers.identity import ExpectedIdentity, IdentityRejected

EXPECTED = ExpectedIdentity(
    deployment_id="d",
    provider_id="p",
    pool_id="pool",
    worker_id="w-1",
    region="us-east-1",
    cloud_id="i-0123456789abcdef0",
    audience="https://wm.example.test",
    provider_data={"vmId": "00000000-0000-0000-0000-000000000001"},
    tc_worker_id="i-0123456789abcdef0",
)
HUGE = "A" * (70 * 1024)


class Spy:
    """Counts every use: a key's verify, a key set's load, a fetch."""

    def __init__(self) -> None:
        self.calls = 0

    def verify(self, *args: Any) -> None:
        self.calls += 1

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return Fetched(b'{"keys": []}', {})


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


COMMON_JUNK: list[Any] = [
    None,
    "a string",
    42,
    ["document", "signature"],
    {},
    {"unexpected": "field"},
]
AWS_JUNK = [
    *COMMON_JUNK,
    {"document": "{}"},
    {"document": "{}", "signature": "c2ln", "extra": 1},
    {"document": 1, "signature": "c2ln"},
    {"document": {"instanceId": "i-1"}, "signature": "c2ln"},
    {"document": "{}", "signature": None},
    {"document": HUGE, "signature": "c2ln"},
    {"document": "{}", "signature": HUGE},
    {"document": "{}", "signature": "not base64 !!"},
    {"document": "{}", "signature": ""},
    {"document": "not json", "signature": b64("x" * 128)},
    {"document": '{"instanceId": "\ud800"}', "signature": b64("x" * 128)},
    {"document": "[1, 2, 3]", "signature": b64("x" * 128)},
    {"document": '{"instanceId": "i-other"}', "signature": b64("x" * 128)},
    {"document": json.dumps({"instanceId": EXPECTED.cloud_id}), "signature": b64("x" * 128)},
]
GCP_JUNK = [
    *COMMON_JUNK,
    {"token": None},
    {"token": HUGE},
    {"token": ""},
    {"token": "a.b"},
    {"token": "a.b.c.d"},
    {"token": "..."},
    {"token": "!!.!!.!!"},
    {"token": f"{b64url({'alg': 'none'})}.{b64url({})}.e30"},
    {"token": f"{b64url({'alg': 'HS256', 'kid': 'k'})}.{b64url({})}.e30"},
    {"token": f"{b64url({'alg': 'RS256'})}.{b64url({})}.e30"},
    {"token": f"{b64url({'alg': 'RS256', 'kid': 'k', 'jku': 'http://x'})}.{b64url({})}.e30"},
    {"token": f"{b64url({'alg': 'RS256', 'kid': 'k'})}.bm90IGpzb24.e30"},
    {"token": f"{b64url({'alg': 'RS256', 'kid': 'k'})}.{b64url({'iss': 'x'})}.e30"},
    {"token": f"{b64url({'alg': 'RS256', 'kid': 'k'})}.{b64url({'aud': 'x'})}.e30"},
    {"token": "\ud800.\ud800.\ud800"},
]
AZURE_JUNK = [
    *COMMON_JUNK,
    # worker-runner sends {"document"} alone: a nonce beside it is a field too many.
    {"document": "MIIB", "nonce": "abc"},
    {"document": 42},
    {"document": ""},
    {"document": HUGE},
    {"document": "not base64 !!"},
    {"document": b64("not DER at all")},
    {"document": b64(b"\x30\x80\x00\x00")},  # BER indefinite length
    {"document": b64(b"\x30\x84\xff\xff\xff\xff")},  # length past the end
    {"document": b64(b"\x30\x03\x06\x01\x00" + b"\x00" * 10)},
    {"document": b64(b"\x30" + b"\x82\x10\x00" + b"\x30" * 4096)},
]


@pytest.fixture
def aws() -> tuple[AwsIdentityVerifier, Spy]:
    key = Spy()
    return AwsIdentityVerifier("p", {"us-east-1": key}, key), key  # type: ignore[arg-type]


@pytest.fixture
def gcp() -> tuple[gcp_identity.GcpIdentityVerifier, Spy]:
    spy = Spy()

    def load() -> tuple[bytes, float]:
        spy()
        return b'{"keys": []}', 60.0

    keys = gcp_identity.JwksKeys(load)
    verifier = gcp_identity.GcpIdentityVerifier(
        "p", "proj", EXPECTED.audience, keys, service_account_id="104200000000000000001"
    )
    return verifier, spy


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> tuple[azure_identity.AzureIdentityVerifier, Spy]:
    spy = Spy()
    monkeypatch.setattr(azure_identity, "check_signature", spy)
    monkeypatch.setattr(azure_identity, "_chain_verifier", spy)
    verifier = azure_identity.AzureIdentityVerifier(
        "p", "00000000-0000-0000-0000-00000000a2e0", (), azure_identity.AiaCache(spy)
    )
    return verifier, spy


@pytest.mark.parametrize("proof", AWS_JUNK, ids=range(len(AWS_JUNK)))
def test_aws_junk_is_rejected_without_crypto(aws, proof):
    verifier, key = aws
    with pytest.raises(IdentityRejected):
        verifier.verify(proof, EXPECTED)
    assert key.calls == 0


@pytest.mark.parametrize("proof", GCP_JUNK, ids=range(len(GCP_JUNK)))
def test_gcp_junk_is_rejected_without_loading_keys(gcp, proof):
    verifier, load = gcp
    with pytest.raises(IdentityRejected):
        verifier.verify(proof, EXPECTED)
    assert load.calls == 0


@pytest.mark.parametrize("proof", AZURE_JUNK, ids=range(len(AZURE_JUNK)))
def test_azure_junk_is_rejected_without_crypto_or_fetches(azure, proof):
    verifier, spy = azure
    with pytest.raises(IdentityRejected):
        verifier.verify(proof, EXPECTED)
    assert spy.calls == 0


def test_rejection_reasons_never_quote_the_proof(aws, gcp, azure):
    marker = "SECRET-MARKER-1234"
    proofs = [
        {"document": marker, "signature": marker},
        {"token": f"{marker}.{marker}.{marker}"},
        {"document": marker},
        {marker: marker},
    ]
    for verifier, _ in (aws, gcp, azure):
        for proof in proofs:
            with pytest.raises(IdentityRejected) as caught:
                verifier.verify(proof, EXPECTED)
            assert marker not in caught.value.reason


def test_junk_costs_microseconds(aws, gcp, azure):
    started = time.perf_counter()
    for _ in range(100):
        for verifier, junk in ((aws[0], AWS_JUNK), (gcp[0], GCP_JUNK), (azure[0], AZURE_JUNK)):
            for proof in junk:
                with pytest.raises(IdentityRejected):
                    verifier.verify(proof, EXPECTED)
    rejections = 100 * (len(AWS_JUNK) + len(GCP_JUNK) + len(AZURE_JUNK))
    # A generous bound on a shared machine; typically ~20 us each.
    assert (time.perf_counter() - started) / rejections < 0.002
