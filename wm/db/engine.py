"""Engines: the only place that talks to the database driver's settings."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.engine import URL

CONNECT_TIMEOUT_S = 10
POOL_SIZE = 5
POOL_MAX_OVERFLOW = 5


def normalise_url(url: str) -> str:
    """The URL with the driver SQLAlchemy should use."""
    # Heroku-style platforms hand out postgres://, which SQLAlchemy 2 no longer accepts.
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


def make_engine(url: str, *, application_name: str = "wm", pool_size: int = POOL_SIZE) -> Engine:
    return create_engine(
        normalise_url(url),
        pool_size=pool_size,
        max_overflow=POOL_MAX_OVERFLOW,
        pool_pre_ping=True,  # reconnect transparently after a Postgres restart
        connect_args={
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": application_name,
        },
    )


def ping(engine: Engine) -> None:
    """One round trip; raises when the database does not answer (health checks)."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def with_database(url: str, database: str) -> str:
    return make_url(normalise_url(url)).set(database=database).render_as_string(hide_password=False)


def create_database(admin_url: str, name: str, template: str | None = None) -> None:
    admin = create_engine(normalise_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            suffix = f' TEMPLATE "{template}"' if template else ""
            conn.execute(text(f'CREATE DATABASE "{name}"{suffix}'))
    finally:
        admin.dispose()


def drop_database(admin_url: str, name: str) -> None:
    admin = create_engine(normalise_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def redacted(url: str | URL) -> str:
    return make_url(str(url)).render_as_string(hide_password=True)
