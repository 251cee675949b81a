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


# The writers of worker rows, one per job (wm/workers/transitions.py has the transitions they
# make): the provisioner's, the API's and hand-made workers'; the scanner's; the take-over's.
WORKER_WRITERS = ("wm/db/worker_writes.py", "wm/db/scan_writes.py", "wm/db/imported_workers.py")
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


def test_only_the_writers_write_worker_rows():
    offenders = []
    for path in python_files("wm", "procs"):
        if path.as_posix().endswith(WORKER_WRITERS) or "migrations" in path.parts:
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
        if path.as_posix().endswith(("wm/config/loader.py", "wmsim/config.py")):
            continue
        if re.search(r"os\.environ|os\.getenv", path.read_text()):
            offenders.append(str(path))
    assert offenders == []


# wm's layers, lowest first: a module imports only from its own layer or the layers below.
# Each entry is a unit: a module or a package (the longest matching name wins), or a tuple of
# names that are one unit together. Units of a layer marked `peers_apart` import nothing from
# each other: the cloud providers do not reach into the shared budget, nor the queues into the
# providers. A room (ROOMS) spans layers: each of its modules is placed by its own name, and
# the room's package, a docstring that imports nothing, sits at the bottom. wmsim is not part
# of wm.
class Layer(NamedTuple):
    name: str
    peers_apart: bool
    units: tuple[str | tuple[str, ...], ...]


# wm/'s top level, which is its architecture: a folder per job, and the few modules every room
# uses at the bottom.
ROOMS = ("wm.pools", "wm.provisioning", "wm.scanning", "wm.workers", "wm.take_over", "wm.ops")
PACKAGES = (*ROOMS, "wm.config", "wm.api", "wm.cli", "wm.db", "wm.tc", "wm.queues", "wm.kinds")
TOP_LEVEL = (*PACKAGES, "wm.providers", "wm.model", "wm.errors", "wm.calls", "wm.__main__")

LAYERS = (
    Layer(
        "model",
        False,
        (
            "wm",
            *ROOMS,
            "wm.model",
            "wm.errors",
            "wm.config",  # the loader, the base the kinds share, provider ids
            "wm.calls",
            "wm.ops.signal_event",  # the stop flag a signal handler may set
            # What each provider kind is (pure descriptions, one table) and the schema checker
            # their launch config schemas are written for.
            "wm.kinds",
            "wm.pools.json_check",
        ),
    ),
    Layer(
        "pure",
        False,
        (
            "wm.provisioning.estimator",
            "wm.scanning.scan_diff",
            "wm.scanning.listing",  # what a scan keeps of its listing, page by page
            "wm.scanning.report",
            "wm.workers.transitions",  # every change of a worker row, one table
            "wm.provisioning.intent_sightings",
            "wm.provisioning.pass_news",  # demand that came while a pass's creates are out
            "wm.provisioning.launch_choice",
            "wm.provisioning.offering_bench",  # an offering benched after a capacity refusal
            "wm.provisioning.cost_choice",  # launch configs scored by cost and availability
            "wm.workers.lifecycle",
            "wm.workers.stages",
            "wm.pools.apply_plan",
            "wm.pools.config_tables",
            "wm.workers.identity",
            "wm.workers.registration_policy",  # registerWorker's refusals and expected identity
            "wm.workers.static_workers",  # createWorker and updateWorker of hand-made workers
            "wm.take_over.marks",  # what `wm import` names and marks: imported workers' keys
            "wm.take_over.registration",  # what an imported worker may that no other may
            "wm.ops.metrics_ports",  # each process type's default metrics port
            "wm.take_over.import_plan",  # `wm import`: legacy pools and workers -> what wm writes
            "wm.take_over.routes",  # which side answers each request during a take-over
            # Every API endpoint as Taskcluster declares it, one table, and what it is made of.
            "wm.api.endpoint_table",
            "wm.api.queries",
            "wm.api.request_schemas",
            # Worker pool definitions: the schemas as data, definition files.
            "wm.pools.schemas",
            "wm.pools.files",
            "wm.pools.definition",
            "wm.tc",  # Taskcluster's scopes, credentials, Hawk and errors: pure, no I/O
            "wm.ops.repeats",  # how often one failure is reported to Sentry
        ),
    ),
    # Above the pure decisions, which return data and leave the logging to their callers.
    Layer("telemetry", False, ("wm.ops.telemetry",)),
    Layer("storage", False, ("wm.db",)),
    # Sentry events: their tags and fingerprints know cloud and database errors.
    Layer("error reports", False, ("wm.ops.error_reports", "wm.ops.sentry")),
    # What the API and the CLI both do: applying pool definitions, one transaction.
    Layer(
        "use cases",
        False,
        ("wm.pools.changes", "wm.take_over.importer", "wm.take_over.imported_reregistration"),
    ),
    Layer(
        "adapters",
        True,
        (
            # A provider and the take-over's adopter of the legacy's VMs it holds (None unless
            # adopt_legacy): one unit, though the adopters live in the take-over's room.
            ("wm.providers", "wm.take_over.adoption"),
            "wm.queues",
            "wm.providers.budget",
            "wm.take_over.legacy_client",
        ),
    ),
    # What a pass is made of beside its steps: its creates while they are out, what they
    # came to, the pool errors a scan files.
    Layer(
        "pass parts",
        False,
        (
            "wm.provisioning.creates_in_flight",
            "wm.provisioning.launch_outcomes",
            "wm.provisioning.cost_planning",  # the cost choice's reads and bench writes in a pass
            "wm.provisioning.pool_plan",  # a pass's planning of its pools, and its rounds
            "wm.provisioning.cost_pass",  # the cost choice as a pass runs it
            "wm.scanning.scan_errors",
            "wm.scanning.launch_failures",  # launches a cloud failed after taking them
            "wm.take_over.adoption_report",  # the take-over's word at each scan, and its end
        ),
    ),
    Layer(
        "passes",
        True,
        (
            "wm.provisioning.provisioner",
            "wm.scanning.scanner",
            "wm.scanning.signals_job",  # the launch choice's signal reads, a job per provider
            # The web process: the API, and during a take-over its forwarding to the legacy
            # worker-manager and the lists merged from both sides.
            (
                "wm.api",
                "wm.take_over.forwarding",
                "wm.take_over.legacy_forwarder",
                "wm.take_over.merged",
            ),
        ),
    ),
    Layer("top", False, ("procs", "wm.cli", "wm.take_over.cli", "wm.__main__")),
)


