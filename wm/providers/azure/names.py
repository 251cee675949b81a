"""The names wm gives a worker's Azure resources, derived from its worker id (pure): the same
id always gives the same names, which makes a repeated PUT update instead of duplicate. Both
the resource form (vm_body.py, provider.py) and the ARM form (arm.py) name their VMs so."""

from __future__ import annotations

import hashlib
import re

# The VM name is the worker's Taskcluster workerId, which allows 38 of [a-zA-Z0-9_-]
# (worker-manager names its VMs `vm-` + 35 characters for the same reason).
VM_NAME_MAX_CHARS = 38
COMPUTER_NAME_CHARS = 15  # Windows' limit; Linux allows more
NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
VM_NAME_PREFIX = "vm-"


def vm_name(worker_id: str, prefix: str = VM_NAME_PREFIX) -> str:
    """A valid ARM name derived from the worker id; the same id always gives the same name."""
    clean = NAME_UNSAFE.sub("-", worker_id)
    name = prefix + clean
    if clean != worker_id or len(name) > VM_NAME_MAX_CHARS or name.endswith((".", "-")):
        digest = hashlib.sha256(worker_id.encode()).hexdigest()[:10]
        name = f"{prefix}{clean[: VM_NAME_MAX_CHARS - len(prefix) - 11]}-{digest}"
    return name


def computer_name(worker_id: str) -> str:
    return "wm" + hashlib.sha256(worker_id.encode()).hexdigest()[: COMPUTER_NAME_CHARS - 2]
