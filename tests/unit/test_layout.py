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


# The one writer of worker rows (wm/worker_transitions.py has the transitions it makes).
WORKER_WRITER = "wm/db/worker_writes.py"
WORKER_WRITES_SQL = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+workers\b", re.I)
WORKER_STATE_NAMES = {"requested", "running", "stopping", "stopped"}


def worker_writes_in(source: str) -> list[int]:
    """Lines that write `workers`: insert/update/delete(workers), workers.insert() and the
    like, or SQL in a string."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func, args = node.func, node.args
            named = isinstance(func, ast.Name) and func.id in {"insert", "update", "delete"}
            if named and args and isinstance(args[0], ast.Name) and args[0].id == "workers":
                lines.append(node.lineno)
            method = isinstance(func, ast.Attribute) and func.attr in {"insert", "update", "delete"}
            if method and isinstance(func.value, ast.Name) and func.value.id == "workers":
                lines.append(node.lineno)
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_text and WORKER_WRITES_SQL.search(node.value):
            lines.append(node.lineno)
    return lines


def test_one_module_writes_worker_rows():
    offenders = []
    for path in python_files("wm", "procs"):
        if path.as_posix().endswith(WORKER_WRITER) or "migrations" in path.parts:
            continue
        offenders += [f"{path.relative_to(REPO)}:{n}" for n in worker_writes_in(path.read_text())]
    assert offenders == []


def state_literals_in(source: str) -> list[int]:
    """Lines where a worker state's name is written as a string and used as a state: compared,
    passed as `state=`, stored under "state", looked up with .get(), listed for .in_(), or
    iterated over. (An approximation: labels and messages are left alone.)"""

    def names(node: ast.AST) -> list[int]:
        found = []
        elements = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        for e in elements:
            if isinstance(e, ast.Constant) and e.value in WORKER_STATE_NAMES:
                found.append(e.lineno)
        return found

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                lines += names(operand)
        elif isinstance(node, ast.keyword) and node.arg == "state":
            lines += names(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "state":
                    lines += names(value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"in_", "get", "notin_"} and node.args:
                lines += names(node.args[0])
        elif isinstance(node, ast.For | ast.comprehension):
            lines += names(node.iter)
    return lines


def test_worker_states_in_the_db_layer_are_the_enum():
    offenders = []
    for path in python_files("wm/db"):
        if "migrations" in path.parts:  # history: written as it was
            continue
        offenders += [f"{path.relative_to(REPO)}:{n}" for n in state_literals_in(path.read_text())]
    assert offenders == []


def test_the_worker_rules_see_what_they_forbid():
    writes = (
        "update(workers).values(x=1)\n"
        "delete(workers)\n"
        "workers.insert()\n"
        "text('UPDATE workers SET state = 1')\n"
        "update(tasks)\n"
    )
    assert sorted(worker_writes_in(writes)) == [1, 2, 3, 4]
    states = (
        "workers.c.state == 'stopped'\n"
        "update(t).values(state='running')\n"
        "{'state': 'requested'}\n"
        "workers.c.state.in_(('requested', 'running'))\n"
        "totals.get('stopping', 0)\n"
        "for s in ('requested', 'stopping'): pass\n"
        "label('running')\n"
    )
    assert sorted(set(state_literals_in(states))) == [1, 2, 3, 4, 5, 6]


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
            "wm.worker_transitions",  # every change of a worker row, one table
            "wm.intent_sightings",
            "wm.launch_choice",
            "wm.lifecycle",
            "wm.stages",
            "wm.pool_definition",
            "wm.pool_apply",
            "wm.legacy_pools",
            "wm.identity",
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


# -- wmsim: no import cycles; a cloud's kind named only by its subpackage and the one table ----
# (Self-contained: wm's own cycle check is written beside it; the two may share helpers later.)

WMSIM_CLOUD_PLACES = ("wmsim/aws/", "wmsim/gcp/", "wmsim/azure/", "wmsim/clouds.py")


def _wmsim_modules() -> dict[str, tuple[str, bool]]:
    """wmsim's modules by dotted name -> (source, is it a package's __init__)."""
    modules = {}
    for path in (REPO / "wmsim").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path.read_text(), is_package)
    return modules


def _import_graph(modules: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Each module -> the modules of `modules` it imports: at the top, inside functions and
    under TYPE_CHECKING alike. `from pkg import mod` is an edge to pkg.mod (not to pkg), as
    `import pkg.mod` is."""
    graph: dict[str, set[str]] = {}
    for name, (source, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    targets.append(child if child in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_cycle_check_sees_a_cycle_closed_by_a_lazy_import():
    modules = {
        "sim": ("", True),
        "sim.arm": ("def start():\n    from sim.deployments import Deployments\n", False),
        "sim.deployments": ("from sim import resources\nfrom sim.arm import SimArm\n", False),
        "sim.resources": ("", False),
        "sim.cli": ("from .arm import start\n", False),
    }
    assert _cycles(_import_graph(modules)) == [["sim.arm", "sim.deployments"]]
    modules["sim.deployments"] = ("from sim import resources\n", False)
    assert _cycles(_import_graph(modules)) == []


def test_wmsim_has_no_import_cycles():
    assert _cycles(_import_graph(_wmsim_modules())) == []


def _kind_branches(source: str, kinds: frozenset[str]) -> list[int]:
    """Lines comparing something with a cloud kind's name (`kind == "azure"`, `kind in
    ("aws", "gcp")`, `case "gcp":`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            named = {
                leaf.value
                for operand in (node.left, *node.comparators)
                for leaf in ast.walk(operand)
                if isinstance(leaf, ast.Constant)
            }
            if named & kinds:
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.MatchValue)
            and isinstance(node.value, ast.Constant)
            and node.value.value in kinds
        ):
            lines.append(node.lineno)
    return lines


def test_wmsim_branches_on_a_cloud_kind_only_in_its_subpackage_and_the_table():
    from wmsim.clouds import CLOUDS

    kinds = frozenset(CLOUDS)
    assert _kind_branches('if kind == "gcp" or kind in ("aws",):\n    pass\n', kinds) == [1, 1]
    assert _kind_branches('match kind:\n    case "azure":\n        pass\n', kinds) == [2]
    offenders = []
    for path in python_files("wmsim"):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(WMSIM_CLOUD_PLACES):
            continue
        offenders += [f"{relative}:{n}" for n in _kind_branches(path.read_text(), kinds)]
    assert offenders == []
