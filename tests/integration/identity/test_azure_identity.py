"""Azure attested data: the real Azure provider creates the VMs on the simulated ARM, the sim
signs their attested data (PKCS#7, a metadata.azure.com leaf under a simulated Microsoft
root), and the verifier built from a config trusting that root accepts exactly the right one.
The network is a recording stand-in: a test fails if anything is fetched unexpectedly."""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from procs.providers import build_verifiers
from tests.fixtures.identity import (
    IDENTITY_AUDIENCE,
    RecordingFetch,
    expected_identity,
    over_the_wire,
)
from tests.fixtures.sim_arm import (
    AZURE_DEPLOYMENT,
    AZURE_RESOURCE_GROUP,
    AZURE_SUBSCRIPTION,
    azure_config,
)
from wm.calls import ACCOUNT_WIDE, CallClass
from wm.config.base import BudgetLimit
from wm.db import budgets
from wm.db.budgets import BucketKey
from wm.errors import ConfigError
from wm.model import LaunchSpec
from wm.providers import build_verifier, pkcs7
from wm.providers.azure import identity as azure_identity
from wm.providers.azure.names import vm_name
from wm.providers.azure.provider import AzureProvider
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult
from wm.providers.identity_fetch import Fetched, FetchRefused
from wm.workers.identity import ExpectedIdentity, IdentityRejected
from wmsim.azure import attested
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import example_launch_config

REGION = "eastus"
NONCE = "a1b2c3d4e5"
AIA_URL = "http://www.microsoft.com/pkiops/certs/Simulated%20Issuing%20CA.crt"
SPEC = LaunchSpec(
    launch_config_id="lc-identity",
    region=REGION,
    capacity_per_worker=1,
    launch_config=example_launch_config(
        REGION,
        vm_size="Standard_D2s_v5",
        launch_config_id="lc-identity",
        subscription_id=AZURE_SUBSCRIPTION,
        resource_group=AZURE_RESOURCE_GROUP,
    ),
    pool_owner="ci-admins@example.com",
)


@pytest.fixture
def launched(azure_provider: AzureProvider) -> list[LaunchResult]:
    intents = (LaunchIntent("w-az-1", "t-1"), LaunchIntent("w-az-2", "t-2"))
    results = azure_provider.create(LaunchBatch("proj-ci/identity", SPEC, intents, "batch-id"))
    assert all(r.cloud_id for r in results)
    return results


def expected(result: LaunchResult, **changes: object) -> ExpectedIdentity:
    return expected_identity(
        result, provider_id="azure-test", region=REGION, deployment_id=AZURE_DEPLOYMENT, **changes
    )


def mint(sim: SimArm, result: LaunchResult, nonce: str = NONCE, **overrides) -> dict[str, str]:
    return sim.mint_attested(vm_name(result.worker_id), nonce, **overrides)


def rejected(verifier, proof, expectation: ExpectedIdentity) -> str:
    with pytest.raises(IdentityRejected) as caught:
        verifier.verify(over_the_wire(proof), expectation)
    return caught.value.reason


def replace_in_der(document: str, old: str, new: str) -> str:
    der = base64.b64decode(document)
    assert len(old) == len(new) and der.count(old.encode()) == 1
    return base64.b64encode(der.replace(old.encode(), new.encode())).decode()


def test_the_provider_records_the_vm_id_the_document_names(
    sim_arm: SimArm, launched: list[LaunchResult]
):
    signed = pkcs7.parse_signed_data(base64.b64decode(mint(sim_arm, launched[0])["document"]))
    assert json.loads(signed.content or b"")["vmId"] == launched[0].provider_data["vmId"]
    assert launched[0].provider_data["vmId"] != launched[1].provider_data["vmId"]


def test_attested_data_fetched_from_the_vm_without_a_nonce_verifies(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, recording_fetch
):
    # As worker-runner does: no nonce asked for, {"document"} posted (IMDS signs its own
    # timestamp as the nonce).
    url = f"{sim_arm.endpoint}/_sim/attested/{vm_name(launched[0].worker_id)}"
    proof = requests.get(url, verify=str(sim_arm.cert_path), timeout=5).json()
    assert set(proof) == {"document"}
    azure_identity_verifier.verify(over_the_wire(proof), expected(launched[0]))
    assert recording_fetch.calls == []


