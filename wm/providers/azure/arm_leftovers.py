"""The leftover sweep of the ARM-template form: the NICs, public IPs and disks of a resource
group listed at most once per `LEFTOVER_SWEEP_S` per group and region (leftovers are rare: a
deployment's record covers the rest), the orphans among them (arm_workers.leftovers), each
dated by the sweep that first saw it so that the orphan grace runs from there."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from wm.model import CloudInstance
from wm.providers.azure.arm import LEFTOVER_SWEEP_S
from wm.providers.azure.arm_host import ArmHost
from wm.providers.azure.arm_workers import Leftover, leftovers


class LeftoverSweep:
    """One Azure provider's leftover sweeps, and when each leftover was first seen."""

    def __init__(self, provider: ArmHost) -> None:
        self._p = provider
        self._lock = threading.Lock()
        self._swept: dict[tuple[str, str], float] = {}  # (group, region) -> last sweep
        # leftover id (lower case) -> (first sweep that saw it, its (group, region))
        self._seen: dict[str, tuple[datetime, tuple[str, str]]] = {}
        self.interval_s = LEFTOVER_SWEEP_S

    def due(self, groups: Sequence[str], region: str, busy: set[str]) -> list[CloudInstance]:
        """The orphans of the groups whose sweep is due in `region`: attached to nothing, of no
        worker in `busy` (a deployment in flight, or a listed VM)."""
        found: list[CloudInstance] = []
        for group in groups:
            key = (group.lower(), region.lower())
            with self._lock:
                last = self._swept.get(key)
                due = last is None or time.monotonic() - last >= self.interval_s
                if due:
                    self._swept[key] = time.monotonic()
            if due:
                found += self._sweep_group(group, region, busy)
        return found

    def _sweep_group(self, group: str, region: str, busy: set[str]) -> list[CloudInstance]:
        clients = self._p.clients
        nics = self._p.all_pages(
            "NetworkInterfaces_List", lambda: clients.network.network_interfaces.list(group)
        )
        ips = self._p.all_pages(
            "PublicIPAddresses_List", lambda: clients.network.public_ip_addresses.list(group)
        )
        disks = self._p.all_pages(
            "Disks_ListByResourceGroup",
            lambda: clients.compute.disks.list_by_resource_group(group),
        )
        resources = [
            *(_leftover(n, n.virtual_machine is not None) for n in nics),
            *(_leftover(i, i.ip_configuration is not None) for i in ips),
            *(_leftover(d, bool(d.managed_by)) for d in disks),
        ]
        found = leftovers(
            resources,
            deployment_id=self._p.deployment_id,
            provider_id=self._p.id,
            region=region,
            busy_workers=busy,
            first_seen={},
        )
        return self._date(found, (group.lower(), region.lower()))

    def _date(self, found: Sequence[CloudInstance], unit: tuple[str, str]) -> list[CloudInstance]:
        """Date leftovers by the sweep of their group and region that first saw them; one no
        longer found there is forgotten."""
        now = datetime.now(UTC)
        ids = {i.cloud_id.lower() for i in found}
        with self._lock:
            for key in [k for k, (_, u) in self._seen.items() if u == unit]:
                if key not in ids:
                    del self._seen[key]
            for key in ids:
                self._seen.setdefault(key, (now, unit))
            seen = {key: self._seen[key][0] for key in ids}
        return [replace(i, launched_at=seen[i.cloud_id.lower()]) for i in found]

    def forget(self, resource_id: str) -> None:
        """A leftover deleted: a later one of that id is new."""
        with self._lock:
            self._seen.pop(resource_id.lower(), None)


def _leftover(model: Any, attached: bool) -> Leftover:
    return Leftover(
        resource_id=str(model.id),
        location=str(model.location or ""),
        tags=dict(model.tags or {}),
        attached=attached,
    )
