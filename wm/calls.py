"""The classes of cloud API calls an account's shared budget limits, and what one call draws.

The clouds limit their APIs per account by class of call (EC2: describe, mutating, and
RunInstances' bucket that counts instances; ARM: read, write, delete; GCE: read, write). One
enum names them for the providers' tables, every `Draw` and `PUBLISHED_BUDGETS`
(wm/config.py), so a misspelt class fails at once instead of silently drawing from no bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CallClass(StrEnum):
    RUN_INSTANCES = "run-instances"  # EC2 RunInstances' resource bucket: one token per instance
    MUTATING = "mutating"  # EC2
    DESCRIBE = "describe"  # EC2
    READ = "read"  # ARM, GCE
    WRITE = "write"  # ARM, GCE
    DELETE = "delete"  # ARM


ACCOUNT_WIDE = "*"  # the scope of a limit that covers the whole account, not one region


@dataclass(frozen=True)
class Draw:
    """What one call spends from its account's API budget: `cost` of one call class."""

    scope: str  # the region the cloud limits per, or ACCOUNT_WIDE
    call_class: CallClass
    cost: float = 1.0  # requests, or instances for EC2's RunInstances bucket

    def __post_init__(self) -> None:
        # A plain string is accepted only if it names a class: a typo raises ValueError here.
        object.__setattr__(self, "call_class", CallClass(self.call_class))
