"""A database without the schema wm needs, as an operator meets it: commands say to run
`wm db upgrade` and exit 2; processes started beside `release` wait for it, their health
saying not ready (503) until then, and exit 2 saying why if it never comes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from wm.db import migrate
from wm.db.engine import make_engine
from wmsim.postgres import free_port

REPO = Path(__file__).resolve().parents[2]
WM = [sys.executable, "-m", "wm"]
NO_SCHEMA = "has no wm schema: run `wm db upgrade`"
OLDER_REVISION = "0009"  # a revision before wm's newest


def write_config(tmp_path: Path, schema_wait_s: float = 120) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        'deployment_id = "schema-test"\n'
        f"[database]\nschema_wait_s = {schema_wait_s}\n"
        '[[providers]]\nid = "static-rack"\nkind = "static"\n'
    )
    return path


def environment(db_url: str, config: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": db_url, "WM_CONFIG": str(config), **extra}


def wm(*args: str, db_url: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WM, *args],
        capture_output=True,
        text=True,
        env=environment(db_url, config),
        cwd=REPO,
        timeout=60,
    )


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[str]]:
    with log.open("w") as out:
        popen = subprocess.Popen(
            [*WM, *args], env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    try:
        yield popen
    finally:
        if popen.poll() is None:
            popen.kill()
        popen.wait(30)


def until(condition: Callable[[], object], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def health(port: int) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return None  # not listening yet


@pytest.mark.parametrize(
    "args",
    [
        ("pools", "list"),
        ("pools", "apply", str(REPO / "pools" / "proj-ci.yml")),
        ("status",),
        ("tasks", "submit", "proj-ci/linux-large", "--count", "1"),
        ("workers", "list"),
    ],
)
def test_a_command_on_an_unmigrated_database_says_to_run_db_upgrade(args, tmp_path, empty_db_url):
    config = tmp_path / "config.toml"
    config.write_text((REPO / "config.toml").read_text())
    done = wm(*args, db_url=empty_db_url, config=config)
    assert done.returncode == 2, done.stderr
    assert NO_SCHEMA in done.stderr
    assert "Traceback" not in done.stderr and "worker_pools" not in done.stderr


def test_a_command_on_a_database_at_an_older_revision_names_both_revisions(tmp_path, empty_db_url):
    engine = make_engine(empty_db_url)
    migrate.upgrade(engine, OLDER_REVISION)
    older = migrate.current_revision(engine)
    engine.dispose()
    done = wm("pools", "list", db_url=empty_db_url, config=write_config(tmp_path))
    assert done.returncode == 2
    assert f"is at revision {older}, wm needs {migrate.head_revision()}" in done.stderr
    assert "run `wm db upgrade`" in done.stderr and "Traceback" not in done.stderr


def test_a_process_started_before_release_waits_for_the_schema_then_runs(tmp_path, empty_db_url):
    config = write_config(tmp_path)
    log = tmp_path / "provisioner.log"
    env = environment(empty_db_url, config)
    with process(["run", "provisioner"], env, log) as provisioner:
        until(lambda: "waiting-for-schema" in log.read_text(), "the provisioner says it waits")
        assert NO_SCHEMA in log.read_text()
        assert "process-started" not in log.read_text() and provisioner.poll() is None

        assert wm("db", "upgrade", db_url=empty_db_url, config=config).returncode == 0

        until(lambda: "process-started" in log.read_text(), "the provisioner starts")
        assert "schema-ready" in log.read_text()
        assert provisioner.poll() is None
        assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_process_stopped_while_it_waits_for_the_schema_stops_cleanly(
    signum, tmp_path, empty_db_url
):
    config = write_config(tmp_path)
    log = tmp_path / "scanner.log"
    with process(["run", "scanner"], environment(empty_db_url, config), log) as scanner:
        until(lambda: "waiting-for-schema" in log.read_text(), "the scanner says it waits")
        scanner.send_signal(signum)
        assert scanner.wait(60) == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def test_a_process_whose_schema_never_comes_exits_2_saying_why(tmp_path, empty_db_url):
    config = write_config(tmp_path, schema_wait_s=2)
    log = tmp_path / "scanner.log"
    with process(["run", "scanner"], environment(empty_db_url, config), log) as scanner:
        assert scanner.wait(60) == 2
    text = log.read_text()
    assert "error: the database at" in text and f"{NO_SCHEMA} (waited 2 s)" in text
    assert "Traceback" not in text


def test_web_answers_not_ready_until_the_schema_is_there(tmp_path, empty_db_url):
    config = write_config(tmp_path)
    port = free_port()
    log = tmp_path / "web.log"
    env = environment(empty_db_url, config, PORT=str(port))
    with process(["run", "web"], env, log) as web:
        until(lambda: health(port) is not None, "the web process answers")
        status, body = health(port) or (0, "")
        assert status == 503 and NO_SCHEMA in body

        assert wm("db", "upgrade", db_url=empty_db_url, config=config).returncode == 0

        until(lambda: health(port) == (200, '{"status":"ok"}'), "the web process is ready")
        assert web.poll() is None
