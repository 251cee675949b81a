"""workerPoolErrorStats through the real `taskcluster` client against `wm run web`: errors
reported at chosen times counted in worker-manager's buckets (every UTC day of the last 7, every
UTC hour of the last 24, zeros included, keyed as Date.toJSON writes them) and breakdowns, the
answer valid for Taskcluster's schema; the scope `worker-manager:list-worker-pool-errors:<pool>`
(`*` for every pool's) checked before the pool is looked up, as WM api.js does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import taskcluster
from sqlalchemy import Engine, func, select

from tests.support.api_stack import OPERATOR_CLIENT, OPERATOR_TOKEN, PREFIX, ApiStack, module_api
from tests.support.tc_schemas import check
from wm.db.tables import worker_pool_errors

OPERATOR = {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN}
AWS, GCP = "chaos/aws", "chaos/gcp"
SCOPE = "worker-manager:list-worker-pool-errors"


@dataclass(frozen=True)
class Reported:
    pool_id: str
    age: timedelta  # before the database's clock at the time of writing
    title: str
    code: str | None = None
    launch_config_id: str | None = None


ERRORS = (
    Reported(AWS, timedelta(minutes=10), "quota", "InsufficientInstanceCapacity", "lc-a"),
    Reported(AWS, timedelta(hours=2), "quota", "InsufficientInstanceCapacity"),
    Reported(AWS, timedelta(days=3), "boot timeout"),
    Reported(AWS, timedelta(days=10), "ancient"),  # in no day shown, but in the breakdowns
    Reported(GCP, timedelta(minutes=30), "zone exhausted", "ZONE_RESOURCE_POOL_EXHAUSTED"),
)


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("error-stats")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


@pytest.fixture(scope="module")
def reported(api: ApiStack) -> dict[Reported, datetime]:
    """ERRORS stored with their `reported` times; what each was stamped."""
    return store_errors(api.engine, ERRORS)


def store_errors(engine: Engine, errors: Sequence[Reported]) -> dict[Reported, datetime]:
    with engine.begin() as conn:
        now = conn.execute(select(func.now())).scalar_one().astimezone(UTC)
        stamped = {e: now - e.age for e in errors}
        conn.execute(
            worker_pool_errors.insert(),
            [
                {
                    "pool_id": e.pool_id,
                    "kind": "launch-failure",
                    "title": e.title,
                    "description": "",
                    "extra": {"code": e.code} if e.code else {},
                    "launch_config_id": e.launch_config_id,
                    "reported": stamped[e],
                }
                for e in errors
            ],
        )
    return stamped


def js(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def utc_day(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def utc_hour(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def stats(client: Any, pool_id: str | None, asked: tuple[datetime, datetime]) -> dict[str, Any]:
    """The answer, valid for the schema, its buckets the ones for a clock within `asked`."""
    query = {"workerPoolId": pool_id} if pool_id else {}
    answer = check("worker-pool-error-stats", client.workerPoolErrorStats(query=query))
    before, after = asked
    daily, hourly = list(answer["totals"]["daily"]), list(answer["totals"]["hourly"])
    last_day = next(d for d in (utc_day(before), utc_day(after)) if js(d) == daily[-1])
    last_hour = next(h for h in (utc_hour(before), utc_hour(after)) if js(h) == hourly[-1])
    assert daily == [js(last_day - timedelta(days=n)) for n in reversed(range(7))]
    assert hourly == [js(last_hour - timedelta(hours=n)) for n in reversed(range(24))]
    return answer


def bucketed(times: Sequence[datetime], keys: Sequence[str], truncate: Any) -> dict[str, int]:
    """Each bucket of `keys` with the number of `times` that fall in it (zeros too)."""
    counted = Counter(js(truncate(t)) for t in times)
    return {key: counted[key] for key in keys}


def asked_now() -> datetime:
    return datetime.now(UTC)


def test_every_pools_errors_are_counted_in_their_days_and_hours_and_broken_down(api, reported):
    before = asked_now()
    answer = stats(api.client(OPERATOR), None, (before, asked_now() + timedelta(seconds=30)))
    totals = answer["totals"]

    times = list(reported.values())
    assert answer["workerPoolId"] == ""
    assert totals["daily"] == bucketed(times, list(totals["daily"]), utc_day)
    assert totals["hourly"] == bucketed(times, list(totals["hourly"]), utc_hour)
    assert totals["total"] == sum(totals["daily"].values()) == 4  # the 10-day-old one is out
    assert totals["title"] == {"quota": 2, "boot timeout": 1, "ancient": 1, "zone exhausted": 1}
    assert totals["code"] == {
        "InsufficientInstanceCapacity": 2,
        "ZONE_RESOURCE_POOL_EXHAUSTED": 1,
        "other": 2,
    }
    assert totals["workerPool"] == {AWS: 4, GCP: 1}
    assert totals["launchConfig"] == {}


def test_one_pools_errors_only_with_its_launch_configs(api, reported):
    before = asked_now()
    answer = stats(api.client(OPERATOR), AWS, (before, asked_now() + timedelta(seconds=30)))
    totals = answer["totals"]

    times = [t for e, t in reported.items() if e.pool_id == AWS]
    assert answer["workerPoolId"] == AWS
    assert totals["daily"] == bucketed(times, list(totals["daily"]), utc_day)
    assert totals["hourly"] == bucketed(times, list(totals["hourly"]), utc_hour)
    assert totals["total"] == 3
    assert totals["title"] == {"quota": 2, "boot timeout": 1, "ancient": 1}
    assert totals["code"] == {"InsufficientInstanceCapacity": 2, "other": 2}
    assert totals["workerPool"] == {AWS: 4}
    assert totals["launchConfig"] == {"lc-a": 1, "unknown": 3}


def test_a_pool_without_errors_answers_zeros_in_every_bucket(api, reported):
    pool_id = "chaos/azure"
    before = asked_now()
    answer = stats(api.client(OPERATOR), pool_id, (before, asked_now() + timedelta(seconds=30)))

    totals = answer["totals"]
    assert answer["workerPoolId"] == pool_id
    assert set(totals["daily"].values()) == set(totals["hourly"].values()) == {0}
    assert totals["total"] == 0
    assert totals["title"] == totals["code"] == totals["workerPool"] == {}
    assert totals["launchConfig"] == {}


def test_an_empty_pool_id_asks_for_every_pools(api, reported):
    reply = api.operator_call("GET", f"{PREFIX}/worker-pool-errors/stats?workerPoolId=")

    assert reply.status == 200
    assert check("worker-pool-error-stats", reply.json())["workerPoolId"] == ""
    assert reply.json()["totals"]["workerPool"] == {AWS: 4, GCP: 1}


def refusal(call) -> tuple[int, str, str]:
    with pytest.raises(taskcluster.TaskclusterRestFailure) as caught:
        call()
    error = caught.value
    return error.status_code, error.body["code"], error.body["message"]


def scoped(api: ApiStack, *scopes: str) -> Any:
    return taskcluster.WorkerManager(
        {
            "rootUrl": api.base_url,
            "maxRetries": 0,
            "credentials": dict(OPERATOR),
            "authorizedScopes": list(scopes),
        }
    )


def test_an_unknown_pool_is_not_found(api):
    status, code, message = refusal(
        lambda: api.client(OPERATOR).workerPoolErrorStats(query={"workerPoolId": "proj/nowhere"})
    )

    assert (status, code) == (404, "ResourceNotFound")
    assert message.startswith("Worker pool does not exist")


def test_one_pools_scope_reads_that_pool_only(api, reported):
    reader = scoped(api, f"{SCOPE}:{AWS}")

    assert reader.workerPoolErrorStats(query={"workerPoolId": AWS})["workerPoolId"] == AWS
    for query in ({"workerPoolId": GCP}, {}, {"workerPoolId": "proj/nowhere"}):
        status, code, message = refusal(lambda q=query: reader.workerPoolErrorStats(query=q))
        assert (status, code) == (403, "InsufficientScopes"), query
        assert f"{SCOPE}:{query.get('workerPoolId', '*')}" in message, query


def test_every_pools_stats_need_the_star_scope_and_it_reads_any_pool(api, reported):
    reader = scoped(api, f"{SCOPE}:*")

    assert reader.workerPoolErrorStats()["totals"]["workerPool"] == {AWS: 4, GCP: 1}
    assert reader.workerPoolErrorStats(query={"workerPoolId": GCP})["totals"]["total"] == 1
    # Authorized first, then looked up.
    status, code, _ = refusal(
        lambda: reader.workerPoolErrorStats(query={"workerPoolId": "proj/nowhere"})
    )
    assert (status, code) == (404, "ResourceNotFound")


def test_without_credentials_nothing_is_shown(api, reported):
    anonymous = api.client()

    for query in ({}, {"workerPoolId": AWS}):
        status, code, _ = refusal(lambda q=query: anonymous.workerPoolErrorStats(query=q))
        assert (status, code) == (403, "InsufficientScopes"), query


def test_a_pool_id_outside_the_query_pattern_is_refused_before_anything_else(api):
    reply = api.call("GET", f"{PREFIX}/worker-pool-errors/stats?workerPoolId=proj_x%2Fci")

    assert reply.refusal() == (
        400,
        "InvalidRequestArguments",
        'Query-string parameter: workerPoolId="proj_x/ci" does not match expression: '
        "/^([a-zA-Z0-9/-]+)?$/",
    )
