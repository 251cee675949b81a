"""When a process first saw each open intent with no pass holding its pool: the earliest time
its create may be judged lost.

An intent's create is sent only by the pass that committed it, while that pass holds its pool's
provisioning claim. Once the claim is free, every attempt of that create has been sent, so the
first time a scan or a later pass sees the intent with the claim free is no earlier than its
last send, however long the pass waited for its turn (rate limits, the shared budget, a slot)
before sending, and whether it ended or was killed. Counting the gate's longest call from that
sighting, not from when the row was written, is what makes "sent less than the longest retry
sequence ago" true of a create a dead process sent.

The record is kept in memory: a restarted process starts again from its own first sighting,
which only waits longer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime


class IntentSightings:
    """For each key (a scan unit, a pool), open intent id -> first seen with its pool free."""

    def __init__(self) -> None:
        self._seen: dict[object, dict[str, datetime]] = {}
        self._lock = threading.Lock()

    def note(
        self, key: object, free: Iterable[str], held: Iterable[str], now: datetime
    ) -> Mapping[str, datetime]:
        """Record this look at the open intents under `key`: `free` ones were seen with their
        pool's claim free, `held` ones while a pass held it (a sighting then proves nothing,
        but one made earlier still stands). Intents no longer open are forgotten. Returns
        the first free sighting of every intent that has one."""
        with self._lock:
            known = self._seen.get(key, {})
            seen = {i: known.get(i, now) for i in free}
            seen.update({i: known[i] for i in held if i in known})
            self._seen[key] = seen
            return dict(seen)
