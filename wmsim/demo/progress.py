"""What a demo run has seen so far: the samples of its pools and clouds, the tasks it submitted,
the clouds' VMs."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from wmsim.demo.report import PoolSample, Sample


@dataclass
class Progress:
    """What the run has seen so far."""

    started: float = field(default_factory=time.monotonic)
    samples: list[Sample] = field(default_factory=list)
    submitted: dict[str, int] = field(default_factory=dict)
    vms: dict[str, list[Any]] = field(default_factory=dict)  # cloud kind -> its SimVms
    ledgers: dict[str, Any] = field(default_factory=dict)  # cloud kind -> its market's ledger
    drained: bool = False

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def record(self, pools: Iterable[Any], api_calls: dict[str, int]) -> None:
        """A sample: each pool's tasks and capacity (from a row of its pending, claimed,
        requested, running and stopping) and the clouds' API calls so far."""
        self.samples.append(
            Sample(
                t_s=self.elapsed_s,
                pools={
                    p.pool_id: PoolSample(p.pending, p.claimed, p.requested, p.running, p.stopping)
                    for p in pools
                },
                api_calls=api_calls,
            )
        )


def any_busy(pools: Iterable[Any]) -> bool:
    """Whether any pool (a row as `Progress.record` takes) has tasks or capacity left."""
    return any(p.pending or p.claimed or p.requested or p.running or p.stopping for p in pools)
