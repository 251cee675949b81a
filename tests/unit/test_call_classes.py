"""Every call a provider makes draws from a bucket its cloud publishes: a misspelt class
would silently take calls out of the shared budget."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import wm.providers
from wm.calls import CallClass, Draw
from wm.kinds import KINDS
from wm.providers.aws import provider as aws

# kind -> its provider's table of operations and the call classes each draws from
TABLES = {
    kind: importlib.import_module(f"wm.providers.{kind}.provider").CALL_CLASSES
    for kind, description in KINDS.items()
    if description.scanned  # a kind no scanner lists calls no cloud
}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_operation_draws_from_classes_its_cloud_publishes(kind: str):
    for operation, classes in TABLES[kind].items():
        assert classes, f"{kind} {operation} draws from no bucket"
        for call_class in classes:
            assert type(call_class) is CallClass, f"{kind} {operation}: {call_class!r}"
            assert call_class in KINDS[kind].published_budgets, f"{kind} {operation}: {call_class}"


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_published_budget_is_a_class_some_operation_draws_from(kind: str):
    published = KINDS[kind].published_budgets
    assert all(type(c) is CallClass for c in published)
    drawn = {c for classes in TABLES[kind].values() for c in classes}
    assert set(published) == drawn


def test_a_misspelt_class_is_refused_where_it_is_written():
    assert Draw("us-east-1", "describe").call_class is CallClass.DESCRIBE
    with pytest.raises(ValueError):
        Draw("us-east-1", "desribe")


def test_ec2_calls_draw_in_their_region_and_resource_buckets_count_instances():
    assert aws._spend("eu-west-1", "RunInstances", instances=30) == (
        Draw("eu-west-1", CallClass.RUN_INSTANCES_CALLS),
        Draw("eu-west-1", CallClass.RUN_INSTANCES, 30),
    )
    assert aws._spend("eu-west-1", "TerminateInstances", instances=7) == (
        Draw("eu-west-1", CallClass.TERMINATE_INSTANCES_CALLS),
        Draw("eu-west-1", CallClass.TERMINATE_INSTANCES, 7),
    )
    assert aws._spend("eu-west-1", "DescribeInstances") == (Draw("eu-west-1", CallClass.DESCRIBE),)


# -- every operation a provider sends through its gate is in its table ------------------------

PROVIDERS_DIR = Path(wm.providers.__file__).parent


def _kind_of(path: Path) -> str | None:
    """The cloud a provider module belongs to: aws/provider.py, aws/identity.py... -> "aws"."""
    package = path.relative_to(PROVIDERS_DIR).parts[0]
    return package if package in TABLES else None


def _is_gate_call(node: ast.AST) -> bool:
    """`<...>.gate.call(...)` or `gate.call(...)`: the only way a provider calls its cloud."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    owner = node.func.value
    named_gate = (isinstance(owner, ast.Attribute) and owner.attr == "gate") or (
        isinstance(owner, ast.Name) and owner.id == "gate"
    )
    return node.func.attr == "call" and named_gate


def _argument(call: ast.Call, index: int, name: str) -> ast.expr | None:
    if index < len(call.args):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == name), None)


Scope = tuple[ast.FunctionDef, ...]  # the functions a call sits in, innermost first


def _calls_in_scope(tree: ast.AST, scope: Scope = ()) -> list[tuple[ast.Call, Scope]]:
    found = []
    for child in ast.iter_child_nodes(tree):
        inner = (child, *scope) if isinstance(child, ast.FunctionDef) else scope
        if isinstance(child, ast.Call):
            found.append((child, scope))
        found += _calls_in_scope(child, inner)
    return found


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _picked_from_a_table(name: str, function: ast.FunctionDef) -> list[str] | None:
    """The literals a local could be, when it is set from a literal table: `{...}[kind]`."""
    values = [
        value
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == [name]
        and isinstance(node.value, ast.Subscript)
        and isinstance(node.value.value, ast.Dict)
        for value in node.value.value.values
    ]
    if values and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values):
        return [v.value for v in values]  # type: ignore[union-attr]
    return None


class _Operations:
    """The operation names of one cloud's modules, as found at their gate calls: a literal;
    a parameter of a wrapper (`all_pages(operation, ...)`, `_call(operation, ...)`), then what
    its callers pass; or a local picked from a literal table (`{...}[kind]`)."""

    def __init__(self, trees: dict[Path, ast.Module]) -> None:
        self.found: set[str] = set()
        self.unresolved: list[str] = []
        self._calls = [(path, *c) for path, tree in trees.items() for c in _calls_in_scope(tree)]
        self._wrappers: dict[str, tuple[int, str]] = {}  # function -> its operation parameter

    def scan(self) -> None:
        for path, call, scope in self._calls:
            if _is_gate_call(call):
                self._resolve(path, call, _argument(call, 0, "operation"), scope)
        done: set[int] = set()
        while pending := [
            (path, call, scope)
            for path, call, scope in self._calls
            if _callee(call) in self._wrappers and id(call) not in done
        ]:
            for path, call, scope in pending:
                done.add(id(call))
                index, name = self._wrappers[str(_callee(call))]
                self._resolve(path, call, _argument(call, index, name), scope)

    def _resolve(self, path: Path, call: ast.Call, arg: ast.expr | None, scope: Scope) -> None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            self.found.add(arg.value)
            return
        for function in scope if isinstance(arg, ast.Name) else ():
            assert isinstance(arg, ast.Name)
            params = [a.arg for a in function.args.args if a.arg != "self"]
            if arg.id in params:
                self._wrappers[function.name] = (params.index(arg.id), arg.id)
                return
            picked = _picked_from_a_table(arg.id, function)
            if picked is not None:
                self.found.update(picked)
                return
        where = f"{path.name}:{call.lineno}"
        self.unresolved.append(f"{where}: {ast.unparse(arg) if arg else 'no operation'}")


def operations_called() -> dict[str, _Operations]:
    by_kind: dict[str, dict[Path, ast.Module]] = {kind: {} for kind in TABLES}
    strays = []
    for path in sorted(PROVIDERS_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text())
        calls_a_gate = any(_is_gate_call(node) for node in ast.walk(tree))
        kind = _kind_of(path)
        if kind is not None:
            by_kind[kind][path] = tree
        elif calls_a_gate:
            strays.append(path.name)
    assert strays == [], "a module outside a kind's package wm/providers/<kind>/ calls a gate"
    found = {kind: _Operations(trees) for kind, trees in by_kind.items()}
    for operations in found.values():
        operations.scan()
    return found


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_operation_a_provider_sends_through_its_gate_is_in_its_table(kind: str):
    operations = operations_called()[kind]

    assert operations.unresolved == [], "an operation name the scan cannot read: make it one"
    assert operations.found, "the scan found no gate call at all"
    assert sorted(operations.found - set(TABLES[kind])) == []


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_operation_in_a_table_is_one_its_provider_calls(kind: str):
    # A renamed call leaves its old entry behind, and the new name unclassed.
    assert sorted(set(TABLES[kind]) - operations_called()[kind].found) == []


def test_the_scan_reads_every_way_the_providers_name_an_operation():
    found = {kind: ops.found for kind, ops in operations_called().items()}
    assert "RunInstances" in found["aws"]  # a literal
    assert "instances.list" in found["gcp"]  # through the `_call` wrapper
    assert {"ResourceGroups_List", "VirtualMachines_List"} <= found["azure"]  # `all_pages`
    assert "PublicIPAddresses_Delete" in found["azure"]  # picked from a literal table
