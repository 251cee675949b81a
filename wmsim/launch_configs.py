"""What every simulated cloud's example launch config shares: the `workerManager` block."""

from __future__ import annotations

from typing import Any


def worker_manager(
    *,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A launch config's `workerManager` block (worker-manager's schemas): `weight` is
    `initialWeight` (0..1); what is not given is left to worker-manager's defaults."""
    block: dict[str, Any] = {"capacityPerInstance": capacity, **extra}
    if launch_config_id is not None:
        block["launchConfigId"] = launch_config_id
    if weight is not None:
        block["initialWeight"] = weight
    if max_capacity is not None:
        block["maxCapacity"] = max_capacity
    return block
