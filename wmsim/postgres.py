"""Find a PostgreSQL server, or start a throwaway one: for the demo, the tests and the
benchmarks, never for a deployment (which is given its DATABASE_URL).

Order: `DATABASE_URL`; testcontainers' Postgres when a Docker daemon answers; a throwaway
cluster from the local PostgreSQL binaries (as the `postgres` user when running as root,
fsync off, on a free port, removed at exit); otherwise `DatabaseUnavailable` naming the
package to install. The environment is read by wmsim/config.py, as everything the simulator
reads from it.

A throwaway cluster can also be restarted in place (same port, same data), which the fault
tests use to restart Postgres under running wm processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wm.cli.context import UserError
from wm.db.engine import normalise_url
from wmsim.config import postgres_environment

PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"
DOCKER_PING_TIMEOUT_S = 2
DOCKER_SOCKET = "/var/run/docker.sock"
PG_START_TIMEOUT_S = 30
# Durability is pointless for a throwaway cluster; these make it start and write fast.
FAST_SERVER_OPTIONS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
    "-c max_connections=300 -c shared_buffers=128MB"
)


class DatabaseUnavailable(UserError):
    """No PostgreSQL server could be found or started."""


@dataclass
class PostgresServer:
    url: str  # SQLAlchemy URL of the `postgres` database (or DATABASE_URL as given)
    origin: str  # "DATABASE_URL", "testcontainers" or "local binaries"
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)
    _restart: Callable[[float], None] | None = field(default=None, repr=False)

    def stop(self) -> None:
        self._stop()
        self._stop = lambda: None

    @property
    def restartable(self) -> bool:
        return self._restart is not None

    def restart(self, down_s: float = 0.0) -> None:
        """Shut the server down as an operator's restart does (every connection is cut, what
        was committed is kept), leave it down for `down_s`, start it again on the same port."""
        if self._restart is None:
            raise DatabaseUnavailable(
                f"a server from {self.origin} cannot be restarted here; only a throwaway "
                "cluster from the local binaries can"
            )
        self._restart(down_s)


@contextlib.contextmanager
def postgres(environ: Mapping[str, str] | None = None) -> Iterator[PostgresServer]:
    server = find_or_start(environ)
    try:
        yield server
    finally:
        server.stop()


def find_or_start(environ: Mapping[str, str] | None = None) -> PostgresServer:
    """`environ`: DATABASE_URL and DOCKER_HOST, by default this process's."""
    environ = postgres_environment() if environ is None else environ
    if environ.get("DATABASE_URL"):
        return PostgresServer(normalise_url(environ["DATABASE_URL"]), "DATABASE_URL")
    if docker_answers(environ):
        return start_testcontainer()
    bin_dir = local_bin_dir()
    if bin_dir is not None:
        return start_local_cluster(bin_dir)
    raise DatabaseUnavailable(
        "No PostgreSQL server: set DATABASE_URL, start a Docker daemon, or install the "
        "PostgreSQL server binaries (Debian/Ubuntu: `apt-get install postgresql`)."
    )


def docker_answers(environ: Mapping[str, str]) -> bool:
    # Without a daemon socket the docker client fails slowly and leaks its socket: look first.
    if not environ.get("DOCKER_HOST") and not Path(DOCKER_SOCKET).exists():
        return False
    try:
        import docker
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT_S)
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def start_testcontainer() -> PostgresServer:
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer("postgres:16-alpine", driver="psycopg2")
    container.start()
    return PostgresServer(container.get_connection_url(), "testcontainers", container.stop)


def local_bin_dir() -> Path | None:
    candidates = sorted(
        glob.glob(PG_BIN_GLOB), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_port_range(count: int, attempts: int = 200) -> int:
    """The first of `count` consecutive ports that are free on every address right now and
    reserved for this process's lifetime (wm's metrics ports: one per process type, from
    `[metrics] port` on).

    The ports are bound later, by the processes the caller starts, so two things could take
    them in between: the kernel, handing a port of its ephemeral range to some outgoing
    connection (a Postgres client, an SDK call), and another test picking the same range. The
    range is therefore drawn from below the ephemeral range, and reserved with a lock file
    that other callers on this host honour and the kernel drops when this process exits."""
    low, high = 10_000, _ephemeral_low() - count
    for _ in range(attempts):
        base = random.randrange(low, high)
        if all(_bindable(port) for port in range(base, base + count)) and _reserve(base, count):
            return base
    raise OSError(
        f"no {count} consecutive free ports found in {low}-{high + count} in {attempts} attempts"
    )


_RESERVATIONS: list[int] = []  # lock-file descriptors, held until this process exits


def _reserve(base: int, count: int) -> bool:
    folder = Path(tempfile.gettempdir()) / "wm-port-reservations"
    folder.mkdir(exist_ok=True)
    taken: list[int] = []
    for port in range(base, base + count):
        fd = os.open(folder / str(port), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            for held in taken:
                os.close(held)  # closing the descriptor releases its lock
            return False
        taken.append(fd)
    _RESERVATIONS.extend(taken)
    return True


def _ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (Linux's default when unread)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def start_local_cluster(bin_dir: Path) -> PostgresServer:
    # initdb and pg_ctl refuse to run as root: run them as the postgres user then.
    as_user = "postgres" if os.geteuid() == 0 else None
    if as_user:
        try:
            owner = pwd.getpwnam(as_user)
        except KeyError:
            raise DatabaseUnavailable(
                "Running as root, but there is no `postgres` user to run the PostgreSQL "
                "binaries as; install the `postgresql` package or set DATABASE_URL."
            ) from None
    root = Path(tempfile.mkdtemp(prefix="wm-pg-"))
    if as_user:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    data, port = root / "data", free_port()

    def run(*args: str) -> None:
        done = subprocess.run(
            [str(bin_dir / args[0]), *args[1:]],
            user=as_user,
            capture_output=True,
            text=True,
            timeout=PG_START_TIMEOUT_S,
            cwd=root,
        )
        if done.returncode != 0:
            raise DatabaseUnavailable(f"{args[0]} failed: {done.stderr.strip() or done.stdout}")

    def stop() -> None:
        with contextlib.suppress(Exception):
            run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)

    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} {FAST_SERVER_OPTIONS}"

    def start() -> None:
        run("pg_ctl", "-D", str(data), "-l", str(root / "log"), "-w", "-o", options, "start")

    def restart(down_s: float) -> None:
        # "fast": connections are cut and a checkpoint written, so nothing committed is lost
        # even with fsync and synchronous_commit off.
        run("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        time.sleep(down_s)
        start()

    try:
        run(
            "initdb",
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        )
        start()
    except BaseException:
        stop()
        raise
    url = f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    return PostgresServer(url, "local binaries", stop, restart)
