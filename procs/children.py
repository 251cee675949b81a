"""A process's child processes: they die with it, even when it is killed at once, and the two
stop together.

The provisioner runs each cloud's passes in a child of its own (procs/provisioner.py): a
cloud's CPU (an SDK building and reading requests) never holds another cloud's pass back on
the interpreter's lock. The platform still sees one process: a child that dies takes the
parent down with a non-zero exit, so the platform restarts the whole, as it would one process.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, multiprocess

from wm.ops.telemetry import log

PR_SET_PDEATHSIG = 1  # linux/prctl.h
EXIT_CHILD_LOST = 4  # a child died while the parent was not stopping
# How long a child's clean stop waits for its parent's own stop before it counts as lost: the
# group's signal reaches both, and the parent's handler may run a moment after the child exits.
STOP_NEWS_GRACE_S = 2.0
METRICS_DIR_PREFIX = "wm-children-metrics-"


def die_with_parent(parent_pid: int) -> bool:
    """Have the kernel kill this process the moment its parent dies (Linux); False when the
    parent is gone already. Elsewhere the runtime's watch of the parent id is the only check."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return os.getppid() == parent_pid


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    reported: bool = False  # its failure to stop is logged once


def stopped_cleanly(code: int) -> bool:
    """Whether a child's exit code is a clean stop once the parent is stopping: its own exit 0,
    or death by the stop signal itself. A platform, systemd or a Ctrl-C signals the whole
    process group, so a child can get that signal as it finishes, when the interpreter no
    longer handles it."""
    return code in (0, -signal.SIGTERM, -signal.SIGINT)


def stop_exit_code(codes: Sequence[int]) -> int:
    """The parent's exit code for its children's, once all have stopped: 0 when every one
    stopped cleanly, else the first failure's (a signal, such as the SIGKILL of one that
    outlived the grace, is EXIT_CHILD_LOST)."""
    failed = [code for code in codes if not stopped_cleanly(code)]
    if not failed:
        return 0
    return failed[0] if failed[0] > 0 else EXIT_CHILD_LOST


class Children:
    """Spawns the children and watches them: one that exits while the parent is not stopping
    calls `on_lost(name, code)`. `terminate` asks all to stop; `wait` kills what outlives the
    grace. `stopping` is the parent's own stop: set when a signal reaches the parent."""

    def __init__(
        self,
        on_lost: Callable[[str, int], None],
        on_exit: Callable[[int], None],
        stopping: threading.Event | None = None,
    ):
        self._on_lost = on_lost
        self._on_exit = on_exit  # every exit, with the child's pid (its metrics files)
        self._children: list[Child] = []
        self._stopping = stopping if stopping is not None else threading.Event()

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Child:
        popen = subprocess.Popen(list(argv), env=dict(env))
        child = Child(name, popen)
        self._children.append(child)
        watch = threading.Thread(target=self._watch, args=(child,), name=f"watch-{name}")
        watch.daemon = True
        watch.start()
        log("child-started", child=name, pid=popen.pid)
        return child

    def terminate(self) -> None:
        """Ask every child still running to stop (SIGTERM: each finishes or abandons its
        passes safely, as the platform's own SIGTERM would have it)."""
        self._stopping.set()
        for child in self._children:
            if child.popen.poll() is None:
                child.popen.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> int:
        """Wait for every child until the monotonic deadline, kill what is left; return 0 when
        all stopped cleanly, else the first failure's exit code."""
        self.terminate()
        for child in self._children:
            try:
                child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log("child-killed", logging.WARNING, child=child.name, pid=child.popen.pid)
                child.popen.kill()
                child.popen.wait()
        for child in self._children:
            code = child.popen.returncode
            if not stopped_cleanly(code) and not child.reported:
                child.reported = True
                # Which one, and how: a negative code is the signal it died of.
                log(
                    "child-failed-to-stop",
                    logging.ERROR,
                    child=child.name,
                    pid=child.popen.pid,
                    exit_code=code,
                )
        return stop_exit_code([c.popen.returncode for c in self._children])

    def _watch(self, child: Child) -> None:
        code = child.popen.wait()
        self._on_exit(child.popen.pid)
        # A signal to the whole group may reach the child before the parent's handler has run:
        # a child that stopped as asked is lost only if its parent goes on running.
        grace = STOP_NEWS_GRACE_S if stopped_cleanly(code) else 0.0
        if self._stopping.wait(grace):
            return
        log("child-exited", logging.ERROR, child=child.name, pid=child.popen.pid, exit_code=code)
        self._on_lost(child.name, code if code > 0 else EXIT_CHILD_LOST)


@contextlib.contextmanager
def children_metrics_dir() -> Iterator[str]:
    """A directory for the children's metrics files, named for this process and removed when
    it exits. A parent killed outright leaves its directory behind: those of parents no longer
    running are removed first."""
    for stale in Path(tempfile.gettempdir()).glob(f"{METRICS_DIR_PREFIX}*"):
        pid = stale.name.removeprefix(METRICS_DIR_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{METRICS_DIR_PREFIX}{os.getpid()}-") as path:
        yield path


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def children_registry(metrics_dir: str) -> CollectorRegistry:
    """What the parent serves on its metrics port: its children's metrics, as each recorded
    them in `metrics_dir` (prometheus_client's multiprocess mode, which the directory in
    their environment turns on)."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=metrics_dir)
    return registry


def forget_child_metrics(metrics_dir: str, pid: int) -> None:
    """A dead child's gauges are no longer served (its counters and histograms still are)."""
    multiprocess.mark_process_dead(pid, path=metrics_dir)
