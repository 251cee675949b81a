"""README's "Running the Procfile yourself", followed as written on a fresh clone.

The commands are read from README's section, so the two cannot drift: its `sh` blocks run in
order, in a copy of the repository's files (nothing a previous run left), with the section's
exports and this test's database. `wmsim serve` and `honcho start` (the real runner, on the real
Procfile) run in the background; every other command must exit 0. Then every process must be
working: the tasks the walkthrough submitted get workers launched, a simulated worker-runner on
each VM registers through the web process and runs them, every scanner scans, every metrics
port answers. A Ctrl-C to honcho's process group (as a terminal sends it) must stop each
process with exit 0 and leave nothing running. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.support.stack import REPO, START_TIMEOUT_S
from wm.config import loader as config_module
from wm.db.engine import make_engine
from wm.db.tasks import count_by_state
from wm.db.workers import list_workers
from wm.model import WorkerState
from wmsim.agent import AgentSettings
from wmsim.control import SimClient
from wmsim.fleet import Fleet, vm_provider

SECTION = "### Running the Procfile yourself"
# Done already: this test runs in the project's .venv, whose bin directory goes first on PATH.
INSTALL = ("make install", ". .venv/bin/activate")
SERVE, RUNNER = "wmsim serve", "honcho start"
# The shipped config's fixed ports: the simulated clouds, web, the four processes' metrics.
FIXED_PORTS = (5101, 5102, 5103, 8080, 9464, 9465, 9466, 9467)
WEB = "http://127.0.0.1:8080"
LONG_RUNNING_PROCESSES = ("web", "provisioner", "scanner-aws", "scanner-gcp", "scanner-azure")
HONCHO_LINE = re.compile(r"^\S+ (?P<name>[\w-]+)\.\d+\s+\| (?P<text>.*)$")
HONCHO_STOPPED = re.compile(r"^\S+ system\s+\| (?P<name>[\w-]+)\.\d+ stopped \(rc=(?P<rc>-?\d+)\)")
HONCHO_STARTED = re.compile(r"^\S+ system\s+\| (?P<name>[\w-]+)\.\d+ started \(pid=(?P<pid>\d+)\)")
# The fixed ports are the host's: a second run of this test on the machine (another `make
# test` beside this one) waits for the first to let them go, up to this long.
PORTS_LOCK = Path("/tmp/wm-readme-walkthrough-ports.lock")
PORTS_WAIT_S = 900.0
STOP_TIMEOUT_S = 30.0  # honcho SIGKILLs what is left 5 s after its SIGTERM
WORK_TIMEOUT_S = 180.0  # launch, boot (EC2 5 s), registration, two tasks of 10 s


def walkthrough_commands(readme: str) -> list[str]:
    """The command lines of the section's `sh` blocks, in order (comments left to the shell)."""
    start = readme.index(SECTION)
    end = readme.find("\n#", start + len(SECTION))
    section = readme[start : end if end != -1 else None]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def plain(line: str) -> str:
    return " ".join(words(line))


def fresh_clone(into: Path) -> Path:
    """The repository's files as a clone has them (tracked and new, never ignored ones such
    as .venv or .wm-sim), from the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
        return False


@dataclass
class Background:
    """A long-running command in a session of its own, its output kept line by line."""

    popen: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @classmethod
    def start(cls, line: str, cwd: Path, env: dict[str, str]) -> Background:
        popen = subprocess.Popen(
            ["bash", "-c", line],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        running = cls(popen)
        running._reader = threading.Thread(target=running._read, daemon=True)
        running._reader.start()
        return running

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def tail(self, count: int = 40) -> str:
        return "\n".join(self.lines[-count:])

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.popen.poll() is not None:
                raise AssertionError(
                    f"exited ({self.popen.returncode}) waiting for {what}:\n{self.tail()}"
                )
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")

    def interrupt(self) -> int:
        """Ctrl-C at its terminal: SIGINT to its whole process group; its exit code."""
        os.killpg(self.popen.pid, signal.SIGINT)
        try:
            return self.popen.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after Ctrl-C:\n{self.tail()}") from None

    def kill(self) -> None:
        # Its group, and those it started in sessions of their own (honcho's processes, as
        # its `started (pid=N)` lines name them).
        started = [int(m["pid"]) for line in list(self.lines) if (m := HONCHO_STARTED.match(line))]
        for group in [self.popen.pid, *started]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.popen.stdout is not None:
            self.popen.stdout.close()


@dataclass
class Honcho:
    """What honcho's output says of the processes it runs."""

    run: Background

    def output_of(self, process: str) -> list[str]:
        found = []
        for line in list(self.run.lines):
            match = HONCHO_LINE.match(line)
            if match and match["name"] == process:
                found.append(match["text"])
        return found

    def said(self, process: str, text: str) -> bool:
        return any(text in line for line in self.output_of(process))

    def pids(self) -> dict[str, int]:
        return {
            m["name"]: int(m["pid"])
            for line in list(self.run.lines)
            if (m := HONCHO_STARTED.match(line))
        }

    def exit_codes(self) -> dict[str, int]:
        return {
            m["name"]: int(m["rc"])
            for line in list(self.run.lines)
            if (m := HONCHO_STOPPED.match(line))
        }

    def errors(self) -> list[str]:
        return [
            f"{name}: {line}"
            for name in LONG_RUNNING_PROCESSES
            for line in self.output_of(name)
            if '"level": "error"' in line or "Traceback" in line
        ]


