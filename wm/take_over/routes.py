"""One rootUrl for both during a take-over: which side answers each worker-manager request.

While `[take_over] legacy_url` is set, wm's web process serves the pools of the providers it
has and forwards every other request, unchanged, to the legacy worker-manager; the list
endpoints that span pools answer both sides merged. The endpoint table (wm/api/endpoint_table.py:
every endpoint of worker-manager's API reference) says where each request names its pool; this
module reads the pool from the request and decides; the web process
(wm/take_over/forwarding.py) reads the pool's row and does the I/O. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import unquote

from wm.api.endpoint_table import ENDPOINTS, Endpoint, PoolIn


class Decision(Enum):
    SERVE = "serve"  # wm answers
    FORWARD = "forward"  # the legacy worker-manager answers, the request unchanged
    MERGE = "merge"  # wm answers both sides merged


# A pool id in a path: `<a>%2F<b>` as clients escape it, or `<a>/<b>` (worker-manager's
# `{*workerPoolId}`), as wm's own router takes it.
_POOL = r"(?P<workerPoolId>[^/%]+(?:%2[Ff]|/)[^/%]+)"
_PARAM = re.compile(r"<(\w+)>")


def _pattern(route: str) -> re.Pattern[str]:
    parts = []
    for piece in re.split(r"(<\w+>)", route):
        name = _PARAM.fullmatch(piece)
        if name is None:
            parts.append(re.escape(piece))
        elif name.group(1) == "workerPoolId":
            parts.append(_POOL)
        else:
            parts.append(f"(?P<{name.group(1)}>[^/]+)")
    return re.compile("".join(parts))


_PATTERNS = tuple((e, _pattern(e.route)) for e in ENDPOINTS)
_WITH_PROVIDER = (PoolIn.BODY_WITH_PROVIDER, PoolIn.PATH_WITH_PROVIDER)  # the body's providerId
_IN_BODY = (PoolIn.BODY, *_WITH_PROVIDER)


@dataclass(frozen=True)
class Subject:
    """What a request is about, as far as choosing its side goes."""

    endpoint: Endpoint | None  # None: no worker-manager endpoint has this method and path
    pool_id: str | None = None  # the pool it names (path, body or query), if any
    provider_id: str | None = None  # the provider its body names, if any


def match(method: str, path: str) -> tuple[Endpoint, dict[str, str]] | None:
    """The endpoint a request is for (path: below /api/worker-manager/v1, raw, as sent) and
    its path parameters, unescaped; None for any other."""
    for endpoint, pattern in _PATTERNS:
        if endpoint.method != method.upper():
            continue
        found = pattern.fullmatch(path)
        if found is not None:
            return endpoint, {k: unquote(v) for k, v in found.groupdict().items()}
    return None


def subject(method: str, path: str, query: Mapping[str, str], body: bytes) -> Subject:
    """The endpoint, pool and provider a request names."""
    matched = match(method, path)
    if matched is None:
        return Subject(None)
    endpoint, params = matched
    pool_in = endpoint.pool_in
    fields = _json_object(body) if pool_in in _IN_BODY else {}
    provider_id = _text(fields.get("providerId")) if pool_in in _WITH_PROVIDER else None
    return Subject(endpoint, _pool_id(pool_in, params, query, fields), provider_id)


def _pool_id(
    pool_in: PoolIn, params: Mapping[str, str], query: Mapping[str, str], fields: Mapping[str, Any]
) -> str | None:
    if pool_in in (PoolIn.PATH, PoolIn.PATH_WITH_PROVIDER):
        return params["workerPoolId"]
    if pool_in is PoolIn.PROVISIONER_PATH:
        return f"{params['provisionerId']}/{params['workerType']}"
    if pool_in is PoolIn.QUERY:
        return query.get("workerPoolId") or None
    if pool_in in (PoolIn.BODY, PoolIn.BODY_WITH_PROVIDER):
        return _text(fields.get("workerPoolId"))
    return None


def decide(subject: Subject, providers: Collection[str], pool_is_wms: bool) -> Decision:
    """Which side answers. `providers`: the providers wm has (its config's); `pool_is_wms`:
    the pool the request names is in wm's database under one of them (or under none: a
    deleted pool wm drains).

    Nothing is ever forwarded for a pool wm has taken over, and a pool definition naming a
    provider wm has is wm's, whatever the pool. A registration naming such a provider is wm's
    once its pool is: before `wm import`, the legacy still runs that pool. A request wm cannot
    even read its pool or provider from (a malformed body) is wm's to refuse, with the words the
    legacy would use too."""
    endpoint = subject.endpoint
    if endpoint is None:
        return Decision.FORWARD  # not wm's API: the legacy answers it (its 404, or more)
    pool_in = endpoint.pool_in
    if pool_in is PoolIn.NOWHERE:
        return Decision.SERVE  # about the process itself (ping, version, heartbeats)
    if pool_in is PoolIn.EVERY:
        return Decision.MERGE
    if pool_in is PoolIn.QUERY and subject.pool_id is None:
        return Decision.MERGE  # error stats of every pool
    if pool_in is PoolIn.BODY_WITH_PROVIDER:  # registerWorker
        if subject.provider_id is None:
            return Decision.SERVE
        if subject.provider_id not in providers:
            return Decision.FORWARD
        # A provider is taken over pool by pool, by `wm import`: until then its pools are the
        # legacy's, which launched their booting workers and is the one to register them.
        return Decision.SERVE if pool_is_wms or subject.pool_id is None else Decision.FORWARD
    if pool_in is PoolIn.PATH_WITH_PROVIDER:  # a pool's definition
        if subject.provider_id is None or subject.provider_id in providers:
            return Decision.SERVE
    elif subject.pool_id is None:
        return Decision.SERVE
    return Decision.SERVE if pool_is_wms else Decision.FORWARD


def wms_pool(exists: bool, provider_id: str | None, providers: Collection[str]) -> bool:
    """Whether a pool is wm's to serve: in its database under a provider it has, or under
    none (a deleted pool it still drains). A pool whose provider was handed back to the legacy
    (removed from wm's config) is the legacy's again."""
    return exists and (provider_id is None or provider_id in providers)


def _json_object(body: bytes) -> Mapping[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# -- continuation tokens of the merged lists ------------------------------------------------


class Side(Enum):
    WM = "wm"
    LEGACY = "legacy"


@dataclass(frozen=True)
class MergedToken:
    """Where a merged list's next page starts: a side and that side's own token (None: its
    first page). wm's pages come first, then the legacy's."""

    side: Side
    inner: str | None = None


START = MergedToken(Side.WM)


class TokenInvalid(ValueError):
    pass


def encode_token(token: MergedToken) -> str:
    text = json.dumps({"s": token.side.value, "t": token.inner}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_token(text: str | None) -> MergedToken:
    if not text:
        return START
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        value = json.loads(raw)
        side = Side(value["s"])
        inner = value["t"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise TokenInvalid(text) from None
    if inner is not None and not isinstance(inner, str):
        raise TokenInvalid(text)
    return MergedToken(side, inner)


# listProviders' continuationToken must be digits (its query pattern, /^[0-9]+$/), and both
# sides' are (plain offsets): its merged token is the side's digit, then that side's token.
_SIDE_DIGIT = {Side.WM: "1", Side.LEGACY: "2"}
_DIGIT_SIDE = {digit: side for side, digit in _SIDE_DIGIT.items()}


def encode_digits_token(token: MergedToken) -> str:
    if token.inner is not None and not token.inner.isdigit():
        raise TokenInvalid(token.inner)
    return _SIDE_DIGIT[token.side] + (token.inner or "")


def decode_digits_token(text: str | None) -> MergedToken:
    if not text:
        return START
    side = _DIGIT_SIDE.get(text[0])
    if side is None or not text.isdigit():
        raise TokenInvalid(text)
    return MergedToken(side, text[1:] or None)


def after_wm_page(next_wm_token: str | None) -> MergedToken | None:
    """Where the page after one of wm's starts: wm's next page, or the legacy's first."""
    if next_wm_token is not None:
        return MergedToken(Side.WM, next_wm_token)
    return MergedToken(Side.LEGACY)


def after_legacy_page(next_legacy_token: str | None) -> MergedToken | None:
    """Where the page after one of the legacy's starts (None: the list ended)."""
    return MergedToken(Side.LEGACY, next_legacy_token) if next_legacy_token else None


def sum_error_stats(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """workerPoolErrorStats of every pool, both sides: the totals added up, key by key (both
    count errors by the same day, hour, title, code, pool and launch config)."""
    totals: dict[str, Any] = {}
    for part in (mine, theirs):
        for key, value in part.items():
            if isinstance(value, bool):
                continue
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
            elif isinstance(value, Mapping):
                counts = totals.setdefault(key, {})
                for bucket, count in value.items():
                    if isinstance(count, int) and not isinstance(count, bool):
                        counts[bucket] = counts.get(bucket, 0) + count
    return totals
