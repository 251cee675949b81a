"""Taking over a live worker-manager deployment: how wm names and marks what it imports.

`wm import` copies a legacy worker-manager's pools and its workers that are not stopped; the
providers' scans then adopt those workers' VMs (found by worker-manager's own tags), and the
API accepts their next reregisterWorker on their own credentials (README: "Moving a deployment
onto wm"). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wm.model import WorkerRef

# provider_data key of an imported worker's row: the root URL of the deployment whose
# worker-manager made it. wm never saw such a worker's secret, nor chose its cloud names.
IMPORTED_FROM = "importedFrom"


def imported_worker_id(pool_id: str, worker_group: str, tc_worker_id: str) -> str:
    """wm's key for an imported worker: Taskcluster's names for it, which are unique together
    (worker-manager's own primary key), so a second import finds the row it wrote."""
    return f"{pool_id}/{worker_group}/{tc_worker_id}"


def imported_from(provider_data: Mapping[str, Any]) -> str | None:
    """The root URL an imported worker came from; None for a worker wm launched or made."""
    value = provider_data.get(IMPORTED_FROM)
    return value if isinstance(value, str) else None


def split_imported(refs: Sequence[WorkerRef]) -> tuple[list[WorkerRef], list[WorkerRef]]:
    """The refs split in (rows `wm import` wrote, wm's own), each in the order given: a
    provider hands the first to its adopter (wm/take_over/adoption/)."""
    theirs = [r for r in refs if imported_from(r.provider_data) is not None]
    return theirs, [r for r in refs if imported_from(r.provider_data) is None]
