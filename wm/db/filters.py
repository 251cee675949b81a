"""Optional equality filters, as the lists of the API and the CLI take them."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select

S = TypeVar("S", bound=Select[Any])


def where_given(query: S, *filters: tuple[ColumnElement[Any], object]) -> S:
    """The query narrowed to `column == value` for each filter given a value, in the order
    given (a None value: that filter was not asked for)."""
    for column, value in filters:
        if value is not None:
            query = query.where(column == value)
    return query
