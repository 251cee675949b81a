"""Providers: the cloud accounts this deployment configures, as Taskcluster lists them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from fastapi.responses import JSONResponse

from wm.api.endpoint import PREFIX, Call, EndpointRouter, PagingQuery, endpoint, reply
from wm.api.endpoint_table import BY_NAME
from wm.api.models import ProviderList
from wm.api.views import provider_list
from wm.take_over.merged import answer, merged_page, providers_theirs

router = EndpointRouter()

PROVIDERS_PAGE = 100  # WM api.js listProviders' default limit
T = TypeVar("T")


@router.declare("listProviders", response_model=ProviderList)
async def list_providers(call: Annotated[Call, endpoint()], paged: PagingQuery) -> JSONResponse:
    api = call.api
    providers = provider_list(api.provider_kinds)
    if api.legacy is not None:  # a take-over: the legacy's providers too, wm's winning

        async def wm_page(inner: str | None, n: str | None) -> tuple[list[dict[str, Any]], Any]:
            return provider_page(providers, inner, n)

        rows, token = await merged_page(
            api.legacy,
            paged.continuation_token,
            paged.limit,
            wm_page=wm_page,
            legacy_path=PREFIX + BY_NAME["listProviders"].route,
            key="providers",
            theirs=providers_theirs(api),
            digits=True,
        )
        return JSONResponse(answer("providers", rows, token))
    rows, token = provider_page(providers, paged.continuation_token, paged.limit)
    return reply(ProviderList(providers=rows, continuationToken=token))


def provider_page(
    providers: Sequence[T], continuation_token: str | None, limit: str | None
) -> tuple[list[T], str | None]:
    """listProviders' page, as worker-manager cuts it (WM api.js): the token is the plain
    offset of the next page, the limit 100 unless given; a page that reaches the end has no
    token, and neither has the page of `limit=0` at offset 0 (JavaScript's falsy 0)."""
    start = int(continuation_token) if continuation_token else 0
    size = int(limit) if limit else PROVIDERS_PAGE
    end = start + size if start + size < len(providers) else None
    return list(providers[start:end]), str(end) if end else None
