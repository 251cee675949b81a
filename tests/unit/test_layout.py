"""Rules of the code's shape that a reviewer would otherwise have to remember."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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
        if path.as_posix().endswith(("wm/config.py", "wm/db/server.py", "wmsim/config.py")):
            continue
        if re.search(r"os\.environ|os\.getenv", path.read_text()):
            offenders.append(str(path))
    assert offenders == []
