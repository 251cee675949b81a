"""Reads the figures the benchmarks wrote and holds each to its goal.

The goals are the table under "## Goals" in bench/README.md, the one place they are kept: a
row names the figure, the benchmark whose `bench/results/NAME.json` holds it, where in that
JSON (a dotted path, optionally divided by a number or by a second path), and the goal (a
comparison with a number). Every goal is printed as met, NOT MET, or no figure (the result
file is missing, or holds no such figure: a size not run), with the measured value and the
commit the result file says it was measured on. The exit status is 1 when any goal is not met
or has no figure, after every goal is printed.

    .venv/bin/python -m bench.check                       # bench/results, bench/README.md
    .venv/bin/python -m bench.check --results DIR --goals README.md
"""

from __future__ import annotations

import argparse
import json
import operator
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
README = BENCH_DIR / "README.md"
GOALS_HEADING = "## Goals"
RELATIONS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}
MET, NOT_MET, NO_FIGURE = "met", "NOT MET", "no figure"
GOAL_PATTERN = re.compile(r"^(<=|>=|==|<|>)\s*(-?[0-9][0-9_.,]*)$")


class GoalTableError(ValueError):
    """The goals table cannot be read: the check would otherwise hold figures to nothing."""


@dataclass(frozen=True)
class Goal:
    figure: str  # what a reader calls it
    benchmark: str  # bench/results/<benchmark>.json
    path: tuple[str, ...]  # keys into that JSON
    divisor: tuple[str, ...] | float | None  # a second path, or a number, or none
    relation: str
    bound: float

    @property
    def expression(self) -> str:
        text = ".".join(self.path)
        if isinstance(self.divisor, tuple):
            text += " / " + ".".join(self.divisor)
        elif self.divisor is not None:
            text += f" / {self.divisor:g}"
        return text


@dataclass(frozen=True)
class Outcome:
    goal: Goal
    status: str  # MET, NOT_MET or NO_FIGURE
    value: float | None
    commit: str | None  # the result file's; None when it has none or there is no file
    file_found: bool


def number(text: str) -> float:
    return float(text.replace(",", "").replace("_", ""))


def parse_path(text: str) -> tuple[str, ...]:
    keys = tuple(text.strip().strip("`").split("."))
    if not all(keys):
        raise GoalTableError(f"not a JSON path: {text!r}")
    return keys


def parse_value(text: str) -> tuple[tuple[str, ...], tuple[str, ...] | float | None]:
    """`PATH`, `PATH / NUMBER` or `PATH / PATH`."""
    head, sep, tail = text.strip().strip("`").partition(" / ")
    if not sep:
        return parse_path(head), None
    try:
        return parse_path(head), number(tail.strip())
    except ValueError:
        return parse_path(head), parse_path(tail)


def parse_goal(text: str) -> tuple[str, float]:
    match = GOAL_PATTERN.match(text.strip().strip("`").strip())
    if match is None:
        raise GoalTableError(f"not a goal (a comparison with a number): {text!r}")
    return match.group(1), number(match.group(2))


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_goals(markdown: str) -> list[Goal]:
    """The rows of the table under the "## Goals" heading: figure | benchmark | value | goal
    (any further columns are notes)."""
    lines = markdown.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == GOALS_HEADING)
    except StopIteration:
        raise GoalTableError(f"no {GOALS_HEADING!r} heading") from None
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.lstrip().startswith("|"):
            rows.append(cells(line))
        elif rows and line.strip():
            break  # the text after the table
    if len(rows) < 2:
        raise GoalTableError(f"no table under {GOALS_HEADING!r}")
    goals = []
    for row in rows[2:]:  # the header, and its --- separator
        if len(row) < 4:
            raise GoalTableError(f"a goal row needs 4 cells: {row}")
        figure, benchmark, value, goal = row[:4]
        path, divisor = parse_value(value)
        relation, bound = parse_goal(goal)
        goals.append(Goal(figure, benchmark.strip("`"), path, divisor, relation, bound))
    if not goals:
        raise GoalTableError(f"the table under {GOALS_HEADING!r} has no goals")
    return goals


def lookup(result: Any, path: Sequence[str]) -> float | None:
    """The number at `path` in a result, or None where there is none (not run, null)."""
    for key in path:
        if not isinstance(result, Mapping) or key not in result:
            return None
        result = result[key]
    if isinstance(result, bool) or not isinstance(result, int | float):
        return None
    return float(result)


def measure(goal: Goal, result: Mapping[str, Any]) -> float | None:
    value = lookup(result, goal.path)
    if value is None or goal.divisor is None:
        return value
    divisor = (
        lookup(result, goal.divisor) if isinstance(goal.divisor, tuple) else float(goal.divisor)
    )
    if not divisor:
        return None
    return value / divisor


def evaluate(goal: Goal, result: Mapping[str, Any] | None) -> Outcome:
    """One goal against its benchmark's result (None: no result file)."""
    if result is None:
        return Outcome(goal, NO_FIGURE, None, None, file_found=False)
    commit = result.get("commit")
    value = measure(goal, result)
    if value is None:
        return Outcome(goal, NO_FIGURE, None, commit, file_found=True)
    met = RELATIONS[goal.relation](value, goal.bound)
    return Outcome(goal, MET if met else NOT_MET, value, commit, file_found=True)


def shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def report(outcomes: Sequence[Outcome]) -> str:
    """One line a goal, then a summary line."""
    rows = [("", "figure", "measured", "goal", "measured on", "from")]
    for outcome in outcomes:
        goal = outcome.goal
        if not outcome.file_found:
            where = "no result file"
        else:
            where = outcome.commit or "commit not recorded"
        rows.append(
            (
                outcome.status,
                goal.figure,
                shown(outcome.value),
                f"{goal.relation} {goal.bound:g}",
                where,
                f"{goal.benchmark}: {goal.expression}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    counts = {s: sum(o.status == s for o in outcomes) for s in (MET, NOT_MET, NO_FIGURE)}
    lines.append(
        f"{counts[MET]} met, {counts[NOT_MET]} not met, {counts[NO_FIGURE]} with no figure"
        f" (of {len(outcomes)} goals)"
    )
    return "\n".join(lines)


def all_met(outcomes: Sequence[Outcome]) -> bool:
    return all(outcome.status == MET for outcome in outcomes)


def read_results(results_dir: Path, benchmarks: Sequence[str]) -> dict[str, dict[str, Any] | None]:
    out: dict[str, dict[str, Any] | None] = {}
    for name in benchmarks:
        path = results_dir / f"{name}.json"
        out[name] = json.loads(path.read_text()) if path.exists() else None
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results", help="directory")
    parser.add_argument("--goals", type=Path, default=README, help="markdown")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    goals = parse_goals(args.goals.read_text())
    results = read_results(args.results, sorted({goal.benchmark for goal in goals}))
    outcomes = [evaluate(goal, results[goal.benchmark]) for goal in goals]
    print(report(outcomes))
    if not all_met(outcomes):
        print("bench.check: some goals are not met or have no figure", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
