"""The old provisioner's single loop: every provider's pass, one after the other, in one loop.

What it reproduces (DESIGN.md: the lesson "a slow cloud must never hold the others back"; the
old provisioner went over every pool of every cloud in one loop, so ten hours of Azure calls
that took minutes or failed held every other cloud's provisioning back with them): one thread
runs wm's own `Provisioner.run_pass` for each provider in turn, then waits for the interval.
A pass to a slow cloud delays the passes queued behind it, and new demand for a fast cloud
waits for the loop to come round again.

The passes, estimator, gate and adapters are wm's, so the loop's shape is the only difference
from wm's provisioner process (one APScheduler job per provider, each on its own executor).

What it leaves out, in the old design's favour: it is woken by new tasks as wm's process is
(LISTEN/NOTIFY, which the old provisioner did not have), so both sides react to a burst as
soon as the loop is free; and the old design's other flaws (counting only the scanner's
record: see old_provisioner.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from wm.ops.telemetry import log
from wm.provisioning.provisioner import Provisioner

LOOP_KEY = "all-providers"  # the single loop's name among the pass loops


def single_loop_pass(provisioner: Provisioner, provider_ids: Sequence[str]) -> Callable[[str], int]:
    """One run of the single loop: a pass per provider, in order; a failing pass is logged and
    the loop goes on to the next provider (as the old loop reported and moved on). Returns the
    passes that failed."""

    def run_all(_key: str) -> int:
        failed = 0
        for provider_id in provider_ids:
            try:
                provisioner.run_pass(provider_id)
            except Exception:
                failed += 1
                log("single-loop-pass-failed", logging.ERROR, exc_info=True, provider=provider_id)
        return failed

    return run_all
