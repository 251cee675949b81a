"""Run the Procfile's processes as separate OS processes, as a platform would, for the demo.

Each process runs in a session of its own (so a signal reaches its whole process group, shell
included), with its stdout and stderr written to `<log_dir>/<name>.log` and its JSON log lines
kept for the report. A process that exits while the supervisor is not stopping it has crashed.
`stop` sends SIGTERM to every group, waits, then SIGKILLs what is left: nothing outlives it.

Why not honcho: the demo needs each process's log lines while it runs (scan figures, errors)
and to tell a crash from a requested stop, which honcho's manager keeps to itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from wm.errors import WmError

STOP_GRACE_S = 12.0  # SIGTERM to SIGKILL; wm's processes exit within 10 s
# The demo's processes besides wm's own: the simulated clouds, the Procfile's release phase and
# the operator's step after it (`wm pools apply`).
CLOUDS_PROCESS = "clouds"
RELEASE = "release"
APPLY_POOLS = "apply-pools"
START_TIMEOUT_S = 60.0  # how long a process may take to start answering or logging
RELEASE_TIMEOUT_S = 120.0
SHELL_SYNTAX = frozenset(";&|<>()$`\n")
TAIL_LINES = 20


class ProcfileError(WmError):
    """The Procfile cannot be read."""


@dataclass(frozen=True)
class ProcfileEntry:
    name: str
    command: str


def parse_procfile(text: str) -> list[ProcfileEntry]:
    """`name: command` lines; blank lines and `#` comments are skipped."""
    entries: list[ProcfileEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, command = stripped.partition(":")
        name, command = name.strip(), command.split(" #")[0].strip()
        if not sep or not name or not command or not name.replace("-", "").isalnum():
            raise ProcfileError(f"line {number}: expected `name: command`, got {line!r}")
        if any(e.name == name for e in entries):
            raise ProcfileError(f"line {number}: process {name!r} appears twice")
        entries.append(ProcfileEntry(name, command))
    return entries


def read_procfile(path: Path) -> list[ProcfileEntry]:
    try:
        return parse_procfile(path.read_text())
    except OSError as exc:
        raise ProcfileError(f"{path}: {exc.strerror}") from None


@dataclass
class Supervised:
    """One running process and what it printed."""

    name: str
    command: str
    popen: subprocess.Popen[str]
    log_file: IO[str]
    lines: list[dict[str, Any]] = field(default_factory=list)  # its JSON log lines
    raw: list[str] = field(default_factory=list)  # the last lines, whatever they were
    stopping: bool = False
    _reader: threading.Thread | None = None

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == name]

    def tail(self) -> str:
        return "".join(self.raw[-TAIL_LINES:])

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.log_file.write(line)
            self.raw.append(line)
            del self.raw[:-TAIL_LINES]
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    self.lines.append(json.loads(line))
        self.log_file.close()


@dataclass(frozen=True)
class Crash:
    name: str
    exit_code: int
    tail: str  # its last lines of output


@dataclass
class Supervisor:
    entries: Sequence[ProcfileEntry]
    env: Mapping[str, str]
    log_dir: Path
    cwd: Path
    processes: dict[str, Supervised] = field(default_factory=dict)

    def entry(self, name: str) -> ProcfileEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise ProcfileError(f"the Procfile has no process {name!r}")

    def run_once(
        self, name: str, command: str | None = None, timeout_s: float = RELEASE_TIMEOUT_S
    ) -> Supervised:
        """Run a one-off process (the release phase, or `command` under `name`) to its end;
        raise if it fails."""
        process = self.start(name, command)
        try:
            code = process.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._kill(process)
            raise WmError(f"{name} did not finish within {timeout_s:g}s") from None
        self._join(process)
        del self.processes[name]
        if code != 0:
            raise WmError(f"{name} exited with {code}:\n{process.tail()}")
        return process

    def start(self, name: str, command: str | None = None) -> Supervised:
        """Start a Procfile process (or `command` under that name) in a session of its own."""
        command = command or self.entry(name).command
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file = (self.log_dir / f"{name}.log").open("a", buffering=1)  # line by line
        # A simple command replaces the shell, so signals reach the process itself (the
        # Procfile's own entries say `exec` already).
        simple = not any(c in command for c in SHELL_SYNTAX) and not command.startswith("exec ")
        popen = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {command}" if simple else command],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(self.env),
            cwd=self.cwd,
            start_new_session=True,
        )
        process = Supervised(name, command, popen, log_file)
        process._reader = threading.Thread(target=process._read, daemon=True, name=f"log-{name}")
        process._reader.start()
        self.processes[name] = process
        return process

    def crashes(self) -> list[Crash]:
        """Processes that exited while nobody was stopping them."""
        return [
            Crash(p.name, p.popen.returncode, p.tail())
            for p in self.processes.values()
            if not p.stopping and p.popen.poll() is not None
        ]

    def stop(self, names: Sequence[str] | None = None, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the processes (all by default), then SIGKILL what is left after the grace."""
        chosen = [self.processes[n] for n in (names or list(self.processes))]
        for process in chosen:
            process.stopping = True
            self._signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in chosen:
            # The whole group, not only its leader: a shell may have children still stopping.
            while self._group_alive(process) and time.monotonic() < deadline:
                time.sleep(0.05)
            self._kill(process)
            self._join(process)

    def _kill(self, process: Supervised) -> None:
        self._signal(process, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=STOP_GRACE_S)

    @staticmethod
    def _group_alive(process: Supervised) -> bool:
        process.popen.poll()  # reap the leader if it exited: a zombie would still count
        try:
            os.killpg(process.popen.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @staticmethod
    def _signal(process: Supervised, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.popen.pid, signum)

    @staticmethod
    def _join(process: Supervised) -> None:
        if process._reader is not None:
            process._reader.join(timeout=5)
        if process.popen.stdout is not None:
            process.popen.stdout.close()


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file the demo wrote, or {} if it has not yet."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        return {}
