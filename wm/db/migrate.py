"""Run alembic migrations, configured in code.

Alembic is imported by the functions that use it, not by this module: with mako and pygments
it is a fifth of every wm process's start (0.2 s of CPU), and only `wm db upgrade` and the
tests migrate. A running process reads the revisions it knows from the migration files
(wm/db/schema.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
VERSIONS_DIR = MIGRATIONS_DIR / "versions"


def alembic_config() -> AlembicConfig:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate to `revision`; return (before, after). Running it again is a no-op."""
    from alembic import command

    before = current_revision(engine)
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    return before, current_revision(engine)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
