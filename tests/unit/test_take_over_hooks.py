"""Every place outside wm/take_over/ where the core reaches the take-over of a live Taskcluster
worker-manager: the recipe for removing it, kept true by scanning the source.

A deployment that has moved (`wm status` says no imported worker remains, README: "Moving a
deployment onto wm") removes the take-over by deleting wm/take_over/ and TAKE_OVER_FILES, then
each hook below: an import of the take-over, a call or field of its interface (a provider's
`adoption`, the scanner's `adoption_report`), or a field or name that exists only for it. The
test fails when a hook is added or removed without this list changing with it; its message is
the new list, ready to paste.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TAKE_OVER = "wm/take_over/"
# Modules of the take-over's own that live elsewhere: SQL lives in wm/db (test_layout.py).
TAKE_OVER_FILES = ("wm/db/imported_workers.py",)
TAKE_OVER_MODULES = ("wm.take_over", "wm.db.imported_workers")
# Fields and attributes that exist only for the take-over: a provider's adopter and config
# switch, the scanner's report, what a listing marks as the legacy's and what no import took.
FIELDS = frozenset({"adoption", "adoption_report", "adopt_legacy", "legacy", "unadopted"})
NAMES = ("ADOPT_", "ADOPTIONS")  # the transitions that write imported rows

# file -> "scope: hook", scope being the function or class (or <module>) to edit.
HOOKS: dict[str, tuple[str, ...]] = {
    # -- adoption: a provider holds an adopter (None unless adopt_legacy) and hands it what is
    # the legacy's; delete the `adoption` attribute and each branch on it.
    "wm/providers/__init__.py": (
        "build_provider: .adopt_legacy",
        "build_provider: .adoption",
        "build_provider: adopter",
        "build_provider: import wm.take_over.adoption.adopter",
    ),
    "wm/providers/aws/provider.py": (
        "<module>: import wm.take_over.adoption.aws.AwsAdoption",
        "<module>: import wm.take_over.marks.split_imported",
        "AwsProvider.__init__: .adoption",
        "AwsProvider.__init__: AwsAdoption",
        "AwsProvider._instance_of: .adoption",
        "AwsProvider._locate: .adoption",
        "AwsProvider._locate: split_imported",
        "AwsProvider.list_pages: .adoption",
    ),
    "wm/providers/gcp/provider.py": (
        "<module>: import wm.take_over.adoption.gcp.GcpAdoption",
        "<module>: import wm.take_over.marks.imported_from",
        "GcpProvider.__init__: .adoption",
        "GcpProvider.__init__: GcpAdoption",
        "GcpProvider._delete: .adoption",
        "GcpProvider._delete: field adoption",
        "GcpProvider._delete: imported_from",
        "GcpProvider._lookup_one: .adoption",
        "GcpProvider._lookup_one: imported_from",
        "GcpProvider.list_pages: .adoption",
    ),
    "wm/providers/azure/provider.py": (
        "<module>: import wm.take_over.adoption.azure.AzureAdoption",
        "<module>: import wm.take_over.marks.imported_from",
        "AzureProvider.__init__: .adoption",
        "AzureProvider.__init__: AzureAdoption",
        "AzureProvider._any_instance: .adoption",
        "AzureProvider._lookup_one: .adoption",
        "AzureProvider._lookup_one: imported_from",
        "AzureProvider._terminate_one: .adoption",
        "AzureProvider._terminate_one: imported_from",
        "AzureProvider._vm_name: .adoption",
        "AzureProvider._vm_name: imported_from",
        "AzureProvider.group_pages: .adoption",
        "AzureProvider.list_pages: .adoption",
        "AzureProvider.list_pages: .legacy",
        "AzureProvider.list_pages: field legacy",
        "AzureProvider.may_delete: .adoption",
    ),
    "wm/config/base.py": ("ProviderConfigBase: field adopt_legacy",),
    # -- the scan: a legacy VM is marked `legacy`; with no row it is `unadopted`, reported by
    # the take-over's report, which also counts the imported workers left.
    "wm/model.py": ("CloudInstance: field legacy",),
    "wm/scanning/scan_diff.py": (
        "ScanDiff: field unadopted",
        "Sightings: field unadopted",
        "diff: .unadopted",
        "diff: unadopted=",
        "sight: .legacy",
        "sight: field unadopted",
        "sight: unadopted=",
    ),
    "wm/scanning/listing.py": (
        "Listing: field unadopted",
        "Listing.add: .unadopted",
        "Listing.hand_over: .unadopted",
        "Listing.hand_over: unadopted=",
    ),
    "wm/scanning/report.py": ("ScanReport: field unadopted",),
    "wm/scanning/scanner.py": (
        "<module>: import wm.take_over.adoption_report.AdoptionReport",
        "ScanPass._scan: .adoption_report",
        "ScanPass._scan: .unadopted",
        "ScanPass._scan: unadopted=",
        "Scanner: AdoptionReport",
        "Scanner: field adoption_report",
    ),
    "wm/cli/status.py": (
        "<module>: import wm.take_over.adoption_report.status_line",
        "status: take_over_status",
    ),
    # -- imported rows: written by `wm import` through these transitions, registered on the
    # cloud id worker-manager named them by, reregistered once on their own credentials, and
    # recognised by the clouds' identity checks.
    "wm/workers/transitions.py": (
        "<module>: ADOPT_REQUESTED",
        "<module>: ADOPT_RUNNING",
        "<module>: ADOPT_STOPPING",
        "<module>: defines ADOPTIONS",
        "<module>: defines ADOPT_REQUESTED",
        "<module>: defines ADOPT_RUNNING",
        "<module>: defines ADOPT_STOPPING",
    ),
    "wm/workers/registration_policy.py": (
        "<module>: import wm.take_over.registration.unadopted_cloud_id",
        "decide: unadopted_cloud_id",
    ),
    "wm/api/routers/workers.py": (
        "<module>: import wm.take_over.imported_reregistration.reregister_imported",
        "reregister: reregister_imported",
    ),
    "wm/providers/aws/identity.py": (
        "<module>: import wm.take_over.marks.imported_from",
        "check_claims: imported_from",
    ),
    "wm/providers/gcp/identity.py": (
        "<module>: import wm.take_over.marks.imported_from",
        "check_claims: imported_from",
    ),
    # -- `wm import`, the command.
    "wm/cli/main.py": (
        "<module>: import wm.take_over.cli.import_command",
        "<module>: import_command",
    ),
    # -- forwarding: the web process answers for the legacy what is not wm's, and merges the
    # lists of both sides.
    "procs/web.py": (
        "<module>: import wm.take_over.legacy_forwarder.LegacyForwarder",
        "legacy: LegacyForwarder",
        "main: legacy=",
    ),
    "wm/api/app.py": (
        "<module>: import wm.take_over.forwarding.Forwarding",
        "<module>: import wm.take_over.legacy_forwarder.LegacyForwarder",
        "create_app: Forwarding",
        "create_app: LegacyForwarder",
        "create_app: legacy=",
    ),
    "wm/api/endpoint.py": (
        "<module>: import wm.take_over.legacy_forwarder.LegacyForwarder",
        "ApiContext: LegacyForwarder",
        "ApiContext: field legacy",
    ),
    "wm/api/routers/errors.py": (
        "<module>: import wm.take_over.routes.sum_error_stats",
        "worker_pool_error_stats: .legacy",
        "worker_pool_error_stats: field legacy",
        "worker_pool_error_stats: sum_error_stats",
    ),
    "wm/api/routers/pools.py": (
        "<module>: import wm.take_over.merged.answer",
        "<module>: import wm.take_over.merged.merged_page",
        "<module>: import wm.take_over.merged.pools_theirs",
        "pools_listed: .legacy",
        "pools_listed: answer",
        "pools_listed: merged_page",
        "pools_listed: pools_theirs",
    ),
    "wm/api/routers/providers.py": (
        "<module>: import wm.take_over.merged.answer",
        "<module>: import wm.take_over.merged.merged_page",
        "<module>: import wm.take_over.merged.providers_theirs",
        "list_providers: .legacy",
        "list_providers: answer",
        "list_providers: merged_page",
        "list_providers: providers_theirs",
    ),
}


def _scoped(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """Every node with the name of the function or class it is in ("" at the top)."""
    found: list[tuple[ast.AST, str]] = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, f"{scope}.{child.name}" if scope else child.name)
            else:
                found.append((child, scope))
                visit(child, scope)

    visit(tree, "")
    return found


def hooks_in(source: str) -> set[str]:
    """The take-over's hooks in one module's source, as "scope: hook"."""
    found: set[tuple[str, str]] = set()
    bound: set[str] = set()  # names imported from the take-over
    for node, scope in _scoped(ast.parse(source)):
        where = scope or "<module>"
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(TAKE_OVER_MODULES):
            for alias in node.names:
                found.add((where, f"import {node.module}.{alias.name}"))
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(TAKE_OVER_MODULES):
                    found.add((where, f"import {alias.name}"))
        elif isinstance(node, ast.Attribute) and node.attr in FIELDS:
            found.add((where, f".{node.attr}"))
        elif isinstance(node, ast.keyword) and node.arg in FIELDS:
            found.add((where, f"{node.arg}="))
        elif isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            for target in targets:
                if isinstance(target, ast.Name) and target.id in FIELDS:
                    found.add((where, f"field {target.id}"))
                elif isinstance(target, ast.Name) and target.id.startswith(NAMES):
                    found.add((where, f"defines {target.id}"))
        elif (
            isinstance(node, ast.Name)
            and not isinstance(node.ctx, ast.Store)
            and (node.id in bound or node.id.startswith(NAMES))
        ):
            found.add((where, node.id))
    return {f"{scope}: {hook}" for scope, hook in found}


def take_over_hooks() -> dict[str, tuple[str, ...]]:
    found = {}
    for root in ("wm", "procs"):
        for path in sorted((REPO / root).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name.startswith(TAKE_OVER) or name in TAKE_OVER_FILES:
                continue
            hooks = hooks_in(path.read_text())
            if hooks:
                found[name] = tuple(sorted(hooks))
    return found


def _listing(hooks: dict[str, tuple[str, ...]]) -> str:
    lines = ["HOOKS = {"]
    for name in sorted(hooks):
        lines.append(f"    {name!r}: (")
        lines += [f"        {hook!r}," for hook in hooks[name]]
        lines.append("    ),")
    return "\n".join([*lines, "}"])


def test_the_hook_list_is_every_place_the_core_reaches_the_take_over():
    found = take_over_hooks()
    expected = {name: tuple(sorted(hooks)) for name, hooks in HOOKS.items()}
    assert found == expected, (
        "the take-over's hooks changed: update HOOKS (the recipe for removing it) to\n"
        + _listing(found)
    )


def test_the_take_over_files_elsewhere_exist_and_only_the_listed_hooks_import_them():
    for name in TAKE_OVER_FILES:
        assert (REPO / name).is_file(), name


def test_the_hook_finder_sees_imports_calls_and_fields():
    source = (
        "from wm.take_over.marks import imported_from as mark\n"
        "class P:\n"
        "    adoption: object = None\n"
        "    def lookup(self, ref):\n"
        "        if self.adoption is not None and mark(ref):\n"
        "            return run(unadopted=1)\n"
        "def lazy():\n"
        "    import wm.take_over.cli\n"
        "X = ADOPTIONS\n"
    )
    assert hooks_in(source) == {
        "<module>: import wm.take_over.marks.imported_from",
        "P: field adoption",
        "P.lookup: .adoption",
        "P.lookup: mark",
        "P.lookup: unadopted=",
        "lazy: import wm.take_over.cli",
        "<module>: ADOPTIONS",
    }
