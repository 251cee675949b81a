"""How often one process reports the same failure: the first time, then once per window.

An outage fails every pass of every job until it ends: reported each time, a 20 s database
outage was 23 events and one unreachable cloud endpoint 12 in 45 s. A repeat of a report
already sent within the window is counted and dropped; the first after the window goes out
with the count of those dropped since the last one sent.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass, field

MAX_KEYS = 10_000  # distinct failures remembered; past that, those not seen for a window go


@dataclass(frozen=True)
class Admission:
    send: bool
    suppressed: int  # repeats dropped since the last one sent (when send)


@dataclass
class _Seen:
    sent_at: float
    suppressed: int = 0


@dataclass
class RepeatLimiter:
    window_s: float  # 0: every report is sent
    _seen: dict[Hashable, _Seen] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, key: Hashable, now: float) -> Admission:
        """Whether a report with this key goes out at `now` (monotonic seconds)."""
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen.sent_at < self.window_s:
                seen.suppressed += 1
                return Admission(send=False, suppressed=seen.suppressed)
            if len(self._seen) >= MAX_KEYS:
                self._forget_older_than(now - self.window_s)
            self._seen[key] = _Seen(sent_at=now)
            return Admission(send=True, suppressed=seen.suppressed if seen else 0)

    def _forget_older_than(self, cutoff: float) -> None:
        for key in [k for k, s in self._seen.items() if s.sent_at < cutoff]:
            del self._seen[key]