def _unit(module: str) -> tuple[int, bool, str] | None:
    """The module's layer, whether its peers stay apart, and its unit (by its first name)."""
    best = None
    for rank, layer in enumerate(LAYERS):
        for unit in layer.units:
            names = unit if isinstance(unit, tuple) else (unit,)
            for name in names:
                # "wm" and a room are their package alone, not all of wm or of the room.
                inside = module.startswith(name + ".") and name not in ("wm", *ROOMS)
                if (module == name or inside) and (best is None or len(name) > best[3]):
                    best = (rank, layer.peers_apart, names[0], len(name))
    return best[:3] if best else None


def test_wm_top_level_is_its_rooms_and_the_bottom_modules():
    # The folder listing is the architecture: a job's every file is in its room, and a module
    # at the top is one every room uses. A new one belongs in a room (or in TOP_LEVEL, said why).
    found = []
    for entry in (REPO / "wm").iterdir():
        if entry.name == "__pycache__" or entry.name == "__init__.py":
            continue
        package = entry.is_dir() and (entry / "__init__.py").is_file()
        found.append(f"wm.{entry.stem}" if package or entry.suffix == ".py" else entry.name)
    assert sorted(found) == sorted(TOP_LEVEL)


def test_every_package_says_what_it_is_for():
    undocumented = [
        name
        for name in (*PACKAGES, "wm.providers")
        if not ast.get_docstring(
            ast.parse((REPO / name.replace(".", "/") / "__init__.py").read_text())
        )
    ]
    assert undocumented == []


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
            # `from wm.scanning import scan_diff` imports the module wm.scanning.scan_diff.
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
PURE_FORBIDDEN = ("logging", "prometheus_client", "wm.ops.telemetry")


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
    source = (
        "def build():\n    from wm.providers.budget import SharedBudget\n    return SharedBudget\n"
    )
    imported = [name for _, name in _imports(source, "wm.providers")]
    assert "wm.providers.budget" in imported
    providers, budget = _unit("wm.providers.aws"), _unit("wm.providers.budget")
    assert providers and budget and providers[0] == budget[0] and budget[1]


def test_a_room_spans_layers_and_a_unit_may_span_rooms():
    # A room's package is a docstring at the bottom, not a catch-all for its modules; the web
    # process's take-over parts are one unit with the API, though they live in another room.
    assert _unit("wm.pools") == (0, False, "wm.pools")
    changes, definition = _unit("wm.pools.changes"), _unit("wm.pools.definition")
    assert changes and definition and changes[0] > definition[0]
    assert _unit("wm.pools.unlisted") is None
    assert _unit("wm.take_over.forwarding") == _unit("wm.api.app") == _unit("wm.api")


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
    "wm/pools/config_tables.py",
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


ROUTE_DECORATORS = {
    "get",
    "post",
    "put",
    "delete",
    "patch",
    "head",
    "options",
    "api_route",
    "declare",
}
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
