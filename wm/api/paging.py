"""Pages of a list answer, as Taskcluster's `paginateResults` makes them (offset/limit).

Query `limit` (digits; at most and by default 1000) and `continuationToken` (opaque: here the
next offset, base64url-encoded; Taskcluster uses hashids of it, and clients never look inside).
One more row than the page is fetched: a token is given only when more rows exist.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from wm.tc.errors import TaskclusterError

MAX_LIMIT = 1000
_DIGITS = re.compile(r"^[0-9]+$")
_TOKEN = re.compile(r"^o([0-9]{1,12})$")

T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    offset: int
    limit: int


def page_from_query(continuation_token: str | None, limit: str | None) -> Page:
    if limit is not None and not _DIGITS.match(limit):
        raise TaskclusterError(
            "InvalidRequestArguments", "query parameter limit must be a non-negative integer"
        )
    size = min(int(limit), MAX_LIMIT) if limit else MAX_LIMIT
    return Page(offset=decode_token(continuation_token), limit=max(size, 1))


def encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode().rstrip("=")


def decode_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        text = ""
    match = _TOKEN.match(text)
    if match is None:
        raise TaskclusterError("InputError", "Invalid continuation token")
    return int(match.group(1))


def paginate(page: Page, fetch: Callable[[int, int], Sequence[T]]) -> tuple[list[T], str | None]:
    """`fetch(offset, limit)`'s rows for this page, and the next page's token if any."""
    rows = list(fetch(page.offset, page.limit + 1))
    if len(rows) > page.limit:
        return rows[: page.limit], encode_token(page.offset + page.limit)
    return rows, None
