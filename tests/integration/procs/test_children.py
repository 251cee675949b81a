"""A provisioner's children's metrics directory: one per running parent, none left by dead ones."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from procs.children import METRICS_DIR_PREFIX, children_metrics_dir


def test_a_killed_parents_metrics_directory_is_removed_and_a_running_ones_kept():
    # Scenario: one parent was killed outright (its directory left behind), another still runs.
    dead = subprocess.Popen(["true"])  # a pid that no longer runs
    dead.wait()
    base = Path(tempfile.gettempdir())
    left_behind = Path(tempfile.mkdtemp(prefix=f"{METRICS_DIR_PREFIX}{dead.pid}-", dir=base))
    (left_behind / "counter_1.db").write_bytes(b"\0" * 16)
    sibling = subprocess.Popen(["sleep", "30"])
    try:
        running = Path(tempfile.mkdtemp(prefix=f"{METRICS_DIR_PREFIX}{sibling.pid}-", dir=base))

        with children_metrics_dir() as mine:
            assert Path(mine).is_dir()
            assert not left_behind.exists()
            assert running.is_dir()

        assert not Path(mine).exists()
        running.rmdir()
    finally:
        sibling.kill()
        sibling.wait()