def test_a_document_signed_over_any_nonce_verifies(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    azure_identity_verifier.verify(mint(sim_arm, launched[0], "anything1"), expected(launched[0]))


def test_signed_attributes_over_the_content_verify(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    proof = mint(sim_arm, launched[0], signed_attributes=True)
    azure_identity_verifier.verify(proof, expected(launched[0]))


def test_a_signer_named_one_label_under_metadata_azure_com_verifies(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    signer = attested.make_signer(common_name="eastus.metadata.azure.com")
    azure_identity_verifier.verify(mint(sim_arm, launched[0], signer=signer), expected(launched[0]))


def test_another_vms_valid_document_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    other = mint(sim_arm, launched[1])
    azure_identity_verifier.verify(other, expected(launched[1]))
    assert "vmId" in rejected(azure_identity_verifier, other, expected(launched[0]))


def test_a_proof_with_a_field_beside_the_document_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    # worker-manager's schema: {"document"} and nothing else (additionalProperties: false).
    proof = {**mint(sim_arm, launched[0]), "nonce": NONCE}
    assert "exactly the fields" in rejected(azure_identity_verifier, proof, expected(launched[0]))


def test_signed_content_edited_after_signing_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    # The second VM's genuine document, its signed vmId swapped for the first VM's.
    proof = mint(sim_arm, launched[1])
    mine, theirs = launched[0].provider_data["vmId"], launched[1].provider_data["vmId"]
    edited = {**proof, "document": replace_in_der(proof["document"], theirs, mine)}
    assert "signature" in rejected(azure_identity_verifier, edited, expected(launched[0]))


def test_content_that_differs_from_the_signed_message_digest_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    proof = mint(sim_arm, launched[1], signed_attributes=True)
    mine, theirs = launched[0].provider_data["vmId"], launched[1].provider_data["vmId"]
    edited = {**proof, "document": replace_in_der(proof["document"], theirs, mine)}
    reason = rejected(azure_identity_verifier, edited, expected(launched[0]))
    assert "other content" in reason


def test_a_detached_signature_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    proof = mint(sim_arm, launched[0], detached=True)
    assert "no signed data" in rejected(azure_identity_verifier, proof, expected(launched[0]))


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"changes": {"subscriptionId": "11111111-2222-3333-4444-555555555555"}}, "subscription"),
        ({"changes": {"subscriptionId": None}}, "subscription"),
        ({"changes": {"vmId": None}}, "vmId"),
        ({"changes": {"timeStamp": "now"}}, "timeStamp"),
        ({"changes": {"timeStamp": {"createdOn": "soon", "expiresOn": "later"}}}, "timeStamp"),
        # created_on: how long after (or, negative, before) the test runs
        ({"created_on": -timedelta(hours=8), "lifetime_s": 6 * 3600}, "expired"),
        ({"created_on": -timedelta(hours=2)}, "too old"),
        ({"created_on": timedelta(hours=1)}, "future"),
    ],
)
def test_genuinely_signed_data_with_wrong_claims_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, overrides, reason
):
    if "created_on" in overrides:  # the clock is read now, not when the tests were collected
        overrides = {**overrides, "created_on": datetime.now(UTC) + overrides["created_on"]}
    proof = mint(sim_arm, launched[0], **overrides)
    assert reason in rejected(azure_identity_verifier, proof, expected(launched[0]))


def test_data_older_than_the_worker_row_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    later = datetime.now(UTC) + timedelta(minutes=10)
    proof = mint(sim_arm, launched[0])
    reason = rejected(azure_identity_verifier, proof, expected(launched[0], requested_at=later))
    assert "older than the worker" in reason


