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
        (
            "wm",
            "wm.model",
            "wm.errors",
            "wm.config",
            "wm.config_base",
            "wm.calls",
            "wm.provider_ids",
            # What each provider kind is (pure descriptions, one table) and the schema checker
            # their launch config schemas are written for.
            "wm.kinds",
            "wm.json_check",
        ),
    ),
    Layer(
        "pure",
        False,
        (
            "wm.estimator",
            "wm.scan_diff",
            "wm.worker_transitions",  # every change of a worker row, one table
            "wm.intent_sightings",
            "wm.pass_news",  # a pass told of demand that came while its creates are out
            "wm.launch_choice",
            "wm.lifecycle",
            "wm.stages",
            "wm.pool_definition",
            "wm.pool_apply",
            "wm.legacy_pools",
            "wm.identity",
            "wm.registration_policy",  # registerWorker's refusals and expected identity
            "wm.static_workers",  # createWorker and updateWorker of workers no cloud launches
            "wm.take_over",  # what `wm import` names and marks: imported workers' keys
            "wm.metrics_ports",  # each process type's default metrics port
            "wm.import_plan",  # `wm import`: legacy pools and workers -> what wm writes
            "wm.take_over_routes",  # which side answers each request during a take-over
            # Worker pool definitions: the schemas as data, definition files.
            "wm.pool_schemas",
            "wm.pool_files",
            "wm.pool_definition",
            "wm.tc",  # Taskcluster's scopes, credentials, Hawk and errors: pure, no I/O
            "wm.repeats",  # how often one failure is reported to Sentry
        ),
    ),
    # Above the pure decisions, which return data and leave the logging to their callers.
    Layer("telemetry", False, ("wm.telemetry",)),
    Layer("storage", False, ("wm.db",)),
    # Sentry events: their tags and fingerprints know cloud and database errors.
    Layer("error reports", False, ("wm.error_reports", "wm.sentry")),
    # What the API and the CLI both do: applying pool definitions, one transaction.
    Layer("use cases", False, ("wm.pool_changes", "wm.legacy_import")),
    Layer("adapters", True, ("wm.providers", "wm.queues", "wm.budget", "wm.legacy_api")),
    # What a pass is made of beside its steps: its creates while they are out.
    Layer("pass parts", False, ("wm.creates_in_flight",)),
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


# -- import cycles ---------------------------------------------------------------------------


def import_graph(*roots: str) -> dict[str, set[str]]:
    """Module -> the modules of `roots` it imports: at the top, inside functions (lazy) and
    under TYPE_CHECKING alike. `from a import b` is an import of the module a.b when there is
    one, else of a; the parent packages Python loads on the way are not counted as edges (every
    submodule would otherwise import its package's __init__)."""
    paths = {_module_name(path): path for path in python_files(*roots)}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    targets.add(child if child in paths else base)
        graph[module] = {t for t in targets if t in paths and t != module}
    return graph


def import_cycles(*roots: str) -> list[list[str]]:
    """Every cycle of imports among the modules of `roots` (Tarjan's strongly connected
    components of more than one module), each sorted, for a message that names them all."""
    graph = import_graph(*roots)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_import_cycles_in_wm_or_procs():
    assert import_cycles("wm", "procs") == []


def test_the_cycle_check_sees_lazy_imports_and_cycles_inside_a_package(tmp_path, monkeypatch):
    # A package whose two modules import each other, one of them only inside a function, as
    # wm/providers/azure.py and azure_arm.py did, and a third module that only one imports.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import make\n")
    (package / "a.py").write_text("from pkg import b\n\ndef make():\n    return b\n")
    (package / "b.py").write_text("def use():\n    from pkg.a import make\n    return make\n")
    (package / "c.py").write_text("from pkg.a import make\n")
    monkeypatch.setitem(globals(), "REPO", tmp_path)  # python_files reads it

    assert import_cycles("pkg") == [["pkg.a", "pkg.b"]]


# -- provider kinds live in their descriptions ----------------------------------------------

