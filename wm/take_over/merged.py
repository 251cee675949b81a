"""The list endpoints that span pools, during a take-over: wm's side, then the legacy
worker-manager's, in pages whose continuation token says which side and where in it
(wm/take_over/routes.py). A pool or provider wm has is listed by wm alone: the legacy still
lists a pool it exported under a provider it no longer has, and that copy is dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from wm.api.endpoint import ApiContext, run
from wm.api.paging import page_from_query
from wm.db import api_reads
from wm.take_over.legacy_forwarder import LegacyForwarder
from wm.take_over.routes import (
    Side,
    TokenInvalid,
    after_legacy_page,
    after_wm_page,
    decode_digits_token,
    decode_token,
    encode_digits_token,
    encode_token,
    wms_pool,
)
from wm.tc.errors import TaskclusterError

Rows = list[dict[str, Any]]
# wm's page from its own token and the limit: its rows (as JSON) and its next token.
WmPage = Callable[[str | None, str | None], Awaitable[tuple[Rows, str | None]]]
# The legacy's rows wm does not have (wm's copy wins).
Theirs = Callable[[Rows], Awaitable[Rows]]


async def merged_page(
    legacy: LegacyForwarder,
    continuation_token: str | None,
    limit: str | None,
    *,
    wm_page: WmPage,
    legacy_path: str,
    key: str,
    theirs: Theirs,
    digits: bool = False,
) -> tuple[Rows, str | None]:
    """One page of a list spanning both sides, and the token of the next (None: the end).

    wm's pages first; the page where wm's list ends is filled up from the legacy's first one,
    so `limit` holds across the seam (`digits`: tokens of digits alone, listProviders'). A
    legacy page may come out shorter than its limit (its
    copies of wm's pools are dropped), as Taskcluster's own pages may: clients follow tokens."""
    page_from_query(None, limit)  # the limit's check and words, as on any list
    encode = encode_digits_token if digits else encode_token
    try:
        token = (decode_digits_token if digits else decode_token)(continuation_token)
    except TokenInvalid:
        raise TaskclusterError("InputError", "Invalid continuation token") from None
    rows: Rows = []
    inner = token.inner
    if token.side is Side.WM:
        rows, wm_next = await wm_page(inner, limit)
        after = after_wm_page(wm_next)
        assert after is not None
        if after.side is Side.WM:
            return rows, encode(after)
        room = int(limit) - len(rows) if limit else None
        if room is not None and room <= 0:
            return rows, encode(after)
        limit, inner = (str(room) if room is not None else None), None
    query = {"limit": limit, "continuationToken": inner}
    answer = await legacy.read(legacy_path, {k: v for k, v in query.items() if v})
    found = answer.get(key)
    items = [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
    next_token = answer.get("continuationToken")
    after = after_legacy_page(next_token if isinstance(next_token, str) else None)
    try:
        token_text = encode(after) if after else None
    except TokenInvalid:  # not the kind of token this endpoint's clients may send back
        raise TaskclusterError(
            "InternalServerError",
            f"the legacy worker-manager at {legacy.base_url} answered a continuation token "
            "that is not digits",
        ) from None
    return rows + await theirs(items), token_text


def pools_theirs(api: ApiContext) -> Theirs:
    """The legacy's pools (or pool stats) but those wm has."""

    async def theirs(items: Rows) -> Rows:
        ids = [i["workerPoolId"] for i in items if isinstance(i.get("workerPoolId"), str)]
        held = await run(api_reads.pool_providers, api.engine, ids)
        return [i for i in items if not _wms(i.get("workerPoolId"), held, api.provider_kinds)]

    return theirs


def providers_theirs(api: ApiContext) -> Theirs:
    """The legacy's providers but those wm has."""

    async def theirs(items: Rows) -> Rows:
        return [i for i in items if i.get("providerId") not in api.provider_kinds]

    return theirs


def _wms(pool_id: Any, held: Mapping[str, str | None], providers: Sequence[str] | Any) -> bool:
    return isinstance(pool_id, str) and wms_pool(pool_id in held, held.get(pool_id), providers)


def answer(key: str, rows: Rows, token: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {key: rows}
    if token is not None:
        body["continuationToken"] = token
    return body
