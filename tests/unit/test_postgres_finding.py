"""How the demo, the tests and the benchmarks find their PostgreSQL server (wmsim/postgres.py),
and the one piece of it a deployment uses: its URL made SQLAlchemy's (wm/db/engine.py)."""

from __future__ import annotations

import pytest

from wm.db.engine import normalise_url
from wmsim.config import postgres_environment
from wmsim.postgres import find_or_start


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("postgres://u:p@db:5432/wm", "postgresql+psycopg2://u:p@db:5432/wm"),  # Heroku's form
        ("postgresql://u@db/wm", "postgresql+psycopg2://u@db/wm"),
        ("postgresql+psycopg2://u@db/wm", "postgresql+psycopg2://u@db/wm"),
    ],
)
def test_a_database_url_is_given_the_driver_sqlalchemy_uses(given: str, used: str):
    assert normalise_url(given) == used


def test_a_database_url_in_the_environment_is_the_server_as_it_is():
    server = find_or_start({"DATABASE_URL": "postgres://u@db.example/wm"})

    assert (server.url, server.origin) == ("postgresql+psycopg2://u@db.example/wm", "DATABASE_URL")
    assert not server.restartable
    server.stop()  # not ours: stopping it does nothing


def test_only_the_variables_that_choose_a_server_are_read(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://u@db.example/wm")
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("SENTRY_DSN", "https://key@sentry.example/1")

    assert postgres_environment() == {"DATABASE_URL": "postgres://u@db.example/wm"}