# Where a kind may be named: its description (wm/kinds/) and its package (wm/providers/<kind>/).
# Everywhere else reads wm.kinds.KINDS, so that adding a kind touches its description, its
# package, its simulator and the table, and a forgotten branch cannot fall back to a default.
KIND_HOMES = ("wm/kinds/",)
# Modules that may still name kinds, each with why.
KIND_LITERALS_ALLOWED = {
    # The old `[[pools]]` format knew exactly aws, gcp and azure: a new kind has no old form.
    "wm/legacy_pools.py",
}


def _kind_literal(node: ast.AST | None, kinds: frozenset[str]) -> bool:
    return isinstance(node, ast.Constant) and node.value in kinds


def _names_kinds(node: ast.AST, kinds: frozenset[str]) -> bool:
    """A kind literal, or a tuple, list or set holding one (`kind in ("aws", "gcp")`)."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_kind_literal(e, kinds) for e in node.elts)
    return _kind_literal(node, kinds)


def _kind_use(node: ast.AST, kinds: frozenset[str]) -> str | None:
    if isinstance(node, ast.Compare):
        sides = (node.left, *node.comparators)
        return "compares with a kind" if any(_names_kinds(s, kinds) for s in sides) else None
    if isinstance(node, ast.MatchValue):
        return "matches a kind" if _kind_literal(node.value, kinds) else None
    if isinstance(node, ast.Dict):
        named = sum(_kind_literal(key, kinds) for key in node.keys)
        return "a table keyed by kinds" if named >= 2 else None
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        named = sum(_kind_literal(element, kinds) for element in node.elts)
        return "a list of kinds" if named >= 2 else None
    return None


def kind_literal_uses(source: str, kinds: frozenset[str]) -> list[tuple[int, str]]:
    """Comparisons with a kind literal, `case "aws":` patterns, dict literals keyed by two kinds
    or more (a kind table) and tuples, lists or sets of two kinds or more (a list of kinds),
    each with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = _kind_use(node, kinds)
        if what:
            found.append((node.lineno, what))
    return sorted(found)


def test_only_the_kind_descriptions_and_packages_name_kinds():
    from wm.kinds import KINDS

    kinds = frozenset(KINDS)
    homes = (*KIND_HOMES, *(f"wm/providers/{kind}/" for kind in KINDS))
    offenders = []
    for path in python_files("wm", "procs"):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(homes) or relative in KIND_LITERALS_ALLOWED:
            continue
        offenders += [
            f"{relative}:{line}: {what}"
            for line, what in kind_literal_uses(path.read_text(), kinds)
        ]
    assert offenders == []


def test_the_kind_check_sees_every_form_a_kind_branch_takes():
    source = """
if kind == "aws": pass
if "gcp" != provider.kind: pass
if kind in ("azure", NULL_PROVIDER): pass
match kind:
    case "azure": pass
TABLE = {"aws": 1, "gcp": 2}
KINDS = ("aws", "gcp", "azure")
NOISY = ("azure", "botocore")  # a logger's name, not a kind branch
ONE = {"aws": 1}  # one entry is no kind table
"""
    found = kind_literal_uses(source, frozenset({"aws", "gcp", "azure"}))

    assert [line for line, _ in found] == [2, 3, 4, 6, 7, 8]


# -- wmsim: no import cycles; a cloud's kind named only by its subpackage and the one table ----

WMSIM_CLOUD_PLACES = ("wmsim/aws/", "wmsim/gcp/", "wmsim/azure/", "wmsim/clouds.py")


def test_wmsim_has_no_import_cycles():
    assert import_cycles("wmsim") == []


def test_wmsim_branches_on_a_cloud_kind_only_in_its_subpackage_and_the_table():
    from wmsim.clouds import CLOUDS

    kinds = frozenset(CLOUDS)
    offenders = []
    for path in python_files("wmsim"):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(WMSIM_CLOUD_PLACES):
            continue
        offenders += [
            f"{relative}:{line}: {what}"
            for line, what in kind_literal_uses(path.read_text(), kinds)
        ]
    assert offenders == []


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
