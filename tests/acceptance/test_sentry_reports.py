"""What wm's processes send Sentry in an outage: a local server stands at SENTRY_DSN and keeps the
real envelopes a real `wm run` process sends it.

An outage fails every pass of every job until it ends. Each event must carry the tags people
filter on (process, provider and its kind, region, job), be sent once per failure (never a log
event beside an explicit capture), group its repeats under one fingerprint, and the repeats be
bounded: the first, then one per SENTRY_REPEAT_WINDOW_S with the count of those left out.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import taskcluster

from tests.support.sentry_server import SentryServer, sentry_server
from tests.support.stack import FAST_GATE, START_TIMEOUT_S, Stack, WmProcess, aws_provider, pool
from wm.db import migrate
from wm.db.engine import create_database, make_engine, with_database
from wmsim.postgres import PostgresServer, free_port, local_bin_dir, start_local_cluster

REGIONS = ["us-east-1", "us-west-2"]
SCAN_INTERVAL_S = 0.5
UNREACHABLE = ("cloud-unavailable", "aws-down", "DescribeInstances")


@pytest.fixture
def sentry() -> Iterator[SentryServer]:
    with sentry_server() as server:
        yield server


@pytest.fixture
def processes() -> Iterator[list[WmProcess]]:
    started: list[WmProcess] = []
    yield started
    for process in started:
        process.kill()


def unreachable_aws(tmp_path, db_url: str, engine) -> Stack:
    """A scanner's config whose AWS endpoint is a local port nobody listens on."""
    aws = {
        "id": "aws-down",
        "kind": "aws",
        "regions": REGIONS,
        "endpoint": f"http://127.0.0.1:{free_port()}",
        "credentials": "simulated",
        "gate": dict(FAST_GATE),
        "scan_interval_s": SCAN_INTERVAL_S,
    }
    stack = Stack.write(tmp_path, db_url, [aws], [pool("proj/a", aws)])
    stack.sync_pools(engine)
    return stack


def tags(event: dict[str, Any]) -> dict[str, str]:
    found = event.get("tags") or {}
    # The SDK may send tags as a list of pairs.
    return dict(found) if isinstance(found, dict) else {k: v for k, v in found}


def stop(process: WmProcess) -> None:
    """SIGTERM, and wait for its exit: what it had to send Sentry is sent by then."""
    if process.popen.poll() is None:
        process.terminate(timeout_s=30)


def test_an_unreachable_cloud_is_one_tagged_issue_its_repeats_bounded_per_window(
    tmp_path, db_url, engine, sentry, processes
):
    window_s = 3.0
    stack = unreachable_aws(tmp_path, db_url, engine)
    scanner = WmProcess.start(
        ["run", "scanner", "--kind", "aws"],
        stack.path,
        db_url,
        env={"SENTRY_DSN": sentry.dsn, "SENTRY_REPEAT_WINDOW_S": str(window_s)},
    )
    processes.append(scanner)

    # Every scan of both regions fails, until a region's 20th failure in a row stops the
    # process (the platform would restart it).
    deadline = time.monotonic() + START_TIMEOUT_S + 120
    while scanner.popen.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scanner.popen.poll() == 3, "".join(scanner.raw[-20:])

    failures = scanner.events("pass-failed")
    span_s = failures[-1]["ts"] - failures[0]["ts"]
    assert len(failures) >= 20 and span_s > 2 * window_s
    cloud = sentry.matching(lambda e: e.get("fingerprint") == list(UNREACHABLE))
    # One issue: every event of the outage has its fingerprint, but for the one that stopped
    # the process.
    assert len(cloud) + 1 == len(sentry.events), sentry.summary()
    for event in cloud:
        assert tags(event) | {"region": "", "error_category": ""} == {
            "process": "scanner-aws",
            "provider": "aws-down",
            "provider_kind": "aws",
            "region": "",
            "job": f"scan:aws-down:{tags(event)['region']}",
            "job_kind": "scan",
            "log_event": "pass-failed",
            "operation": "DescribeInstances",
            "error_category": "",
            "error_code": tags(event)["error_code"],
        }
        assert tags(event)["region"] in REGIONS
        assert tags(event)["error_category"] in {"transient", "paused"}
    # Bounded: the first, then at most one per window, each later one saying how many it
    # stands for.
    assert 2 <= len(cloud) <= span_s / window_s + 2, (len(failures), span_s, sentry.summary())
    suppressed = [e.get("extra", {}).get("repeats_suppressed", 0) for e in cloud]
    assert suppressed[0] == 0 and all(n >= 1 for n in suppressed[1:])
    assert len(cloud) + sum(suppressed) <= len(failures)
    (giving_up,) = sentry.matching(lambda e: tags(e).get("log_event") == "process-giving-up")
    assert {"provider": "aws-down", "provider_kind": "aws", "job_kind": "scan"}.items() <= tags(
        giving_up
    ).items()


