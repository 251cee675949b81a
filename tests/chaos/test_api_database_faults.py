"""The web process when its database fails under it (issue 9: the worker API's reliability).

- The database refuses connections (a failover, a restart): every API request is answered 503
  with Retry-After at once, never a hang or a 500, and the process serves again, with no
  restart, once the database is back; a worker booting in the meantime (the real `taskcluster`
  client, which retries 5xx answers) registers once it is.
- A statement fails for a reason that is a bug, not an outage (here: the table it names is
  gone): a 500 InternalServerError, logged by the error's type and place only, with none of the
  request's
  values; the process keeps serving.

Nothing in wm is patched: the faults are made in Postgres itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import taskcluster
from sqlalchemy import create_engine, make_url, text

from tests.support.api_stack import PREFIX, ApiStack, module_api
from wm.api.app import RETRY_AFTER_S
from wm.db.engine import normalise_url
from wm.tc.credentials import IssuerCredentials, worker_credentials


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("database-faults")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


def admin_sql(api: ApiStack, statement: str) -> None:
    """Run as the server's admin, outside the test database (which may refuse connections)."""
    admin_url = make_url(normalise_url(api.stack.db_url)).set(database="postgres")
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()


def database_name(api: ApiStack) -> str:
    return str(make_url(api.stack.db_url).database)


def refuse_connections(api: ApiStack, refuse: bool) -> None:
    name = database_name(api)
    admin_sql(api, f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"false" if refuse else "true"}')
    if refuse:  # and drop the ones open now: the web process's pool must find out
        admin_sql(
            api,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND application_name = 'wm-web'",
        )


def register_503s(api: ApiStack) -> float:
    return api.metric("wm_api_requests_total", route=f"{PREFIX}/worker/register", status="503")


def test_a_database_that_refuses_connections_is_a_503_with_retry_after_then_recovers(
    api: ApiStack,
):
    workers = api.launch("aws", 2)
    proofs = [api.proof(w) for w in workers]
    # A booting worker: the real client, retrying 5xx answers with its own backoff.
    booting_client = taskcluster.WorkerManager({"rootUrl": api.base_url, "maxRetries": 12})
    refuse_connections(api, True)
    try:
        reply = api.register(workers[0], proofs[0])
        assert reply.status == 503 and reply.headers["retry-after"] == str(RETRY_AFTER_S)
        assert reply.refusal() == (
            503,
            "ServiceUnavailable",
            "the database is unavailable; retry shortly",
        )
        path = f"{PREFIX}/workers/{workers[0].pool_id.replace('/', '%2F')}/"
        path += f"{workers[0].worker_group}/{workers[0].tc_worker_id}/should-terminate"
        assert api.operator_call("GET", path).status == 503  # signed: the database is asked
        assert api.call("GET", "/healthz").status == 503
        seen = register_503s(api)
        registered: list[object] = []
        booting = threading.Thread(
            target=lambda: registered.append(
                booting_client.registerWorker(api.register_body(workers[1], proofs[1]))
            )
        )
        booting.start()
        deadline = time.monotonic() + 30
        while register_503s(api) == seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert register_503s(api) > seen  # it was answered 503 and keeps trying
    finally:
        refuse_connections(api, False)
    booting.join(timeout=120)
    assert len(registered) == 1 and "credentials" in registered[0]
    assert api.register(workers[0], proofs[0]).status == 200  # no restart needed
    assert api.call("GET", "/healthz").status == 200
    assert {e["error"] for e in api.events("api-database-error")} == {"OperationalError"}
    assert api.events("api-error") == []


def test_a_statement_failing_for_a_bug_is_a_500_logged_without_request_values(
    api: ApiStack,
):
    (worker,) = api.launch("gcp", 1)
    proof = api.proof(worker)
    marker_pool = "chaos/aws"
    with api.engine.connect() as conn:
        key = conn.execute(text("SELECT secret FROM deployment_keys")).scalar_one()
    now = datetime.now(UTC)
    marker_credentials = worker_credentials(
        IssuerCredentials("static/wm", key),
        provider_id="aws-sim",
        worker_pool_id=marker_pool,
        worker_group="g",
        worker_id="w-marker-id",
        expires=now + timedelta(hours=1),
        now=now,
    ).as_json()
    secret_marker = "SECRET-MARKER-VALUE".ljust(44, "x")
    with api.engine.begin() as conn:
        conn.execute(text("ALTER TABLE workers RENAME TO workers_elsewhere"))
    try:
        reply = api.register(worker, proof)
        other = api.signed(
            marker_credentials,
            "POST",
            f"{PREFIX}/worker/reregister",
            {
                "workerPoolId": marker_pool,
                "workerGroup": "g",
                "workerId": "w-marker-id",
                "secret": secret_marker,
            },
        )
    finally:
        with api.engine.begin() as conn:
            conn.execute(text("ALTER TABLE workers_elsewhere RENAME TO workers"))
    for answer in (reply, other):
        assert answer.refusal() == (500, "InternalServerError", "the server failed; retry later")
    errors = api.events("api-error")
    assert {e["error"] for e in errors} == {"ProgrammingError"}
    assert all(".py:" in e["where"] for e in errors)  # the place, to find the bug by
    log = api.log_text()
    assert "SECRET-MARKER-VALUE" not in log and "w-marker-id" not in log
    assert "Traceback" not in log
    assert api.register(worker, proof).status == 200  # and it serves on