def test_a_worker_without_a_recorded_vm_id_is_checked_against_its_vm_in_arm(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    # An ARM deployment's VM registering before a scan recorded its vmId: ARM's answer for
    # the row's VM stands in for the record, as in worker-manager's registerWorker.
    no_vm_id = expected(launched[0], provider_data={})
    azure_identity_verifier.verify(over_the_wire(mint(sim_arm, launched[0])), no_vm_id)
    assert "vmId" in rejected(azure_identity_verifier, mint(sim_arm, launched[1]), no_vm_id)
    gone = replace(no_vm_id, cloud_id=str(launched[0].cloud_id) + "-gone")
    assert "recorded" in rejected(azure_identity_verifier, mint(sim_arm, launched[0]), gone)


def test_the_web_process_looks_a_vm_up_drawing_from_the_accounts_shared_read_budget(
    engine, sim_arm: SimArm, launched: list[LaunchResult]
):
    # Scenario: the web process, wired as procs/ wires it, verifies a worker whose vmId no scan
    # has recorded yet: it asks ARM for the row's VM.
    # The read bucket refills so slowly here that the GET's token is still missing when the test
    # reads it (Azure's own 25/s gives a token back every 40 ms, less than a busy machine takes).
    slow_reads = BudgetLimit(burst=250, per_s=0.001)
    config = azure_config(
        sim_arm,
        identity_roots=(str(sim_arm.identity_trust_path),),
        budgets={CallClass.READ.value: slow_reads},
    )
    verifiers = build_verifiers([config], AZURE_DEPLOYMENT, IDENTITY_AUDIENCE, engine)
    reads = BucketKey(config.budget_account, ACCOUNT_WIDE, CallClass.READ)
    assert budgets.take(engine, reads, 0, 0) is None  # no call has drawn from it yet
    gets = sim_arm.faults.counts().get("VirtualMachines_Get", 0)

    proof = over_the_wire(mint(sim_arm, launched[0]))
    verifiers[config.id].verify(proof, expected(launched[0], provider_data={}))

    # Outcome: the GET went to ARM, and it was paid for from the account's read bucket, the
    # one the provider's scans draw from.
    assert sim_arm.faults.counts()["VirtualMachines_Get"] == gets + 1
    drawn = budgets.take(engine, reads, 0, 0)
    assert drawn is not None
    assert drawn.tokens <= slow_reads.usable_burst - 1


@pytest.mark.parametrize(
    "names",
    [
        ("evil.example.com", None),
        ("metadata.azure.com.evil.test", None),
        ("evilmetadata.azure.com", None),
        ("a.b.metadata.azure.com", None),
        ("evil.example.com", ["evil.example.com", "metadata.azure.com.evil.test"]),
    ],
)
def test_a_signer_with_another_name_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, names
):
    common_name, dns_names = names
    signer = attested.make_signer(common_name=common_name, dns_names=dns_names)
    proof = mint(sim_arm, launched[0], signer=signer)
    assert "signer is not" in rejected(azure_identity_verifier, proof, expected(launched[0]))


def test_a_look_alike_chain_under_an_untrusted_root_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, recording_fetch
):
    proof = mint(sim_arm, launched[0], signer=attested.make_signer(trusted=False))
    assert "trusted root" in rejected(azure_identity_verifier, proof, expected(launched[0]))
    assert recording_fetch.calls == []


def test_an_expired_signer_certificate_is_rejected(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier
):
    now = dt.datetime.now(dt.UTC)
    signer = attested.make_signer(
        not_before=now - dt.timedelta(days=30), not_after=now - dt.timedelta(days=1)
    )
    proof = mint(sim_arm, launched[0], signer=signer)
    assert "expired" in rejected(azure_identity_verifier, proof, expected(launched[0]))


def test_a_leaf_of_an_unlisted_issuer_and_no_url_is_rejected_without_a_fetch(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, recording_fetch
):
    proof = mint(sim_arm, launched[0], signer=attested.make_signer(unlisted_issuer=True))
    assert "trusted root" in rejected(azure_identity_verifier, proof, expected(launched[0]))
    assert recording_fetch.calls == []