def test_each_failed_pass_is_one_event_not_two(tmp_path, db_url, engine, sentry, processes):
    stack = unreachable_aws(tmp_path, db_url, engine)
    scanner = WmProcess.start(
        ["run", "scanner", "--kind", "aws"],
        stack.path,
        db_url,
        env={"SENTRY_DSN": sentry.dsn, "SENTRY_REPEAT_WINDOW_S": "0"},  # every repeat sent
    )
    processes.append(scanner)
    scanner.wait_for(lambda: len(scanner.events("pass-failed")) >= 6, START_TIMEOUT_S, "failures")
    stop(scanner)

    failed = sentry.matching(lambda e: tags(e).get("log_event") == "pass-failed")
    assert len(failed) == len(scanner.events("pass-failed")) == len(sentry.events)
    assert {tuple(e["fingerprint"]) for e in failed} == {UNREACHABLE}
    assert all(tags(e)["provider"] == "aws-down" for e in failed)
    # The lines before a failure ride along as its breadcrumbs; no log line is sent on its own
    # (sentry-sdk 3's Sentry Logs stream would ship every INFO line).
    assert all(e.get("breadcrumbs", {}).get("values") for e in failed)
    assert "log" not in sentry.item_types, sentry.item_types


@pytest.fixture
def restartable_db() -> Iterator[tuple[PostgresServer, str]]:
    """A Postgres cluster of this test's own, migrated, that the test may restart."""
    bin_dir = local_bin_dir()
    if bin_dir is None:
        pytest.skip("restarting Postgres needs the PostgreSQL server binaries on this machine")
    server = start_local_cluster(bin_dir)
    try:
        create_database(server.url, "wm_sentry")
        url = with_database(server.url, "wm_sentry")
        engine = make_engine(url)
        migrate.upgrade(engine)
        yield server, url
        engine.dispose()
    finally:
        server.stop()


def status_of(call: Callable[[], object]) -> int:
    """The status a call to the API was answered with; 0 when nothing answered (yet)."""
    try:
        call()
    except taskcluster.exceptions.TaskclusterRestFailure as failure:
        return failure.status_code
    except taskcluster.exceptions.TaskclusterConnectionError:
        return 0
    return 200


def test_a_database_outage_is_one_issue_and_one_event_per_process(
    tmp_path, restartable_db, sim_ec2, sentry, processes
):
    server, url = restartable_db
    aws = aws_provider(sim_ec2, regions=REGIONS, scan_interval_s=SCAN_INTERVAL_S)
    stack = Stack.write(tmp_path, url, [aws], [pool("proj/a", aws)])
    stack.sync_pools(make_engine(url))
    port = free_port()
    env = {"SENTRY_DSN": sentry.dsn}
    scanner = WmProcess.start(["run", "scanner", "--kind", "aws"], stack.path, url, env=env)
    web_env = {**env, "PORT": str(port), "WM_OPERATOR_TOKEN": "op-token"}
    web = WmProcess.start(["run", "web"], stack.path, url, env=web_env)
    processes.extend([scanner, web])
    scanner.wait_for(lambda: len(scanner.events("scan")) >= 2, START_TIMEOUT_S, "scans")
    operator = taskcluster.WorkerManager(
        {
            "rootUrl": f"http://127.0.0.1:{port}",
            "maxRetries": 0,
            "credentials": {"clientId": "static/wm-operator", "accessToken": "op-token"},
        }
    )
    read_pool = lambda: operator.workerPool("proj/a")  # noqa: E731
    web.wait_for(lambda: status_of(read_pool) == 200, START_TIMEOUT_S, "the API")

    # Postgres is down for a few seconds: every scan fails, and every request the API answers.
    outage = threading.Thread(target=server.restart, kwargs={"down_s": 4.0})
    outage.start()
    answers = []
    while outage.is_alive():
        answers.append(status_of(read_pool))
        time.sleep(0.2)
    outage.join()
    restarted_at = time.time()
    scanner.wait_for(
        lambda: any(s["ts"] > restarted_at for s in scanner.events("scan")),
        START_TIMEOUT_S,
        "a scan after the outage",
    )
    stop(scanner)
    stop(web)

    failed_scans = scanner.events("pass-failed")
    assert len(failed_scans) >= 3 and answers.count(503) >= 3, (len(failed_scans), answers)
    assert all(e.get("fingerprint") == ["database-unavailable"] for e in sentry.events)
    by_process = {tags(e)["process"]: tags(e) for e in sentry.events}
    assert len(sentry.events) == len(by_process) == 2, sentry.summary()
    assert by_process["scanner-aws"] | {"region": ""} == {
        "process": "scanner-aws",
        "provider": "aws-sim",
        "provider_kind": "aws",
        "region": "",
        "job": f"scan:aws-sim:{by_process['scanner-aws']['region']}",
        "job_kind": "scan",
        "log_event": "pass-failed",
        "error_category": "database-unavailable",
    }
    assert by_process["web"] == {
        "process": "web",
        "log_event": "api-database-error",
        "error_category": "database-unavailable",
    }


