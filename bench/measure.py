"""What is counted in wm's own process while a benchmark measures it: the SQL statements an
engine sends (StatementCounter) and resident memory around a block (peak_memory)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Self

from sqlalchemy import Engine
from sqlalchemy import event as sa_event


class StatementCounter:
    """Counts the SQL statements an engine sends (SQLAlchemy's before_cursor_execute event),
    while it is entered; thread-safe, so concurrent scans count together."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.count = 0
        self._lock = threading.Lock()

    def _seen(self, *_args: Any) -> None:
        with self._lock:
            self.count += 1

    def __enter__(self) -> Self:
        sa_event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *_exc: object) -> None:
        sa_event.remove(self.engine, "before_cursor_execute", self._seen)


_STATUS_KIB = re.compile(r"^(VmRSS|VmHWM):\s+(\d+) kB", re.M)


def _memory_kib() -> dict[str, int]:
    with open("/proc/self/status") as status:
        return {name: int(kib) for name, kib in _STATUS_KIB.findall(status.read())}


@dataclass
class PeakMemory:
    """This process's resident memory before a measured piece of work and at its peak (MiB)."""

    before_mib: float = 0.0
    peak_mib: float = 0.0

    @property
    def growth_mib(self) -> float:
        return self.peak_mib - self.before_mib


@contextlib.contextmanager
def peak_memory() -> Iterator[PeakMemory]:
    """Measure resident memory around a block (Linux): garbage is collected and freed heap
    given back first, then the kernel's high-water mark (VmHWM) is reset, so the peak is this
    block's. Memory an earlier block freed but the allocator kept can be reused unseen, so the
    growth of a later, larger block is a lower bound."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(libc).malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset VmHWM to the current resident size
    memory = PeakMemory(before_mib=_memory_kib()["VmRSS"] / 1024)
    try:
        yield memory
    finally:
        memory.peak_mib = _memory_kib()["VmHWM"] / 1024
