"""The job wrapper every wm process runs its passes in: how a pass that raises is reported."""

from __future__ import annotations

import gc
import logging
import signal
from collections.abc import Iterator

import pytest

from procs.runtime import Runtime
from tests.support.configs import build
from wm.errors import CloudError, ErrorCategory


@pytest.fixture
def runtime(db_url: str, caplog: pytest.LogCaptureFixture) -> Iterator[Runtime]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    handlers_of = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    runtime = Runtime("test", build(environ={"DATABASE_URL": db_url}))
    root.addHandler(caplog.handler)  # the process's logging replaced the root's handlers
    yield runtime
    root.handlers[:], root.level = handlers, level
    for signum, handler in handlers_of.items():
        signal.signal(signum, handler)


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == event]


def test_a_pass_cut_short_by_the_shutdown_is_a_warning_without_a_traceback(runtime, caplog):
    # Scenario: SIGTERM arrives while a pass waits for its turn; the gate refuses the call as
    # the process stops, and the pass raises.
    def pass_refused_by_the_stopping_gate() -> None:
        runtime.stop.set()
        raise CloudError("aws-a", ErrorCategory.PAUSED, "ShuttingDown", "not sent")

    runtime.add_job("provision-aws-a", pass_refused_by_the_stopping_gate, 60.0)

    code = runtime.run()

    (abandoned,) = records(caplog, "pass-abandoned")
    assert abandoned.levelno == logging.WARNING and not abandoned.exc_info
    assert records(caplog, "pass-failed") == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert code == 0


def test_a_pass_that_fails_while_the_process_runs_is_an_error_with_its_traceback(runtime, caplog):
    runs = []

    def failing_then_stopping() -> None:
        runs.append(1)
        if len(runs) == 1:
            runtime.wake("provision-aws-a")  # run again at once, and stop then
            raise RuntimeError("a bug in the pass")
        runtime.stop.set()

    runtime.add_job("provision-aws-a", failing_then_stopping, 60.0)

    runtime.run()

    (failed,) = records(caplog, "pass-failed")
    assert failed.levelno == logging.ERROR and failed.exc_info
    assert records(caplog, "pass-abandoned") == []


def test_what_start_up_made_is_kept_out_of_full_collections(runtime):
    # Scenario: a process has built its providers and starts its jobs.
    frozen = []

    def a_pass() -> None:
        frozen.append(gc.get_freeze_count())
        runtime.stop.set()

    runtime.add_job("provision-aws-a", a_pass, 60.0)

    runtime.run()

    # Outcome: the objects alive at the start are frozen (a full collection skips them).
    assert frozen and frozen[0] > 0
    gc.unfreeze()
