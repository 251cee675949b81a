"""Lists of ids as one array parameter.

`column.in_(ids)` sends one bind parameter per id, rendered into the statement at every
execution: at 1,000 pools a provisioning pass spent more time building its statements than
Postgres spent answering them. `column == any_(ids_array(ids))` sends one array parameter,
whatever its length, and the statement's text stays the same from pass to pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import BindParameter, Text, bindparam
from sqlalchemy.dialects.postgresql import ARRAY


def ids_array(ids: Sequence[str]) -> BindParameter:
    return bindparam(None, list(ids), type_=ARRAY(Text))


def ids_param(name: str) -> BindParameter:
    """A named array parameter of ids, for a statement built once at import and run with
    `{name: ids}`: building a statement and its cache key cost more CPU than running it."""
    return bindparam(name, type_=ARRAY(Text))
