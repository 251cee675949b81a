"""No test or benchmark reads the clock when its module is imported or its tests collected.

A time read then is stale by the time a test uses it: `make test` runs for many minutes on a
loaded machine, and a Hawk timestamp taken at import was refused as too old. So the code a
module runs on import (its top level, decorators and their arguments, default values, class
bodies), and every function of the repository that code calls, must not read the clock; a test
reads it when it runs. The check reads the source (as tests/unit/test_layout.py does), and
follows calls into the repository's own functions, so a helper called by `parametrize` counts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKED = ("tests", "bench")
# Calls that read the clock, by the full name they resolve to through the module's imports.
CLOCKS = {
    *(f"time.{name}" for name in ("time", "monotonic", "perf_counter", "process_time")),
    *(f"time.{name}_ns" for name in ("time", "monotonic", "perf_counter", "process_time")),
    *(f"datetime.datetime.{name}" for name in ("now", "utcnow", "today")),
    "datetime.date.today",
    *(f"taskcluster{m}.{name}" for m in ("", ".utils") for name in ("fromNow", "fromNowJSON")),
}
# These read the clock only when called without a time.
CLOCKS_WITHOUT_ARGUMENTS = {f"time.{name}" for name in ("gmtime", "localtime", "ctime")}


@dataclass(frozen=True)
class ClockRead:
    path: str
    line: int
    clock: str
    via: tuple[str, ...] = ()  # the repository's functions called at import that lead to it

    def __str__(self) -> str:
        path = f" (called at import through {' -> '.join(self.via)})" if self.via else ""
        return f"{self.path}:{self.line}: {self.clock}{path}"


class Module:
    """One source file: its imports, as full names, and its top-level functions."""

    def __init__(self, name: str, source: str, path: str = "<source>") -> None:
        self.name, self.path = name, path
        self.tree = ast.parse(source)
        self.names: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.names[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.names[root] = root
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node)
                for alias in node.names:
                    self.names[alias.asname or alias.name] = f"{base}.{alias.name}"

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.name.split(".")
        anchor = package[: len(package) - node.level]
        return ".".join([*anchor, *([node.module] if node.module else [])])

    def full_name(self, node: ast.expr) -> str | None:
        """`dt.datetime.now` -> `datetime.datetime.now`, through this module's imports; a name
        defined here -> `<module>.<name>`."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.names.get(node.id)
        if root is None:
            root = f"{self.name}.{node.id}" if node.id in self.functions else node.id
        return ".".join([root, *reversed(parts)])


def import_time_nodes(tree: ast.Module) -> Iterator[tuple[ast.AST, bool]]:
    """Every node evaluated when the module is imported and its tests collected, and whether it
    sits in a decorator (where a function named, `ids=` say, is called at collection)."""
    return evaluated(tree.body)


def evaluated(statements: list[ast.stmt]) -> Iterator[tuple[ast.AST, bool]]:
    """Every node evaluated when these statements run (not the bodies of the functions they
    define), and whether it sits in a decorator."""

    def visit(node: ast.AST, decorating: bool) -> Iterator[tuple[ast.AST, bool]]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                yield from visit(decorator, True)
            yield from defaults(node.args, decorating)
            return  # the body runs when the function is called
        if isinstance(node, ast.Lambda):
            yield from defaults(node.args, decorating)
            if decorating:  # `ids=lambda size: ...` runs at collection
                yield from visit(node.body, decorating)
            return
        if _runs_as_script_only(node):
            return
        yield node, decorating
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                yield from visit(decorator, True)
            for child in [*node.bases, *node.keywords, *node.body]:
                yield from visit(child, decorating)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, decorating)

    def defaults(args: ast.arguments, decorating: bool) -> Iterator[tuple[ast.AST, bool]]:
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                yield from visit(default, decorating)

    for statement in statements:
        yield from visit(statement, False)


def _runs_as_script_only(node: ast.AST) -> bool:
    # `if __name__ == "__main__":` runs when a benchmark is started, not when it is imported.
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _clock(module: Module, call: ast.Call) -> str | None:
    name = module.full_name(call.func)
    if name in CLOCKS or (name in CLOCKS_WITHOUT_ARGUMENTS and not call.args):
        return name
    return None


class Checker:
    """Finds clock reads at import, following calls into the repository's own functions."""

    def __init__(self, load: dict[str, Module]) -> None:
        self.modules = load

    def check(self, module: Module) -> list[ClockRead]:
        found: list[ClockRead] = []
        seen: set[str] = set()
        for node, decorating in import_time_nodes(module.tree):
            if isinstance(node, ast.Call):
                clock = _clock(module, node)
                if clock:
                    found.append(ClockRead(module.path, node.lineno, clock))
                found += self._follow(module, node.func, (), seen)
            elif decorating and isinstance(node, (ast.Name, ast.Attribute)):
                found += self._follow(module, node, (), seen)
        return found

    def _follow(
        self, module: Module, called: ast.expr, via: tuple[str, ...], seen: set[str]
    ) -> list[ClockRead]:
        """Clock reads in a repository function called (or named in a decorator) at import."""
        name = module.full_name(called)
        target = self._function(name) if name else None
        if target is None or name in seen:
            return []
        seen.add(name)
        owner, function = target
        path = (*via, name)
        found = []
        for node, decorating in evaluated(function.body):
            if isinstance(node, ast.Call):
                clock = _clock(owner, node)
                if clock:
                    found.append(ClockRead(owner.path, node.lineno, clock, path))
                found += self._follow(owner, node.func, path, seen)
            elif decorating and isinstance(node, (ast.Name, ast.Attribute)):
                found += self._follow(owner, node, path, seen)
        return found

    def _function(self, name: str) -> tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        module_name, _, function = name.rpartition(".")
        module = self.modules.get(module_name)
        if module is None or function not in module.functions:
            return None
        return module, module.functions[function]


