"""Mutation testing of the pure decision modules: `make mutate` (README, "Mutation testing").

Runs mutmut 3 with the `[tool.mutmut]` table of pyproject.toml (which modules, which tests),
then reruns each survivor in a fresh process: mutmut forks one process per mutant from a
process that has already imported the modules, so a mutant in code that runs at import (a
table built by a function) survives there whatever the tests say. A mutant listed in
tools/mutate_equivalent.txt, with one line of why, counts as accounted for. Prints the score per
module and every survivor's change; exits 1 when a module scores below the goal.

    python tools/mutate.py            # mutate, test, report (the first run takes ~10 minutes)
    python tools/mutate.py --report   # report the last run again, without running mutmut
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
EQUIVALENT_FILE = ROOT / "tools" / "mutate_equivalent.txt"
GOAL = 97.0
KILLED_CODES = {1, 3}  # pytest: a test failed, or pytest failed inside (mutmut counts both)
TIMEOUT_CODES = {-24, 24, 152, 255, 36}  # a mutant that loops forever is caught too
NO_TESTS = 33  # no selected test calls the function (it may run only at import)
SURVIVED = 0
# The kinds' tests are by subject, not by module: a kind's mutant that no test calls after
# import is rerun against all of them.
KINDS_TESTS = {
    "test_provider_kinds",
    "test_pool_definition",
    "test_azure_arm_rules",
    "test_boot_data",
    "test_legacy_tags",
    "test_azure_states",
    "test_call_classes",
    "test_config",
    "test_kind_parts",
}


@dataclass
class ModuleScore:
    module: str
    killed: int = 0
    equivalent: int = 0
    survivors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.killed + self.equivalent + len(self.survivors)

    @property
    def score(self) -> float:
        return 100.0 * (self.killed + self.equivalent) / self.total if self.total else 100.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="report the last run only")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (2)")
    parser.add_argument(
        "mutants",
        nargs="*",
        help="only these, e.g. 'wm.scanning.scan_diff.*' (retested even if known)",
    )
    args = parser.parse_args(argv)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    if not args.report:
        _forget_fresh_verdicts(args.mutants)
        MUTANTS.mkdir(exist_ok=True)
        log = MUTANTS / "mutmut-run.log"  # its progress line is rewritten thousands of times
        with log.open("w") as out:
            ran = subprocess.run(
                [_bin("mutmut"), "run", "--max-children", str(args.jobs), *args.mutants],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if ran.returncode != 0:
            print(log.read_text(errors="replace")[-4000:].replace("\r", "\n"))
            print(f"mutmut failed (exit {ran.returncode}): {log}")
            return 2
    codes = _exit_codes()
    stats = json.loads((MUTANTS / "mutmut-stats.json").read_text())
    tests_of = stats["tests_by_mangled_function_name"]
    suspects = [
        m
        for m, c in codes.items()
        if c in (SURVIVED, NO_TESTS)
        and (not args.mutants or any(fnmatch(m, p) for p in args.mutants))
    ]
    if not args.report:
        selection = config["pytest_add_cli_args_test_selection"]
        with ThreadPoolExecutor(args.jobs) as pool:
            verdicts = pool.map(
                lambda m: _fresh_run(m, tests_of, selection, config["pytest_add_cli_args"]),
                suspects,
            )
            for mutant, killed in zip(suspects, verdicts, strict=True):
                codes[mutant] = 1 if killed else SURVIVED
        _save_fresh_verdicts(codes)
    equivalent = _equivalents()
    scores = _scores(codes, equivalent, config["only_mutate"])
    _print_report(scores, equivalent, codes)
    return 0 if all(s.score >= GOAL for s in scores) else 1


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _exit_codes() -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    fresh = MUTANTS / "fresh-verdicts.json"
    if fresh.exists():
        codes.update({k: v for k, v in json.loads(fresh.read_text()).items() if k in codes})
    return codes


def _forget_fresh_verdicts(patterns: list[str]) -> None:
    """Those of the mutants about to be tested again (all of them without patterns)."""
    fresh = MUTANTS / "fresh-verdicts.json"
    if not patterns or not fresh.exists():
        fresh.unlink(missing_ok=True)
        return
    kept = {
        mutant: code
        for mutant, code in json.loads(fresh.read_text()).items()
        if not any(fnmatch(mutant, p) for p in patterns)
    }
    fresh.write_text(json.dumps(kept, indent=1, sort_keys=True))


def _save_fresh_verdicts(codes: Mapping[str, int | None]) -> None:
    (MUTANTS / "fresh-verdicts.json").write_text(json.dumps(codes, indent=1, sort_keys=True))


def _fresh_run(
    mutant: str, tests_of: Mapping[str, list[str]], selection: list[str], pytest_args: list[str]
) -> bool:
    """Whether the mutant's tests fail in a process that imports the mutated module afresh."""
    function = re.sub(r"__mutmut_\d+$", "", mutant)
    # The module's own tests always: mutmut credits a function that runs at import (a table
    # built by it) to whichever test happened to import the module first.
    own = _own_tests(mutant, selection)
    tests = own + sorted(t for t in tests_of.get(function, ()) if t.split("::")[0] not in own)
    env = os.environ | {"MUTANT_UNDER_TEST": mutant, "PY_IGNORE_IMPORTMISMATCH": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", *pytest_args, *tests],
        cwd=MUTANTS,
        env=env | {"PYTHONPATH": str(MUTANTS)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    return done.returncode != 0


def _own_tests(mutant: str, selection: list[str]) -> list[str]:
    """A module's own test files, for a function no test calls after import."""
    module = _module_of(mutant)
    if module.startswith("wm.kinds."):
        return [t for t in selection if Path(t).stem in KINDS_TESTS]
    # By the module's own name, after words of its room or subject: wm.tc.scopes ->
    # test_tc_scopes.py, wm.take_over.routes -> test_take_over_routes.py,
    # wm.workers.transitions -> test_worker_transitions.py, wm.tc.hawk -> test_tc_hawk*.py.
    name = module.rpartition(".")[2]
    own = [t for t in selection if re.fullmatch(f"test_(\\w+_)?{name}(_.*)?", Path(t).stem)]
    return own or selection


def _module_of(mutant: str) -> str:
    # wm.tc.scopes.x_render__mutmut_3, wm.tc.hawk.xǁClientǁmethod__mutmut_1
    return re.split(r"\.x[_ǁ]", mutant, maxsplit=1)[0]


def _equivalents() -> dict[str, str]:
    """mutant name -> why it changes nothing anyone could observe."""
    found: dict[str, str] = {}
    for line in EQUIVALENT_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            found[name] = why.strip()
    return found


def _scores(
    codes: Mapping[str, int | None], equivalent: Mapping[str, str], patterns: Iterable[str]
) -> list[ModuleScore]:
    scores: dict[str, ModuleScore] = {}
    for mutant, code in sorted(codes.items()):
        module = _module_of(mutant)
        # mutmut names a package's __init__.py mutants after the package (wm.kinds.x_...).
        base = module.replace(".", "/")
        if not any(
            fnmatch(path, p) for path in (f"{base}.py", f"{base}/__init__.py") for p in patterns
        ):
            continue
        score = scores.setdefault(module, ModuleScore(module))
        if code in KILLED_CODES or code in TIMEOUT_CODES:
            score.killed += 1
        elif mutant in equivalent:
            score.equivalent += 1
        else:
            score.survivors.append(mutant)
    return sorted(scores.values(), key=lambda s: s.module)


def _print_report(
    scores: list[ModuleScore], equivalent: Mapping[str, str], codes: Mapping[str, int | None]
) -> None:
    by_module: dict[str, list[str]] = defaultdict(list)
    for score in scores:
        by_module[score.module] = score.survivors
    for score in scores:
        for mutant in score.survivors:
            print(f"survived: {mutant}")
            print(_change(mutant))
    stale = sorted(m for m in equivalent if codes.get(m) in KILLED_CODES or m not in codes)
    for mutant in stale:
        print(f"tools/mutate_equivalent.txt: {mutant} is killed or gone now: remove its line")
    print()
    print(f"{'module':<28} {'mutants':>7} {'killed':>6} {'equiv.':>6} {'survived':>8} {'score':>7}")
    for s in scores:
        mark = "" if s.score >= GOAL else f"  < {GOAL:.0f} %"
        print(
            f"{s.module:<28} {s.total:>7} {s.killed:>6} {s.equivalent:>6} "
            f"{len(s.survivors):>8} {s.score:>6.1f}%{mark}"
        )
    total = sum(s.total for s in scores)
    accounted = sum(s.killed + s.equivalent for s in scores)
    print(
        f"{'all':<28} {total:>7} {'':>6} {'':>6} {total - accounted:>8} "
        f"{100.0 * accounted / max(total, 1):>6.1f}%"
    )


def _change(mutant: str) -> str:
    """The lines a mutant changes, as `mutmut show` gives them."""
    shown = subprocess.run(
        [_bin("mutmut"), "show", mutant], cwd=ROOT, capture_output=True, text=True
    ).stdout
    lines = [
        line
        for line in shown.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    return "\n".join(f"    {line}" for line in lines)


if __name__ == "__main__":
    sys.exit(main())
