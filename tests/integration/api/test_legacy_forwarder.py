"""The web process's client of the legacy worker-manager (wm/take_over/legacy_forwarder.py)
against a real HTTP server: a forwarded request arrives unchanged, and a legacy that hangs or is
not there is Taskcluster's 500 naming it, within the deadline, never a hang."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.recording_upstream import RecordingUpstream
from wm.take_over.legacy_forwarder import LegacyForwarder, LegacyUnavailable
from wm.tc.credentials import IssuerCredentials
from wmsim.postgres import free_port

TARGET = "/api/worker-manager/v1/worker-pool/proj%2Fa?x=1&x=2"
HEADERS = [
    (b"host", b"tc.example.com:8443"),
    (b"authorization", b'Hawk id="c", ts="1", nonce="n", mac="m"'),
    (b"content-type", b"application/json"),
    (b"x-forwarded-proto", b"https"),
    (b"connection", b"keep-alive"),  # hop-by-hop: this connection's, not the request's
]


def test_a_request_is_forwarded_as_it_came_and_the_answer_returned_as_it_went():
    with RecordingUpstream() as upstream:
        upstream.answers[("POST", "/worker-pool/proj/a")] = (409, {"code": "RequestConflict"}, {})
        legacy = LegacyForwarder(upstream.url, None)

        answer = asyncio.run(_forward(legacy, "POST", b'{"a":  1}'))

    (record,) = upstream.requests
    assert (record.method, record.target, record.body) == ("POST", TARGET, b'{"a":  1}')
    sent = [(k.lower(), v) for k, v in record.headers]
    assert ("host", "tc.example.com:8443") in sent
    assert ("authorization", 'Hawk id="c", ts="1", nonce="n", mac="m"') in sent
    assert ("x-forwarded-proto", "https") in sent and ("content-length", "9") in sent
    assert answer.status == 409 and answer.body == b'{"code": "RequestConflict"}'
    assert (b"X-Legacy", b"yes") in answer.headers


def test_the_legacys_side_of_a_list_is_read_with_wms_own_client():
    with RecordingUpstream(providers=[{"providerId": "p", "providerType": "aws"}]) as upstream:
        legacy = LegacyForwarder(upstream.url, IssuerCredentials("static/worker-manager", "token"))

        answer = asyncio.run(_read(legacy))

    assert answer == {"providers": [{"providerId": "p", "providerType": "aws"}]}
    (record,) = upstream.requests
    assert record.target == "/api/worker-manager/v1/providers?limit=5"
    assert 'id="static/worker-manager"' in (record.header("Authorization") or "")


def test_a_list_the_legacy_refuses_wms_client_is_read_anonymously():
    # worker-manager's own client holds no list scopes: the anonymous role may grant them.
    with RecordingUpstream(providers=[{"providerId": "p", "providerType": "aws"}]) as upstream:
        upstream.refused_clients.add("static/worker-manager")
        legacy = LegacyForwarder(upstream.url, IssuerCredentials("static/worker-manager", "token"))

        answer = asyncio.run(_read(legacy))

    assert answer["providers"] == [{"providerId": "p", "providerType": "aws"}]
    signed, anonymous = upstream.requests
    assert signed.header("Authorization") and anonymous.header("Authorization") is None


def test_a_legacy_that_does_not_answer_in_time_is_a_500_naming_it():
    with RecordingUpstream(delay_s=30.0) as upstream:
        legacy = LegacyForwarder(upstream.url, None, timeout_s=0.5)
        started = time.monotonic()

        with pytest.raises(LegacyUnavailable) as failure:
            asyncio.run(_forward(legacy, "GET", b""))

    assert time.monotonic() - started < 10  # far below the delay, on a busy machine too
    assert failure.value.status == 500 and failure.value.code == "InternalServerError"
    assert f"{upstream.url} did not answer in time" in failure.value.message


@pytest.mark.parametrize("call", ["forward", "read"])
def test_a_legacy_that_is_not_there_is_a_500_naming_it(call):
    url = f"http://127.0.0.1:{free_port()}"
    legacy = LegacyForwarder(url, None, timeout_s=2.0)

    with pytest.raises(LegacyUnavailable) as failure:
        asyncio.run(_forward(legacy, "GET", b"") if call == "forward" else _read(legacy))

    assert failure.value.status == 500 and f"{url} failed" in failure.value.message


async def _forward(legacy: LegacyForwarder, method: str, body: bytes):
    try:
        return await legacy.forward(method, TARGET, HEADERS, body)
    finally:
        await legacy.close()


async def _read(legacy: LegacyForwarder):
    try:
        return await legacy.read("/api/worker-manager/v1/providers", {"limit": "5"})
    finally:
        await legacy.close()
