"""A benchmark's figures and their output: percentiles, ratios of baseline to wm, the table and
JSON printed and written with the commit they were measured on, and its sides run one after the
other with wm's log lines counted (and written as JSON lines if asked), not shown."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO_DIR
from wm.ops.telemetry import JsonLineFormatter
from wmsim.postgres import PostgresServer, find_or_start

QUIET_LOGGERS = ("azure", "botocore", "urllib3", "werkzeug", "google")


def percentile(ordered: list[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values; None when empty or on an uncovered task."""
    if not ordered:
        return None
    value = ordered[max(0, math.ceil(q * len(ordered)) - 1)]
    return None if math.isinf(value) else value


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def ratios(wm: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, float | None]:
    """baseline / wm per figure; null where wm's is 0, either is null, or the figure is a
    yes/no."""
    out: dict[str, float | None] = {}
    for name, ours in wm.items():
        theirs = baseline.get(name)
        yes_no = isinstance(ours, bool) or isinstance(theirs, bool)
        usable = not yes_no and ours not in (None, 0) and theirs is not None
        out[name] = round(theirs / ours, 3) if usable else None
    return out


def largest_deviation(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], names: Iterable[str]
) -> float:
    """The largest |ours / theirs - 1| over these figures: two zeros or two nulls agree, a
    zero or null against a number is a full deviation (1)."""
    worst = 0.0
    for name in names:
        mine, other = ours[name], theirs[name]
        if mine == other:
            continue
        if not mine or not other:
            worst = 1.0
            continue
        worst = max(worst, abs(mine / other - 1))
    return round(worst, 4)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}"


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """A table's lines: its first column to the left, the others to the right, each as wide
    as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        row[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(row[1:], widths[1:], strict=True))
        for row in rows
    ]


def table(result: Mapping[str, Any]) -> str:
    """wm, baseline and their ratio, one figure a row."""
    rows = [("figure", "wm", "baseline", "baseline/wm")]
    for name in result["wm"]:
        cells = (result["wm"][name], result["baseline"][name], result["ratio"][name])
        rows.append((name, *(cell(v) for v in cells)))
    return "\n".join(aligned(rows))


def measured_on(repo: Path = REPO_DIR) -> str | None:
    """The git commit the figures are measured on (short hash, `-dirty` when the work tree
    differs from it), so that `bench.check` can say which code a figure belongs to; null
    outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=repo).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def emit(result: Mapping[str, Any], tables: str, output: Path) -> None:
    """The table(s) and the JSON to stdout, the JSON, with the commit it was measured on, to
    `output`."""
    result = {**result, "commit": measured_on()}
    print(tables)
    print(json.dumps(result, indent=2))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {output}", file=sys.stderr)


SIDES = ("wm", "baseline")


def run_sides(
    run_side: Callable[[str, PostgresServer], dict[str, Any]],
    log_path: Path | None,
    sides: Sequence[str] = SIDES,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]]]:
    """Run each side, wm first, on the Postgres found or started (and stopped after): their
    figures, and wm's log lines at warning and above per side (to `log_path`.SIDE.log too)."""
    results: dict[str, dict[str, Any]] = {}
    warnings: dict[str, dict[str, int]] = {}
    server = find_or_start()
    try:
        for name in sides:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            with wm_logging(log_path.with_suffix(f".{name}.log") if log_path else None) as events:
                results[name] = run_side(name, server)
            warnings[name] = dict(events.counts)
    finally:
        server.stop()
    return results, warnings


class EventCounter(logging.Handler):
    """Counts wm's log lines at WARNING and above, by event."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.levelname.lower()}:{getattr(record, 'wm_event', record.msg)}"] += 1


@contextlib.contextmanager
def wm_logging(log_path: Path | None) -> Iterator[EventCounter]:
    """wm's log lines go to a counter (and a JSON-lines file if asked), not to the terminal."""
    logger = logging.getLogger("wm")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    counter = EventCounter()
    logger.handlers[:] = [counter]
    logger.setLevel(logging.INFO if log_path else logging.WARNING)
    logger.propagate = False
    file_handler = None
    if log_path is not None:
        file_handler = logging.FileHandler(log_path, mode="w")
        file_handler.setFormatter(JsonLineFormatter())
        logger.addHandler(file_handler)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield counter
    finally:
        if file_handler is not None:
            file_handler.close()
        logger.handlers[:], logger.level, logger.propagate = saved
