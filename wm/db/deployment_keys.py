"""The deployment's own keys, one value for every web replica, generated once on first use."""

from __future__ import annotations

import secrets

from sqlalchemy import Engine, select
from sqlalchemy.dialects.postgresql import insert

from wm.db.tables import deployment_keys

KEY_BYTES = 32


def get_or_create_key(engine: Engine, name: str) -> str:
    """The key `name`; the first caller's random value wins, every other caller reads it."""
    candidate = secrets.token_urlsafe(KEY_BYTES)
    with engine.begin() as conn:
        conn.execute(
            insert(deployment_keys)
            .values(name=name, secret=candidate)
            .on_conflict_do_nothing(index_elements=[deployment_keys.c.name])
        )
        return conn.execute(
            select(deployment_keys.c.secret).where(deployment_keys.c.name == name)
        ).scalar_one()
