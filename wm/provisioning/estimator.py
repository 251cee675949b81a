"""How much capacity to add to a pool: a pure function, Taskcluster's semantics.

`existing` is the capacity of every non-stopped worker and already includes `requested`
(capacity asked for but not yet running). `stopping` capacity still counts as existing in the
cloud's bill and in the fleet until it is gone, so it is added to what exists: launching for
demand that stopping workers are leaving would overshoot when their replacements arrive.
"""

from __future__ import annotations

import math

# Existing capacity far above max (both conditions): something is wrong with the accounting.
OVER_MAX_ABSOLUTE = 25
OVER_MAX_FACTOR = 1.25


def estimate(
    *,
    pending: int,
    claimed: int,
    min_capacity: int,
    max_capacity: int,
    scaling_ratio: float,
    existing: int,
    requested: int,
    stopping: int,
) -> int:
    """Capacity to add (whole capacity units, never negative)."""
    idle = max(0, existing - claimed)
    adjusted_pending = max(0, pending - idle)
    desired = max(
        min_capacity, min(adjusted_pending * scaling_ratio + existing + stopping, max_capacity)
    )
    to_add = max(0.0, desired - (existing + stopping) - requested)
    return math.ceil(to_add)


def far_above_max(*, existing: int, max_capacity: int) -> bool:
    """Existing capacity so far above max that the accounting must be wrong (the caller says
    so in the logs: a pure decision returns data)."""
    return existing > OVER_MAX_ABSOLUTE and existing > OVER_MAX_FACTOR * max_capacity


def target_capacity(
    *, pending: int, claimed: int, min_capacity: int, max_capacity: int, scaling_ratio: float
) -> float:
    """The capacity a pool should have now, for scale-down decisions."""
    return max(min_capacity, min((pending + claimed) * scaling_ratio, max_capacity))