def run_probe(probe: str, sentry: SentryServer) -> subprocess.CompletedProcess[str]:
    """A Python program run in a process of its own, given the local Sentry's DSN."""
    return subprocess.run(
        [sys.executable, "-c", probe, sentry.dsn], capture_output=True, text=True, timeout=60
    )


API_ERROR_PROBE = """
import logging
import sys

import sentry_sdk

from wm.ops.sentry import init_sentry
from wm.ops.telemetry import configure_logging, log

configure_logging()
init_sentry(sys.argv[1], "web")


def handler():
    raise KeyError("REQUEST-VALUE")


try:
    handler()
except KeyError as exc:
    log("api-error", logging.ERROR, exc_info=exc, trace_in_log=False, route="/api/x")
logging.getLogger("some.library").error("its own words")
sentry_sdk.flush(timeout=10)
"""


def test_an_api_error_keeps_its_trace_off_stdout_and_gives_sentry_the_exception(sentry):
    done = run_probe(API_ERROR_PROBE, sentry)
    assert done.returncode == 0, done.stderr

    (line,) = [json.loads(x) for x in done.stdout.splitlines() if '"api-error"' in x]
    assert "exception" not in line and "REQUEST-VALUE" not in done.stdout
    api_error, library = sentry.events
    assert api_error["exception"]["values"][-1]["type"] == "KeyError"
    assert tags(api_error) == {"process": "web", "route": "/api/x", "log_event": "api-error"}
    assert api_error["fingerprint"][:2] == ["api-error", "KeyError"]
    # A library's ERROR line is an event too, named by its logger.
    assert tags(library) == {"process": "web", "log_event": "some.library"}
    assert library["fingerprint"] == ["some.library"]


CRASH_PROBE = """
import sys
import threading

import sentry_sdk

from wm.ops.sentry import init_sentry
from wm.ops.telemetry import configure_logging

configure_logging()
init_sentry(sys.argv[1], "provisioner")


def job():
    raise ZeroDivisionError("in a thread")


thread = threading.Thread(target=job)
thread.start()
thread.join()
sentry_sdk.flush(timeout=10)
raise LookupError("at the top")
"""


def test_a_crash_no_line_told_of_is_an_event_from_a_thread_or_the_top(sentry):
    done = run_probe(CRASH_PROBE, sentry)
    assert done.returncode == 1 and "LookupError" in done.stderr, done.stderr

    sentry.wait_for(lambda: len(sentry.events) >= 2, 10, "both crashes")
    thread, top = sentry.events
    assert [e["exception"]["values"][-1]["type"] for e in (thread, top)] == [
        "ZeroDivisionError",
        "LookupError",
    ]
    assert all(tags(e)["process"] == "provisioner" for e in (thread, top))
    # One issue per exception type and place, as a bug's.
    assert thread["fingerprint"] == ["crash", "ZeroDivisionError", "<string>:job"]
    assert top["fingerprint"] == ["crash", "LookupError", "<string>:<module>"]