def test_a_missing_intermediate_is_fetched_once_from_an_allowed_aia_url(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, recording_fetch
):
    recording_fetch.answers[AIA_URL] = attested.intermediate_der()
    signer = attested.make_signer(unlisted_issuer=True, aia_url=AIA_URL)
    for worker in launched:
        azure_identity_verifier.verify(mint(sim_arm, worker, signer=signer), expected(worker))
    assert recording_fetch.calls == [AIA_URL]  # the second verification used the cache


def test_a_fetched_certificate_still_has_to_chain_to_a_trusted_root(
    sim_arm: SimArm, launched: list[LaunchResult], azure_identity_verifier, recording_fetch
):
    recording_fetch.answers[AIA_URL] = attested.intermediate_der(trusted=False)
    signer = attested.make_signer(trusted=False, unlisted_issuer=True, aia_url=AIA_URL)
    proof = mint(sim_arm, launched[0], signer=signer)
    assert "trusted root" in rejected(azure_identity_verifier, proof, expected(launched[0]))


@pytest.fixture
def local_http() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 that records every request it gets."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(attested.intermediate_der())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://{local}/ca.crt", "IP address"),
        ("http://169.254.169.254/metadata/ca.crt", "IP address"),
        ("http://[fd00:ec2::254]/ca.crt", "IP address"),
        ("http://[::1]/ca.crt", "IP address"),
        ("http://2130706433/ca.crt", "IP address"),
        ("http://0x7f.1/ca.crt", "IP address"),
        ("http://localhost/ca.crt", "allow-list"),
        ("http://metadata.google.internal/computeMetadata/v1/", "allow-list"),
        ("http://www.microsoft.com.evil.test/ca.crt", "allow-list"),
        ("http://evil.test/www.microsoft.com/ca.crt", "allow-list"),
        ("ftp://www.microsoft.com/pkiops/certs/ca.crt", "scheme"),
        ("http://user@www.microsoft.com/pkiops/certs/ca.crt", "user info"),
        ("http://www.microsoft.com:8080/pkiops/certs/ca.crt", "port"),
        ("http://www.microsoft.com/ca.crt", "path"),
        ("http://www.microsoft.com/pkiops/certs/../../evil/ca.crt", "dot segments"),
    ],
)
def test_certificate_urls_off_the_allow_list_are_refused_without_a_request(
    sim_arm: SimArm, launched: list[LaunchResult], local_http, url: str, reason: str
):
    local, seen = local_http
    config = azure_config(sim_arm, identity_roots=(str(sim_arm.identity_trust_path),))
    # The real fetcher: were the URL not refused first, the request would go out.
    verifier = build_verifier(config, AZURE_DEPLOYMENT, IDENTITY_AUDIENCE)
    target = url.format(local=local)
    signer = attested.make_signer(unlisted_issuer=True, aia_url=target)
    proof = mint(sim_arm, launched[0], signer=signer)
    assert reason in rejected(verifier, proof, expected(launched[0]))
    assert seen == []


class FlakyFetch(RecordingFetch):
    """The network with some issuers down: a URL in `down` fails as a refused connection."""

    def __init__(self, answers: dict[str, bytes], down: set[str]) -> None:
        super().__init__(answers)
        self.down = down

    def __call__(self, url: str, max_bytes: int) -> Fetched:
        if url in self.down:
            self.calls.append(url)
            raise FetchRefused("fetch failed")
        return super().__call__(url, max_bytes)


DOWN_URL = "http://www.microsoft.com/pkiops/certs/Simulated%20Issuing%20CA%20down.crt"
JUNK_URL = "https://caissuers.microsoft.com/pkiops/certs/Simulated%20Issuing%20CA.html"
GOOD_URL = "http://caissuers.microsoft.com/pkiops/certs/Simulated%20Issuing%20CA.crt"
REFUSED_URL = "http://evil.example/ca.crt"


