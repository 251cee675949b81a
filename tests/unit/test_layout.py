"""Rules of the code's shape that a reviewer would otherwise have to remember."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.I | re.S
)
QUERY_BUILDERS = {"select", "insert", "update", "delete", "text"}


def python_files(*roots: str):
    for root in roots:
        yield from (REPO / root).rglob("*.py")


def test_sql_lives_only_in_the_db_layer():
    offenders = []
    for path in python_files("wm", "procs"):
        if "wm/db/" in path.as_posix():
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy"):
                used = {alias.name for alias in node.names} & QUERY_BUILDERS
                if used:
                    offenders.append(f"{path}: imports {sorted(used)} from {node.module}")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.search(node.value)
            ):
                offenders.append(f"{path}:{node.lineno}: SQL in a string")
    assert offenders == []


def imported_modules(path: Path) -> list[str]:
    """Every module a file imports, at the top or inside a function (lazy imports too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


def within(package: str, name: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_wm_never_imports_procs():
    offenders = []
    for path in python_files("wm"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            imports_procs = any(n == "procs" or n.startswith("procs.") for n in names)
            # `wm run NAME` imports the chosen process module, and only it may.
            if imports_procs and path.name != "run.py":
                offenders.append(str(path))
    assert offenders == []


def test_nothing_a_deployment_runs_imports_the_simulator():
    # wm and procs are what production runs; wmsim sits beside them, and only it may import
    # the other. A module name handed to importlib would slip past the import statements, so
    # no string in wm or procs may name wmsim either.
    offenders = []
    for path in python_files("wm", "procs"):
        offenders += [f"{path}: imports {n}" for n in imported_modules(path) if within("wmsim", n)]
        offenders += [
            f"{path}:{node.lineno}: names wmsim in a string"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and "wmsim" in str(node.value)
        ]
    assert offenders == []


def test_only_the_config_modules_read_the_environment():
    offenders = []
    for path in python_files("wm", "procs", "wmsim"):
        if path.as_posix().endswith(("wm/config.py", "wmsim/config.py")):
            continue
        if re.search(r"os\.environ|os\.getenv", path.read_text()):
            offenders.append(str(path))
    assert offenders == []


# wm's layers, lowest first: a module imports only from its own layer or the layers below.
# Each entry is a unit (a module or a package); the longest matching name wins. Units of a
# layer marked `peers_apart` import nothing from each other: the cloud providers do not reach
# into the shared budget, nor the queues into the providers. wmsim is not part of wm.
class Layer(NamedTuple):
    name: str
    peers_apart: bool
    units: tuple[str, ...]


LAYERS = (
    Layer(
        "model",
        False,
        ("wm", "wm.model", "wm.errors", "wm.config", "wm.calls", "wm.provider_ids"),
    ),
    Layer(
        "pure",
        False,
        (
            "wm.estimator",
            "wm.scan_diff",
            "wm.intent_sightings",
            "wm.launch_choice",
            "wm.lifecycle",
            "wm.stages",
            "wm.pool_definition",
            "wm.pool_apply",
            "wm.legacy_pools",
            "wm.identity",
            "wm.registration_policy",  # registerWorker's refusals and expected identity
            # Worker pool definitions: the schemas as data, their checker, definition files.
            "wm.json_check",
            "wm.pool_schemas",
            "wm.pool_files",
            "wm.pool_definition",
            "wm.tc",  # Taskcluster's scopes, credentials, Hawk and errors: pure, no I/O
        ),
    ),
    # Above the pure decisions, which return data and leave the logging to their callers.
    Layer("telemetry", False, ("wm.telemetry",)),
    Layer("storage", False, ("wm.db",)),
    # What the API and the CLI both do: applying pool definitions, one transaction.
    Layer("use cases", False, ("wm.pool_changes",)),
    Layer("adapters", True, ("wm.providers", "wm.queues", "wm.budget")),
    Layer("passes", True, ("wm.provisioner", "wm.scanner", "wm.api")),
    Layer("top", False, ("procs", "wm.cli", "wm.__main__")),
)


def _unit(module: str) -> tuple[int, bool, str] | None:
    best = None
    for rank, layer in enumerate(LAYERS):
        for unit in layer.units:
            inside = module.startswith(unit + ".") and unit != "wm"  # the package, not all of wm
            if (module == unit or inside) and (best is None or len(unit) > len(best[2])):
                best = (rank, layer.peers_apart, unit)
    return best


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, module: str, is_package: bool = False):
    """Every module this source imports, lazy imports inside functions included."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield node.lineno, base
            # `from wm import scan_diff` imports the module wm.scan_diff.
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def upward_imports() -> list[str]:
    offenders = []
    for path in python_files("wm", "procs"):
        module = _module_name(path)
        if "migrations" in path.parts:
            continue
        mine = _unit(module)
        assert mine is not None, f"{module} is in no layer of LAYERS"
        for lineno, imported in _imports(path.read_text(), module, path.name == "__init__.py"):
            if not imported.startswith(("wm.", "procs")) and imported != "wm":
                continue
            theirs = _unit(imported)
            if theirs is None or theirs[2] == mine[2]:
                continue
            upward = theirs[0] > mine[0]
            across = theirs[0] == mine[0] and mine[1]
            if upward or across:
                offenders.append(f"{path.relative_to(REPO)}:{lineno}: {module} -> {theirs[2]}")
    return sorted(set(offenders))


def test_dependencies_only_point_down():
    assert upward_imports() == []


# What the pure decisions never touch: they return data, and their callers log and count.
PURE_FORBIDDEN = ("logging", "prometheus_client", "wm.telemetry")


def test_the_pure_decisions_neither_log_nor_keep_metrics():
    (pure,) = [layer for layer in LAYERS if layer.name == "pure"]
    offenders = []
    for path in python_files("wm"):
        module = _module_name(path)
        unit = _unit(module)
        if unit is None or unit[2] not in pure.units:
            continue
        imported = _imports(path.read_text(), module, path.name == "__init__.py")
        offenders += [
            f"{path.relative_to(REPO)}:{lineno}: imports {name}"
            for lineno, name in imported
            if any(within(forbidden, name) for forbidden in PURE_FORBIDDEN)
        ]
    assert offenders == []


def test_the_layer_check_sees_lazy_imports_and_keeps_peers_apart():
    source = "def build():\n    from wm.budget import SharedBudget\n    return SharedBudget\n"
    imported = [name for _, name in _imports(source, "wm.providers")]
    assert "wm.budget" in imported
    providers, budget = _unit("wm.providers.aws"), _unit("wm.budget")
    assert providers and budget and providers[0] == budget[0] and budget[1]


ROUTE_DECORATORS = {"get", "post", "put", "delete", "patch", "head", "options", "api_route"}
ASSEMBLY_MAX_LINES = 150


def _route_decorated(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(d, ast.Call)
        and isinstance(d.func, ast.Attribute)
        and d.func.attr in ROUTE_DECORATORS
        for d in function.decorator_list
    )


def test_the_api_app_is_assembly_and_its_routes_live_in_routers():
    # create_app builds the context, the error answers and includes the routers; a route
    # declared in it (or in any function) would grow it back into one long closure.
    app = REPO / "wm/api/app.py"
    tree = ast.parse(app.read_text())
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    (create_app,) = [f for f in functions if f.name == "create_app"]
    length = (create_app.end_lineno or create_app.lineno) - create_app.lineno + 1
    assert length < ASSEMBLY_MAX_LINES, f"create_app is {length} lines"
    offenders = [f"{app.relative_to(REPO)}: {f.name}" for f in functions if _route_decorated(f)]
    for path in python_files("wm/api"):
        for outer in ast.walk(ast.parse(path.read_text())):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            offenders += [
                f"{path.relative_to(REPO)}:{inner.lineno}: {inner.name} inside {outer.name}"
                for inner in ast.walk(outer)
                if inner is not outer
                and isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
                and _route_decorated(inner)
            ]
    assert offenders == []
