"""The demo's live view: per pool, the queue and the capacity by state, and per cloud its API
calls, refreshed in place on a terminal (rich), or a line every few seconds elsewhere (CI logs).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

PLAIN_EVERY_S = 10.0  # without a terminal: one progress line this often


@dataclass(frozen=True)
class PoolRow:
    pool_id: str
    cloud: str
    pending: int
    claimed: int
    requested: int
    running: int
    stopping: int
    done: int
    errors: int  # worker-pool errors in the last hour
    served_by: str = ""  # a take-over: who serves the pool (legacy, or wm since a moment)


@dataclass(frozen=True)
class LiveState:
    elapsed_s: float
    phase: str  # what the demo is doing: workload, draining
    pools: Sequence[PoolRow]
    api_calls: Mapping[str, int]  # cloud -> requests its sim counted
    agents: int  # simulated workers started so far (on cloud VMs)
    preempted: int  # workers the clouds took back, as the scanners logged them
    processes: Mapping[str, str]  # process name -> running / crashed (exit code)
    hand_made: int = 0  # machines of static pools, made with createWorker
    hand_made_registered: int = 0  # ... that registered with their static secret
    take_over: str = ""  # a take-over: where the move stands
    market: str = ""  # --market: cost so far, where the VMs run, what is dry


class LiveView:
    def __init__(self, console: Console, *, live: bool) -> None:
        self._console = console
        self._live = Live(console=console, refresh_per_second=4, transient=False) if live else None
        self._last_plain = 0.0

    def __enter__(self) -> LiveView:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, state: LiveState) -> None:
        if self._live is not None:
            self._live.update(render(state))
        elif time.monotonic() - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = time.monotonic()
            self._console.print(plain_line(state), highlight=False)


def render(state: LiveState) -> Group:
    table = Table(title=f"wm demo, {state.phase}: {state.elapsed_s:5.0f} s", expand=False)
    for header in ("pool", "cloud", "pending", "running tasks", "requested", "running"):
        table.add_column(header, justify="left" if header in ("pool", "cloud") else "right")
    for header in ("stopping", "done", "errors"):
        table.add_column(header, justify="right")
    served = any(row.served_by for row in state.pools)
    if served:
        table.add_column("served by")
    for row in state.pools:
        table.add_row(
            row.pool_id,
            row.cloud,
            str(row.pending),
            str(row.claimed),
            str(row.requested),
            str(row.running),
            str(row.stopping),
            str(row.done),
            Text(str(row.errors), style="red" if row.errors else ""),
            *(
                [Text(row.served_by, style="green" if row.served_by.startswith("wm") else "")]
                if served
                else []
            ),
        )
    calls = ", ".join(f"{cloud} {n}" for cloud, n in sorted(state.api_calls.items()))
    processes = ", ".join(
        f"{name} {status}" if status != "running" else name
        for name, status in sorted(state.processes.items())
    )
    return Group(
        table,
        Text(
            f"cloud API calls: {calls}    simulated workers started: {state.agents}"
            f"    pre-empted: {state.preempted}"
            + (
                f"    hand-made machines: {state.hand_made}"
                f" ({state.hand_made_registered} registered)"
                if state.hand_made
                else ""
            )
        ),
        *([Text(f"take-over: {state.take_over}", style="bold")] if state.take_over else []),
        *([Text(f"market: {state.market}", style="bold")] if state.market else []),
        Text(f"processes: {processes}", style="dim"),
    )


def plain_line(state: LiveState) -> str:
    pending = sum(r.pending for r in state.pools)
    requested = sum(r.requested for r in state.pools)
    running = sum(r.running for r in state.pools)
    stopping = sum(r.stopping for r in state.pools)
    done = sum(r.done for r in state.pools)
    crashed = [n for n, s in state.processes.items() if s != "running"]
    return (
        f"[{state.elapsed_s:5.0f} s {state.phase}] pending {pending}, capacity requested "
        f"{requested} / running {running} / stopping {stopping}, tasks done {done}, "
        f"API calls {sum(state.api_calls.values())}"
        + (f", pre-empted {state.preempted}" if state.preempted else "")
        + (
            f", hand-made {state.hand_made_registered}/{state.hand_made} registered"
            if state.hand_made
            else ""
        )
        + (f", CRASHED: {', '.join(crashed)}" if crashed else "")
        + (f"; take-over: {state.take_over}" if state.take_over else "")
        + (f"; market: {state.market}" if state.market else "")
    )
