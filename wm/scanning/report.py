"""What one scan did, and how a scan ends short of its last step (at a safe point)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScanReport:
    """What one scan did: its own figures, never its provider's other scans'."""

    provider: str
    region: str
    listed: int
    changed: int
    missing: int  # rows the list did not show
    looked_up: int  # of those, how many a look-up answered for (0 when the call failed)
    terminated: int
    orphans: int
    preempted: int  # workers this scan found pre-empted
    api_calls: int  # SDK calls this scan made (retries included), wherever they ran
    duration_s: float
    # VMs a legacy worker-manager made for this provider with no row: reported, never deleted
    # (also the wm_legacy_vms_unadopted gauge and a legacy-vm-unadopted log line each).
    unadopted: int = 0
    pages: int = 0  # pages of the listing read
    # Listed instances held at once, at most: a page, and those the scan acts on after the
    # listing (orphans, legacy VMs with no row, records to write), never the whole listing.
    held_max: int = 0


class ScanOverran(Exception):
    """The scan ran past the provider's maximum scan time and stopped at a safe point."""


class ScanStopped(Exception):
    """The process is stopping: the scan stopped at a safe point (not a failure)."""