def repository_modules(*roots: str) -> dict[str, Module]:
    modules = {}
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            rel = str(path.relative_to(REPO))
            modules[name] = Module(name, path.read_text(), rel)
    return modules


def test_no_test_or_benchmark_reads_the_clock_at_import_or_collection():
    modules = repository_modules("tests", "bench", "wm", "wmsim")
    checker = Checker(modules)
    found = [
        str(read)
        for name, module in modules.items()
        if name.split(".")[0] in CHECKED
        for read in checker.check(module)
    ]
    assert found == []


def source(*lines: str) -> str:
    return "\n".join(lines) + "\n"


# A helper of the same module that reads the clock.
STAMP = ("import time", "def stamp():", "    return time.time()")
PARAMETRIZE = "@pytest.mark.parametrize"


@pytest.mark.parametrize(
    ("scenario", "code", "flagged"),
    [
        # What runs at import or collection: flagged.
        (
            "a module constant",
            source("from datetime import UTC, datetime", "NOW = datetime.now(UTC)"),
            True,
        ),
        ("a module imported as", source("import datetime as dt", "TODAY = dt.date.today()"), True),
        ("a monotonic start", source("import time", "STARTED = time.monotonic()"), True),
        (
            "a function imported as",
            source("from time import perf_counter as pc", "T0 = pc()"),
            True,
        ),
        (
            "taskcluster's fromNow",
            source("import taskcluster", "AT = taskcluster.fromNow('1h')"),
            True,
        ),
        ("gmtime of now", source("import time", "NOW = time.gmtime()"), True),
        ("a default value", source("import time", "def test(at=time.time()):", "    pass"), True),
        ("a keyword default", source("import time", "def test(*, at=time.time()): pass"), True),
        ("a class attribute", source("import time", "class Case:", "    at = time.time()"), True),
        (
            "a dataclass field's default",
            source(
                "import time",
                "from dataclasses import dataclass",
                "@dataclass",
                "class Case:",
                "    at: float = time.time()",
            ),
            True,
        ),
        (
            "a parametrize argument",
            source(
                "import pytest, time", f"{PARAMETRIZE}('at', [time.time()])", "def test(at): pass"
            ),
            True,
        ),
        (
            "an ids lambda",
            source(
                "import pytest, time",
                f"{PARAMETRIZE}('n', [1], ids=lambda n: str(time.time()))",
                "def test(n): pass",
            ),
            True,
        ),
        (
            "a helper called in parametrize",
            source(
                *STAMP, "import pytest", f"{PARAMETRIZE}('at', [stamp()])", "def test(at): pass"
            ),
            True,
        ),
        (
            "a helper named as ids",
            source(
                *STAMP, "import pytest", f"{PARAMETRIZE}('n', [1], ids=stamp)", "def test(n): pass"
            ),
            True,
        ),
        (
            "a helper called through another",
            source(*STAMP, "def twice():", "    return stamp(), stamp()", "PAIR = twice()"),
            True,
        ),
        # What runs when a test or a benchmark does: not flagged.
        ("in a test", source("import time", "def test():", "    assert time.time() > 0"), False),
        (
            "a default of None",
            source("import time", "def test(at=None):", "    at = at or time.time()"),
            False,
        ),
        (
            "in a method",
            source("import time", "class Case:", "    def at(self):", "        return time.time()"),
            False,
        ),
        (
            "a default factory",
            source(
                "import time",
                "from dataclasses import dataclass, field",
                "@dataclass",
                "class Case:",
                "    at: float = field(default_factory=time.time)",
            ),
            False,
        ),
        (
            "a lambda kept for later",
            source("import time", "CLOCK = lambda: time.monotonic()"),
            False,
        ),
        ("a sleep", source("import time", "time.sleep(0.1)"), False),
        (
            "a helper that returns a function reading it later",
            source(
                *STAMP,
                "def later():",
                "    def read():",
                "        return stamp()",
                "    return read",
                "READ = later()",
            ),
            False,
        ),
        (
            "a benchmark's main, run as a script",
            source(
                *STAMP, "def main():", "    stamp()", "if __name__ == '__main__':", "    main()"
            ),
            False,
        ),
        (
            "the function itself, not called",
            source("from time import time", "SECOND = time"),
            False,
        ),
    ],
)
def test_the_clock_check_sees_every_read_made_at_import(scenario, code, flagged):
    module = Module("tests.example", code)
    assert bool(Checker({module.name: module}).check(module)) is flagged, scenario