@pytest.mark.parametrize(
    ("urls", "fetched", "outcome"),
    [
        ([REFUSED_URL, GOOD_URL], [GOOD_URL], None),
        ([DOWN_URL, GOOD_URL], [DOWN_URL, GOOD_URL], None),
        ([JUNK_URL, GOOD_URL], [JUNK_URL, GOOD_URL], None),
        ([REFUSED_URL, DOWN_URL, GOOD_URL], [DOWN_URL, GOOD_URL], None),
        # At most AIA_MAX_FETCHES fetches a document: a third URL is not tried.
        ([DOWN_URL, JUNK_URL, GOOD_URL], [DOWN_URL, JUNK_URL], "fetch failed; fetched issuer"),
        ([REFUSED_URL, DOWN_URL], [DOWN_URL], "allow-list; fetch failed"),
    ],
)
def test_each_issuer_url_is_tried_in_turn_until_one_gives_a_certificate(
    sim_arm: SimArm, launched: list[LaunchResult], urls, fetched, outcome
):
    # Scenario: the signer's issuer is not listed and its leaf names several CA Issuers URLs,
    # the first refused by the allow-list, down, or answering a web page.
    network = FlakyFetch(
        {GOOD_URL: attested.intermediate_der(), JUNK_URL: b"<html>moved</html>"}, {DOWN_URL}
    )
    config = azure_config(sim_arm, identity_roots=(str(sim_arm.identity_trust_path),))
    verifier = azure_identity.make_verifier(
        config, AZURE_DEPLOYMENT, IDENTITY_AUDIENCE, fetch=network
    )
    signer = attested.make_signer(unlisted_issuer=True, aia_url=urls)
    proof = over_the_wire(mint(sim_arm, launched[0], signer=signer))
    if outcome is None:
        verifier.verify(proof, expected(launched[0]))
    else:
        reason = rejected(verifier, proof, expected(launched[0]))
        assert reason.startswith("signer does not chain to a trusted root")
        assert outcome in reason
    assert network.calls == fetched


def test_identity_roots_are_optional_and_must_be_certificates(sim_arm: SimArm, tmp_path: Path):
    junk = tmp_path / "junk.pem"
    junk.write_text("no certificate here")
    for roots in ((str(tmp_path / "missing.pem"),), (str(junk),)):
        config = azure_config(sim_arm, identity_roots=roots)
        with pytest.raises(ConfigError, match="identity_roots"):
            build_verifier(config, AZURE_DEPLOYMENT, IDENTITY_AUDIENCE)
    assert build_verifier(azure_config(sim_arm), AZURE_DEPLOYMENT, IDENTITY_AUDIENCE)


def test_without_identity_roots_only_microsofts_shipped_roots_are_trusted(
    sim_arm: SimArm, launched: list[LaunchResult]
):
    # The simulated ARM's root comes in through identity_roots only: without it, the shipped
    # Microsoft roots trust none of its documents.
    verifier = azure_identity.make_verifier(
        azure_config(sim_arm), AZURE_DEPLOYMENT, IDENTITY_AUDIENCE, fetch=RecordingFetch()
    )
    proof = mint(sim_arm, launched[0])
    assert "trusted root" in rejected(verifier, proof, expected(launched[0]))


def test_the_subscription_compared_is_the_providers(sim_arm: SimArm, launched: list[LaunchResult]):
    verifier = azure_identity.make_verifier(
        azure_config(
            sim_arm,
            subscription_id="99999999-0000-0000-0000-000000000000",
            identity_roots=(str(sim_arm.identity_trust_path),),
        ),
        AZURE_DEPLOYMENT,
        IDENTITY_AUDIENCE,
        fetch=RecordingFetch(),
    )
    proof = mint(sim_arm, launched[0])
    assert AZURE_SUBSCRIPTION in launched[0].cloud_id
    assert "subscription" in rejected(verifier, proof, expected(launched[0]))


def test_the_sim_answers_404_for_a_vm_it_does_not_hold(sim_arm: SimArm):
    answer = requests.get(
        f"{sim_arm.endpoint}/_sim/attested/vm-nobody?nonce=1",
        verify=str(sim_arm.cert_path),
        timeout=5,
    )
    assert answer.status_code == 404
