"""`[launch_choice]`: how each pool chooses among its launch configs (issue 40).

Pool definitions stay Taskcluster's, byte for byte (its schemas forbid new keys), so the policy
is chosen here, per pool id glob: "weights" (Taskcluster's weights, today's choice), "shadow"
(score by cost and log it, launch by weights) or "cost" (launch by the cost-scored weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Annotated, Literal

from pydantic import Field

from wm.config.base import Frozen

DEFAULT_BETA = 3.0  # research §8(b): 10 % dearer weighs x0.75, twice as dear x0.125
DEFAULT_SPREAD = 0.5  # no offering takes more than half of a pass or of the live spot


class ChoiceMode(StrEnum):
    WEIGHTS = "weights"
    SHADOW = "shadow"
    COST = "cost"


# The TOML spelling (strict validation takes a string for a Literal, not for an enum).
Mode = Literal["weights", "shadow", "cost"]


class PoolChoiceConfig(Frozen):
    """One `[[launch_choice.pools]]` table: the pools whose id matches `match` (a glob, as
    fnmatch reads it: `proj-ci/*`), with the mode and settings they use. The first table
    that matches a pool wins."""

    match: Annotated[str, Field(min_length=1)]
    mode: Mode
    beta: float | None = Field(None, ge=0, le=20)  # None: [launch_choice].beta
    spread: float | None = Field(None, gt=0, le=1)  # None: [launch_choice].spread


@dataclass(frozen=True)
class PoolChoice:
    """What one pool's launch choice runs with."""

    mode: ChoiceMode
    beta: float
    spread: float
    clock_speed: float = 1.0  # [launch_choice].clock_speed


class LaunchChoiceConfig(Frozen):
    default: Mode = "weights"
    beta: float = Field(DEFAULT_BETA, ge=0, le=20)
    # The most of a pass's new workers, and of the pool's live spot capacity, that one
    # offering takes while another is eligible (1: no cap).
    spread: float = Field(DEFAULT_SPREAD, gt=0, le=1)
    # The clouds' seconds a real second: 1 for real clouds. A simulated market run faster
    # (bench/launch_choice_e2e.py) sets its speed, and the launch choice's durations (a refused
    # offering's bench, a probe's wait, the evidence's half-lives, the window of recent errors
    # and pre-emptions) run on the market's clock, as they would against the clouds.
    clock_speed: float = Field(1.0, gt=0, le=3600)
    pools: tuple[PoolChoiceConfig, ...] = ()

    def for_pool(self, pool_id: str) -> PoolChoice:
        for rule in self.pools:
            if fnmatchcase(pool_id, rule.match):
                return PoolChoice(
                    ChoiceMode(rule.mode),
                    self.beta if rule.beta is None else rule.beta,
                    self.spread if rule.spread is None else rule.spread,
                    self.clock_speed,
                )
        return PoolChoice(ChoiceMode(self.default), self.beta, self.spread, self.clock_speed)

    @property
    def all_weights(self) -> bool:
        """No pool can be in another mode: the provisioner does exactly what it did before."""
        return self.default == ChoiceMode.WEIGHTS and all(
            rule.mode == ChoiceMode.WEIGHTS for rule in self.pools
        )
