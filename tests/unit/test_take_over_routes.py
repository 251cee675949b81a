"""Which side answers each worker-manager request during a take-over, as a table: every
endpoint of the endpoint table (Taskcluster's API reference: tests/unit/test_api_endpoint_table.py),
the pool and provider each names, and the decision for a pool or provider wm has and one it has
not."""

from __future__ import annotations

import base64
import json

import pytest

from wm.api.endpoint_table import ENDPOINTS, PoolIn
from wm.take_over.routes import (
    START,
    MergedToken,
    Side,
    TokenInvalid,
    after_legacy_page,
    after_wm_page,
    decide,
    decode_digits_token,
    decode_token,
    encode_digits_token,
    encode_token,
    match,
    subject,
    sum_error_stats,
    wms_pool,
)

WMS = {"azure2", "azure_trusted"}  # the providers wm has taken over

# For each endpoint: a request as a client sends it (pool ids escaped as the client escapes
# them), the pool and provider it names, and the decision when that pool is wm's / is not.
P = "proj-a%2Fwin"  # the pool proj-a/win, as sent
REQUESTS = {
    "ping": ("GET", "/ping", {}, b"", None, None, "serve", "serve"),
    "lbheartbeat": ("GET", "/__lbheartbeat__", {}, b"", None, None, "serve", "serve"),
    "version": ("GET", "/__version__", {}, b"", None, None, "serve", "serve"),
    "heartbeat": ("GET", "/__heartbeat__", {}, b"", None, None, "serve", "serve"),
    "listProviders": ("GET", "/providers", {}, b"", None, None, "merge", "merge"),
    "listWorkerPools": ("GET", "/worker-pools", {}, b"", None, None, "merge", "merge"),
    "listWorkerPoolsStats": ("GET", "/worker-pools/stats", {}, b"", None, None, "merge", "merge"),
    "createWorkerPool": (
        "PUT",
        f"/worker-pool/{P}",
        {},
        b'{"providerId": "aws"}',
        "proj-a/win",
        "aws",
        "serve",
        "forward",
    ),
    "updateWorkerPool": (
        "POST",
        f"/worker-pool/{P}",
        {},
        b'{"providerId": "aws"}',
        "proj-a/win",
        "aws",
        "serve",
        "forward",
    ),
    "deleteWorkerPool": (
        "DELETE",
        f"/worker-pool/{P}",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "listWorkerPoolLaunchConfigs": (
        "GET",
        f"/worker-pool/{P}/launch-configs",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "workerPoolStats": (
        "GET",
        f"/worker-pool/{P}/stats",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "workerPool": ("GET", f"/worker-pool/{P}", {}, b"", "proj-a/win", None, "serve", "forward"),
    "reportWorkerError": (
        "POST",
        f"/worker-pool-errors/{P}",
        {},
        b"{}",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "workerPoolErrorStats": (
        "GET",
        "/worker-pool-errors/stats",
        {"workerPoolId": "proj-a/win"},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "listWorkerPoolErrors": (
        "GET",
        f"/worker-pool-errors/{P}",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "listWorkersForWorkerGroup": (
        "GET",
        f"/workers/{P}/westus",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "worker": ("GET", f"/workers/{P}/westus/vm-1", {}, b"", "proj-a/win", None, "serve", "forward"),
    "createWorker": (
        "PUT",
        f"/workers/{P}/westus/vm-1",
        {},
        b"{}",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "updateWorker": (
        "POST",
        f"/workers/{P}/westus/vm-1",
        {},
        b"{}",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "removeWorker": (
        "DELETE",
        f"/workers/{P}/westus/vm-1",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "shouldWorkerTerminate": (
        "GET",
        f"/workers/{P}/westus/vm-1/should-terminate",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "listWorkersForWorkerPool": (
        "GET",
        f"/workers/{P}",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "registerWorker": (
        "POST",
        "/worker/register",
        {},
        b'{"workerPoolId": "proj-a/win", "providerId": "aws"}',
        "proj-a/win",
        "aws",
        # By its provider alone: a provider wm has not is the legacy's, whatever the pool.
        "forward",
        "forward",
    ),
    "reregisterWorker": (
        "POST",
        "/worker/reregister",
        {},
        b'{"workerPoolId": "proj-a/win", "secret": "s"}',
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "listWorkers": (
        "GET",
        "/provisioners/proj-a/worker-types/win/workers",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
    "getWorker": (
        "GET",
        "/provisioners/proj-a/worker-types/win/workers/westus/vm-1",
        {},
        b"",
        "proj-a/win",
        None,
        "serve",
        "forward",
    ),
}


def test_every_endpoint_of_the_table_is_routed_here():
    assert set(REQUESTS) == {e.name for e in ENDPOINTS}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_each_endpoint_is_routed_by_the_pool_or_provider_it_names(name):
    method, path, query, body, pool, provider, if_wms, if_not = REQUESTS[name]

    about = subject(method, path, query, body)

    assert about.endpoint is not None and about.endpoint.name == name
    assert (about.pool_id, about.provider_id) == (pool, provider)
    assert decide(about, WMS, pool_is_wms=True).value == if_wms
    assert decide(about, WMS, pool_is_wms=False).value == if_not


@pytest.mark.parametrize(
    ("scenario", "method", "path", "body", "decision"),
    [
        (
            "registers with a provider wm has, naming no pool",
            "POST",
            "/worker/register",
            b'{"providerId": "azure2"}',
            "serve",
        ),
        (
            "defines a pool for a provider wm has",
            "PUT",
            f"/worker-pool/{P}",
            b'{"providerId": "azure2"}',
            "serve",
        ),
        (
            "moves a pool wm does not have to wm's provider",
            "POST",
            f"/worker-pool/{P}",
            b'{"providerId": "azure_trusted"}',
            "serve",
        ),
        ("a registration wm cannot read", "POST", "/worker/register", b"{not json", "serve"),
        ("a reregistration naming no pool", "POST", "/worker/reregister", b"[]", "serve"),
    ],
)
def test_nothing_for_a_provider_wm_has_is_ever_forwarded(scenario, method, path, body, decision):
    about = subject(method, path, {}, body)

    assert decide(about, WMS, pool_is_wms=False).value == decision, scenario


@pytest.mark.parametrize(
    ("method", "path", "query", "decision"),
    [
        ("GET", "/worker-pool-errors/stats", {}, "merge"),  # every pool's errors
        ("GET", "/worker-pool/proj-a/win", {}, "forward"),  # the pool id with a plain slash
        ("GET", "/no-such-endpoint", {}, "forward"),  # not wm's API: the legacy answers it
        ("PATCH", "/worker-pools", {}, "forward"),
    ],
)
def test_the_rest(method, path, query, decision):
    assert decide(subject(method, path, query, b""), WMS, pool_is_wms=False).value == decision


@pytest.mark.parametrize(
    ("pool_is_wms", "decision"),
    [(True, "serve"), (False, "forward")],
    ids=["imported", "not-yet-imported"],
)
def test_a_registration_with_a_provider_wm_has_is_wms_once_its_pool_is(pool_is_wms, decision):
    # Between routing the rootUrl to wm and `wm import`, the legacy still runs the provider's
    # pools: a worker it launched registers there, not at wm, which knows nothing of it yet.
    body = b'{"providerId": "azure2", "workerPoolId": "proj-a/win"}'
    about = subject("POST", "/worker/register", {}, body)

    assert decide(about, WMS, pool_is_wms=pool_is_wms).value == decision


def test_a_pool_id_is_unescaped_and_its_slash_kept_in_one_segment():
    matched = match("GET", "/workers/proj-a%2Fwin/westus/vm-1/should-terminate")

    assert matched is not None
    endpoint, params = matched
    assert endpoint.pool_in is PoolIn.PATH
    assert params == {"workerPoolId": "proj-a/win", "workerGroup": "westus", "workerId": "vm-1"}


def test_a_pool_id_with_a_plain_slash_is_one_pool_too():
    # worker-manager's `{*workerPoolId}` takes it so, and a pool id always has one slash.
    matched = match("GET", "/workers/proj-a/win/westus/vm-1/should-terminate")

    assert matched is not None
    assert matched[1] == {"workerPoolId": "proj-a/win", "workerGroup": "westus", "workerId": "vm-1"}


@pytest.mark.parametrize(
    ("exists", "provider", "wms"),
    [(True, "azure2", True), (True, None, True), (True, "aws", False), (False, None, False)],
)
def test_a_pool_is_wms_under_a_provider_it_has_or_none(exists, provider, wms):
    assert wms_pool(exists, provider, WMS) is wms


def test_merged_tokens_name_the_side_and_its_own_token():
    for token in (
        START,
        MergedToken(Side.WM, "bzE"),
        MergedToken(Side.LEGACY, "abc"),
        MergedToken(Side.LEGACY),
    ):
        assert decode_token(encode_token(token)) == token
    assert decode_token(None) == START and decode_token("") == START
    for junk in ("x", "bzE", encode_token(START)[:-2] + "!!"):
        with pytest.raises(TokenInvalid):
            decode_token(junk)


def test_list_providers_tokens_are_digits_naming_the_side_first():
    for token in (
        START,
        MergedToken(Side.WM, "100"),
        MergedToken(Side.LEGACY, "7"),
        MergedToken(Side.LEGACY),
    ):
        text = encode_digits_token(token)
        assert text.isdigit() and decode_digits_token(text) == token
    assert decode_digits_token(None) == START
    for junk in ("3", "1a", "x"):
        with pytest.raises(TokenInvalid):
            decode_digits_token(junk)


def test_wms_pages_come_first_then_the_legacys():
    assert after_wm_page("bzE") == MergedToken(Side.WM, "bzE")
    assert after_wm_page(None) == MergedToken(Side.LEGACY)
    assert after_legacy_page("abc") == MergedToken(Side.LEGACY, "abc")
    assert after_legacy_page(None) is None


def test_every_pools_error_stats_add_up_key_by_key():
    mine = {"total": 2, "daily": {"d1": 1, "d2": 1}, "code": {"a": 2}}
    theirs = {"total": 3, "daily": {"d2": 3}, "code": {"b": 3}, "title": {"t": 3}}

    assert sum_error_stats(mine, theirs) == {
        "total": 5,
        "daily": {"d1": 1, "d2": 4},
        "code": {"a": 2, "b": 3},
        "title": {"t": 3},
    }


def test_a_body_field_that_is_not_a_non_empty_string_names_nothing():
    for body in (
        b'{"workerPoolId": 7, "providerId": ""}',
        b'{"workerPoolId": "", "providerId": [1]}',
    ):
        about = subject("POST", "/worker/register", {}, body)
        assert (about.pool_id, about.provider_id) == (None, None), body


@pytest.mark.parametrize("inner", ["", "a", "ab", "abc", "abcd", "a/b+c=d", None])
def test_a_merged_token_is_compact_url_safe_base64_of_any_length(inner):
    token = MergedToken(Side.LEGACY, inner)
    text = encode_token(token)
    assert not text.endswith("=") and "+" not in text and "/" not in text
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    assert raw == json.dumps({"s": "legacy", "t": inner}, separators=(",", ":")).encode()
    assert decode_token(text) == token


def test_error_stats_that_are_not_counts_are_left_out_not_added():
    mine = {"flagged": True, "total": 2, "daily": {"d1": "n/a", "d2": 1, "d3": False}}
    theirs = {"total": 1, "daily": {"d2": 2}}
    assert sum_error_stats(mine, theirs) == {"total": 3, "daily": {"d2": 3}}
