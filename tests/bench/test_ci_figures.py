"""`python -m bench.ci` as a test of the suite: its counts and bytes held to their bounds
(bench/README.md, "CI figures"), in a process of its own as `make test` ran it before the suite,
now beside the other tests, where its 50 s no longer leave the machine's second core idle. Its
table is printed after the tests, under "CI figures"; bench/results/ci.json is written as
before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.summary import SECTIONS
from wmsim.postgres import PostgresServer

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 900  # 50 s on a quiet machine; its own waits are bounded well within this


def test_the_ci_figures_meet_their_bounds(pg_server: PostgresServer):
    run = subprocess.run(
        [sys.executable, "-m", "bench.ci"],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": pg_server.url},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )

    SECTIONS["CI figures (python -m bench.ci)"].extend(run.stdout.splitlines())
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
