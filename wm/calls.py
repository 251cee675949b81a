"""The classes of cloud API calls the clouds limit, and what one call draws.

The clouds limit their APIs per account by class of call, each class a token bucket of its
own (README: "Cloud API limits" names each number's source). EC2, per account and region:
RunInstances and TerminateInstances each have a request bucket and a resource bucket counting
instances, and the paginated DescribeInstances draws from the non-mutating bucket. Azure, per
subscription: Resource Manager's read, write and delete buckets, and on top Compute's own
policies for VMs (create, delete, single get, list). GCE, per project: its per-minute quotas
for writes, gets and lists. One enum names them for the providers' tables, every `Draw`, each
kind's `PUBLISHED_BUDGETS` and the config's `budgets`, so a misspelt class fails at once
instead of silently drawing from no bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CallClass(StrEnum):
    # EC2
    RUN_INSTANCES = "run-instances"  # RunInstances' resource bucket: one token an instance
    RUN_INSTANCES_CALLS = "run-instances-calls"  # RunInstances' request bucket
    TERMINATE_INSTANCES = "terminate-instances"  # TerminateInstances' resource bucket
    TERMINATE_INSTANCES_CALLS = "terminate-instances-calls"  # its request bucket
    DESCRIBE = "describe"  # non-mutating actions, filtered or paginated
    # Azure Resource Manager, and GCE
    READ = "read"
    WRITE = "write"
    DELETE = "delete"  # ARM only
    # Azure Compute's policies for virtual machines
    PUT_VM = "put-vm"
    DELETE_VM = "delete-vm"
    GET_VM = "get-vm"  # "low cost get": one VM
    LIST_VMS = "list-vms"  # "high cost get": a list of VMs
    # GCE
    LIST = "list"  # *.list methods: a quota group apart from gets


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
