"""What the take-over says while wm adopts a legacy worker-manager's VMs: at every scan, the
legacy's VMs of the unit that no import brought in (never deleted: named in the log, counted,
and a pool error each, once) and how many imported workers the unit still has; once none is
left anywhere a scanner looks, a one-time `take-over-adoption-done` line; and `wm status`'s
line saying how many imported workers remain in the whole deployment. The scanner calls
`AdoptionReport.scanned` once a scan has diffed its listing; `wm status` calls `status_line`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Gauge
from sqlalchemy import Engine

from wm.config.base import ProviderConfigBase
from wm.db import pool_errors
from wm.db.imported_workers import imported_left
from wm.db.pool_errors import NewPoolError
from wm.model import CloudInstance, PoolRecord, WorkerRecord
from wm.ops.telemetry import CHILDREN_MERGE, log
from wm.take_over.marks import imported_from

# VMs a legacy worker-manager made for a provider taking it over that wm has no row for, as
# the last scan of each unit found them: never deleted, left for a later `wm import`.
LEGACY_UNADOPTED = Gauge(
    "wm_legacy_vms_unadopted",
    "VMs with a legacy worker-manager's tags of this provider and no worker row (last scan).",
    ["provider", "region"],
    multiprocess_mode=CHILDREN_MERGE,
)
# Live workers `wm import` brought in, as the last scan of each unit read its rows (providers
# with adopt_legacy only): 0 in every unit of a provider means its take-over is done.
IMPORTED_WORKERS = Gauge(
    "wm_imported_workers",
    "Live workers imported from a legacy worker-manager in this scan unit (last scan).",
    ["provider", "region"],
    multiprocess_mode=CHILDREN_MERGE,
)
LEGACY_UNADOPTED_KIND = "legacy-vm-unadopted"  # pool error kind
UNADOPTED_KEY = "cloudId"  # its extra key naming the VM: one error per VM
DONE_EVENT = "take-over-adoption-done"
# What an operator may do once no imported worker is left (README: "Moving a deployment onto wm").
WHEN_DONE = "set adopt_legacy = false on its providers and drop [take_over] from the config"


def unadopted_error(provider_id: str, instance: CloudInstance) -> NewPoolError:
    """A legacy worker-manager's VM of this provider that wm has no row for: not deleted."""
    return NewPoolError(
        pool_id=instance.pool_id or "",
        kind=LEGACY_UNADOPTED_KIND,
        title="a VM of worker-manager's has no worker in wm",
        description=(
            f"{instance.tc_worker_id} ({instance.cloud_id}) carries the legacy worker-manager's "
            "tags of this provider but no imported worker: wm leaves it running. Run `wm "
            "import` again to take it over, or delete it by hand."
        ),
        provider_id=provider_id,
        # Not workerId/workerGroup: those mark a worker's own reports (reportWorkerError).
        extra={
            "legacyWorkerId": instance.tc_worker_id,
            "region": instance.region,
            UNADOPTED_KEY: instance.cloud_id,
        },
    )


def count_imported(rows: Sequence[WorkerRecord]) -> int:
    """How many of a unit's live rows `wm import` wrote."""
    return sum(1 for row in rows if imported_from(row.provider_data) is not None)


@dataclass
class AdoptionReport:
    """The take-over's report of a scanner's scans (one per scanner: its scans of every unit
    share it, to say once per provider that no imported worker is left)."""

    # (provider, region) -> imported workers its last scan here read
    left: dict[tuple[str, str], int] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # providers said done (until an import adds)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def scanned(
        self,
        engine: Engine,
        provider: Any,
        region: str,
        unadopted: Sequence[CloudInstance],
        pools: Mapping[str, PoolRecord],
        rows: Sequence[WorkerRecord],
    ) -> None:
        """One scan of (provider, region): its unadopted VMs reported, and for a provider
        taking over (`provider.adoption`) the imported workers its rows still hold. When a
        unit's last one is gone (or at its first scan here with none), one query asks whether
        any of the provider's is left anywhere; when none is, that is said once."""
        report_unadopted(engine, provider.id, region, unadopted, pools)
        if getattr(provider, "adoption", None) is None:
            return
        count = count_imported(rows)
        IMPORTED_WORKERS.labels(provider.id, region).set(count)
        if not self._newly_empty(provider.id, region, count):
            return
        if imported_left(engine, provider.id) or not self._first_to_say(provider.id):
            return
        log(DONE_EVENT, provider=provider.id, message=f"no imported worker is left: {WHEN_DONE}")

    def _newly_empty(self, provider_id: str, region: str, count: int) -> bool:
        """Whether this unit reads none left where its last scan here read some (or none
        was read here yet), while the provider is not said done."""
        with self._lock:
            before = self.left.get((provider_id, region))
            self.left[(provider_id, region)] = count
            if count:
                self.done.discard(provider_id)  # an import added some: say it again later
                return False
            return before != 0 and provider_id not in self.done

    def _first_to_say(self, provider_id: str) -> bool:
        with self._lock:
            first = provider_id not in self.done
            self.done.add(provider_id)
            return first


def report_unadopted(
    engine: Engine,
    provider_id: str,
    region: str,
    unadopted: Sequence[CloudInstance],
    pools: Mapping[str, PoolRecord],
) -> None:
    """worker-manager's VMs of this provider that no import has written a row for: named
    in the log and counted (wm_legacy_vms_unadopted) at every scan, and left running (a
    later `wm import` takes them); each is also a pool error of its pool, once (while
    that error is kept), so that `wm status` and `wm pools errors` show it."""
    LEGACY_UNADOPTED.labels(provider_id, region).set(len(unadopted))
    for instance in unadopted:
        log(
            "legacy-vm-unadopted",
            logging.WARNING,
            provider=provider_id,
            region=region,
            cloud_id=instance.cloud_id,
            tc_worker_id=instance.tc_worker_id,
            worker=instance.worker_id,
            pool=instance.pool_id,
        )
    # Whether it was named already is the database's to say, not this process's memory:
    # scanner replicas share the unit, and a restarted one remembers nothing.
    pool_errors.record_new_by_key(
        engine,
        [unadopted_error(provider_id, i) for i in unadopted if i.pool_id in pools],
        key=UNADOPTED_KEY,
    )


def status_line(engine: Engine, providers: Iterable[ProviderConfigBase]) -> str | None:
    """`wm status`'s word on the take-over: how many imported workers remain, by provider (one
    query); None when no provider (of the config's) takes over and none remains."""
    left = imported_left(engine, None)
    adopting = [p.id for p in providers if p.adopt_legacy]
    if not left and not adopting:
        return None
    total = sum(left.values())
    if not total:
        return f"take-over: no imported worker remains: you can {WHEN_DONE}."
    # A provider without adopt_legacy neither looks up nor deletes its imported workers' VMs.
    by_provider = ", ".join(
        f"{p} {n}" + ("" if p in adopting else " without adopt_legacy: its scans miss them")
        for p, n in sorted(left.items())
    )
    remain = "imported workers remain" if total != 1 else "imported worker remains"
    return f"take-over: {total} {remain} ({by_provider}); when 0 you can {WHEN_DONE}."