def answers(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
        return answer.status == 200
    return False


def group_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def fixed_ports() -> Iterator[None]:
    """The shipped config's ports for this test alone among the runs on this host."""
    with PORTS_LOCK.open("a") as lock:
        deadline = time.monotonic() + PORTS_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"another run held the walkthrough's ports ({PORTS_LOCK}) for "
                        f"{PORTS_WAIT_S:g} s"
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def background(fixed_ports: None) -> Iterator[list[Background]]:
    started: list[Background] = []
    yield started
    for running in reversed(started):  # nothing outlives the test, whatever happened
        running.kill()


@pytest.mark.slow
@pytest.mark.timeout(600 + PORTS_WAIT_S)
def test_the_readme_walkthrough_runs_the_procfile_under_honcho_and_stops_cleanly(
    tmp_path, db_url, background, monkeypatch
):
    commands = walkthrough_commands((REPO / "README.md").read_text())
    assert [plain(c) for c in commands if plain(c) in INSTALL] == list(INSTALL), commands
    assert sum(c.startswith(SERVE) for c in commands) == 1
    assert sum(c.startswith(RUNNER) for c in commands) == 1
    taken = [port for port in FIXED_PORTS if port_in_use(port)]
    assert not taken, f"the shipped config's ports {taken} are held by another process here"

    clone = fresh_clone(tmp_path / "clone")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("WM_", "TASKCLUSTER_", "SENTRY_", "PORT", "DATABASE_URL"))
    }
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    clouds = honcho = None
    for line in commands:
        argv = words(line)
        if plain(line) in INSTALL:
            continue
        if argv[0] == "export":
            env.update(item.split("=", 1) for item in argv[1:])
            env["DATABASE_URL"] = db_url  # "your PostgreSQL database": this test's
        elif line.startswith(SERVE):
            clouds = Background.start(line, clone, env)
            background.append(clouds)
            clouds.wait_for(lambda c=clouds: any("azure" in x for x in c.lines), 60, "the clouds")
        elif line.startswith(RUNNER):
            honcho = Honcho(Background.start(line, clone, env))
            background.append(honcho.run)
            honcho.run.wait_for(
                lambda h=honcho: (
                    answers(WEB + "/healthz")
                    and all(h.said(p, '"process-started"') for p in LONG_RUNNING_PROCESSES)
                ),
                2 * START_TIMEOUT_S,  # eight Python processes starting at once
                "every process started and the web process answering",
            )
        else:
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
            )
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    assert clouds is not None and honcho is not None

    monkeypatch.chdir(clone)  # the config's relative paths (.wm-sim/...) are the operator's
    config = config_module.load(clone / "config.toml", environ=env)
    engine = make_engine(db_url)
    try:
        fleet_works(config, engine, honcho)
    finally:
        engine.dispose()
    for process, port in zip(LONG_RUNNING_PROCESSES[1:], range(9464, 9468), strict=True):
        assert answers(f"http://127.0.0.1:{port}/metrics"), process
        assert honcho.said(process, '"event": "provision-pass"') or honcho.said(
            process, '"event": "scan"'
        ), process

    pids = honcho.pids()
    code = honcho.run.interrupt()
    assert code == 130, honcho.run.tail()  # honcho's own code for an interrupt
    assert honcho.exit_codes() == {p: 0 for p in LONG_RUNNING_PROCESSES}, honcho.run.tail()
    assert not [x for x in honcho.run.lines if "SIGKILL" in x], honcho.run.tail()
    assert honcho.errors() == []
    assert all(group_gone(pid) for pid in pids.values()), "a process outlived honcho"
    assert clouds.interrupt() == 0, clouds.tail()


def fleet_works(config, engine: Engine, honcho: Honcho) -> None:
    """The walkthrough's tasks get workers that register through the web process and run
    them: the provisioner launched them, the simulated cloud booted them, web let them in."""
    clients = {
        p.id: SimClient(p.kind, p.endpoint or "", getattr(p, "ca_bundle", None))
        for p in config.providers
        if p.endpoint
    }

    def running_vms() -> dict[str, set[str]]:
        return {
            provider_id: {
                vm.cloud_id
                for vm in client.instances()
                if vm.state == "running" and vm_provider(client.kind, vm.tags) == provider_id
            }
            for provider_id, client in clients.items()
        }

    fleet = Fleet(config, engine, AgentSettings(idle_timeout_s=None, poll_s=0.5), running_vms)
    try:
        deadline = time.monotonic() + WORK_TIMEOUT_S
        while time.monotonic() < deadline:
            fleet.sync()
            done = count_by_state(engine).get(("proj-ci/linux-large", "completed"), 0)
            if done >= 2:
                break
            if honcho.run.popen.poll() is not None:
                raise AssertionError(f"honcho exited:\n{honcho.run.tail()}")
            time.sleep(0.5)
        else:
            raise AssertionError(
                f"the tasks did not complete: {count_by_state(engine)}, workers "
                f"{[(w.worker_id, w.state) for w in list_workers(engine)]}\n{honcho.run.tail()}"
            )
        registered = list_workers(engine, pool_id="proj-ci/linux-large", state=WorkerState.RUNNING)
        assert len(registered) >= 1
    finally:
        fleet.halt()
