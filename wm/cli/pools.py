"""`wm config` and `wm pools`: the deployment's configuration, and the worker pool
definitions operators apply from files (Taskcluster's, as JSON or YAML)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import yaml

from wm.cli.context import CliContext, UserError, echo_json, echo_table, json_option
from wm.config.loader import POOLS_MOVED, missing_files, read_toml
from wm.db import offering_state, pool_errors
from wm.db import pools as pool_store
from wm.errors import ConfigError
from wm.kinds import KINDS
from wm.model import LaunchConfigRecord, Offering
from wm.pools import config_tables
from wm.pools.apply_plan import unscanned_worker_groups
from wm.pools.changes import ApplyDefinitions, ApplyRefused, apply_change
from wm.pools.definition import (
    DefinitionInvalid,
    PoolDefinition,
    parse_definition_documents,
    parse_pool_definition,
)
from wm.provisioning import cost_planning


@click.group("config")
def config_group() -> None:
    """The configuration file."""


@config_group.command()
@json_option
@click.pass_obj
def check(obj: CliContext, as_json: bool) -> None:
    """Load and validate the config, and check that the files it names are there; list
    every problem with its key path (exit 2 if any).

    Touches nothing: no database connection is made.
    """
    config = obj.config()
    missing = missing_files(config)
    if missing:
        raise ConfigError(missing, config.source)
    summary = {
        "source": config.source,
        "deployment_id": config.deployment_id,
        "root_url": config.root_url,
        "providers": [p.id for p in config.providers],
    }
    if as_json:
        echo_json({"ok": True, **summary})
        return
    click.echo(
        f"{config.source}: OK — deployment {config.deployment_id} at {config.root_url}, "
        f"{len(config.providers)} providers"
    )


@click.group()
def pools() -> None:
    """Worker pools."""


@pools.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
@click.option("--dry-run", is_flag=True, help="Print what would change; change nothing.")
@click.option(
    "--prune",
    is_flag=True,
    help="Delete every pool the files do not define (the files are the whole truth).",
)
@click.pass_obj
def apply(obj: CliContext, files: tuple[str, ...], dry_run: bool, prune: bool) -> None:
    """Apply worker pool definitions from FILES (JSON or YAML, one or many per file): all of
    them in one transaction, or none when any is refused.

    A definition is Taskcluster's: {workerPoolId, providerId, description, owner,
    emailOnError, config}. Pools the files do not name are left alone unless --prune.
    """
    config = obj.config()
    definitions = read_definitions(files, config.provider_kinds(), config_regions(obj))
    registers = {p.id: p.workers_register for p in config.providers}
    for definition in definitions:
        for warning in definition.warnings:
            click.echo(f"warning: {definition.worker_pool_id}: {warning}", err=True)
    plan = apply_change(
        obj.engine(),
        ApplyDefinitions(tuple(definitions), prune=prune),
        workers_register=registers,
        dry_run=dry_run,
    )
    if isinstance(plan, ApplyRefused):
        problems = list(plan.problems) or [plan.message]
        raise ConfigError(problems, "pool definitions (nothing changed)")
    if plan.empty:
        click.echo("the database already holds these definitions: nothing to do")
        return
    for line in plan.lines:
        click.echo(line)
    click.echo("dry run: nothing changed" if dry_run else f"applied {len(plan.lines)} change(s)")


def config_regions(obj: CliContext) -> dict[str, tuple[str, ...]]:
    return obj.config().scanned_regions()


def read_definitions(
    files: tuple[str, ...], kinds: dict[str, str], regions: dict[str, tuple[str, ...]]
) -> list[PoolDefinition]:
    """Every definition of every file, or a ConfigError listing every problem of all."""
    definitions: list[PoolDefinition] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for name in files:
        try:
            documents = parse_definition_documents(Path(name).read_text(), name)
        except DefinitionInvalid as invalid:
            problems += invalid.problems
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{name}: cannot read: {exc}")
            continue
        for pool_id, body in documents:
            if pool_id in seen:
                problems.append(f"{name}: {pool_id}: also defined in {seen[pool_id]}")
                continue
            seen[pool_id] = name
            try:
                definition = parse_pool_definition(pool_id, body, kinds)
            except DefinitionInvalid as invalid:
                problems += [f"{name}: {pool_id}: {p}" for p in invalid.problems]
                continue
            outside = unscanned_worker_groups(definition, regions)
            problems += [f"{name}: {pool_id}: {p}" for p in outside]
            definitions.append(definition)
    if problems:
        raise ConfigError(problems, "pool definitions (nothing changed)")
    return definitions


@pools.command()
@click.option(
    "--owner",
    required=True,
    help="The owner (an email address) every converted definition names.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the definitions here (YAML, or JSON for *.json) instead of printing them.",
)
@click.pass_obj
def convert(obj: CliContext, owner: str, out: str | None) -> None:
    """Write the old config.toml's [[pools]] tables as Taskcluster worker pool definitions.

    Launch configs keep their ids, so `wm pools apply` of the result adopts the existing
    workers. Then remove [[pools]] from config.toml (and what the notes name).
    """
    from wm.config.loader import config_path

    source = config_path(obj.config_path)
    raw = read_toml(source)
    if "pools" not in raw:
        raise UserError(f"{source}: has no [[pools]] tables to convert")
    conversion = config_tables.convert(
        raw["pools"], config_tables.old_providers(raw.get("providers", [])), owner=owner
    )
    if conversion.problems:
        raise ConfigError(list(conversion.problems), str(source))
    documents = list(conversion.documents)
    if out and out.endswith(".json"):
        text = json.dumps(documents, indent=2) + "\n"
    else:
        text = yaml.safe_dump_all(documents, sort_keys=False)
    if out:
        Path(out).write_text(text)
        click.echo(f"wrote {len(documents)} definition(s) to {out}")
    else:
        click.echo(text, nl=False)
    for note in conversion.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"note: {POOLS_MOVED.split(': ', 1)[1]}", err=True)


@pools.command("list")
@json_option
@click.pass_obj
def list_pools(obj: CliContext, as_json: bool) -> None:
    """Every pool in the database, with its provider and capacity bounds."""
    records = pool_store.load_pools(obj.engine())
    if as_json:
        echo_json(records)
        return
    echo_table(
        ["pool", "provider", "previous", "min", "max", "ratio", "removed"],
        [
            (
                p.pool_id,
                p.provider_id or "-",
                ",".join(p.previous_provider_ids) or "-",
                p.min_capacity,
                p.max_capacity,
                p.scaling_ratio,
                "yes" if p.removed else "",
            )
            for p in records
        ],
    )


@pools.command()
@click.argument("pool_id")
@json_option
@click.pass_obj
def errors(obj: CliContext, pool_id: str, as_json: bool) -> None:
    """Recent errors of one pool (launch failures, worker reports), newest first."""
    engine = obj.engine()
    if not any(p.pool_id == pool_id for p in pool_store.load_pools(engine)):
        raise UserError(
            f"no pool {pool_id!r} in the database (apply its definition with `wm pools apply`)"
        )
    found = pool_errors.list_errors(engine, pool_id)
    if as_json:
        echo_json(found)
        return
    echo_table(
        ["reported", "kind", "launch config", "title", "description"],
        [
            (
                e.reported.isoformat(timespec="seconds"),
                e.kind,
                e.launch_config_id or "-",
                e.title,
                e.description,
            )
            for e in found
        ],
    )


@pools.command()
@click.argument("pool_id")
@json_option
@click.pass_obj
def explain(obj: CliContext, pool_id: str, as_json: bool) -> None:
    """Where POOL launches and why: per launch config its offering, price, availability,
    pre-emption rate, time to ready, bench, Taskcluster's weight and the cost choice's weight
    (`[launch_choice]` says which of them the pool launches by)."""
    config = obj.config()
    engine = obj.engine()
    pool = next(iter(pool_store.load_pools(engine, [pool_id])), None)
    if pool is None or pool.removed:
        raise UserError(
            f"no pool {pool_id!r} in the database (apply its definition with `wm pools apply`)"
        )
    configs = [
        lc
        for lc in pool_store.load_launch_configs(engine, include_archived=False, pool_ids=[pool_id])
        if lc.configuration
    ]
    kind = config.provider_kinds().get(pool.provider_id or "")
    description = KINDS.get(kind) if kind is not None else None

    def offering_of(lc: LaunchConfigRecord) -> Offering | None:
        if description is None:
            return None
        return description.offering(lc.configuration, lc.region)

    provider_id = pool.provider_id or ""
    reading = cost_planning.read(engine, provider_id, [pool_id], config.launch_choice.clock_speed)
    running = {lc: n for (p, lc), n in offering_state.running_workers(engine, [pool_id]).items()}
    found = cost_planning.explain(
        pool_id,
        config.launch_choice.for_pool(pool_id),
        configs,
        offering_of,
        reading,
        running,
        time.time(),
    )
    if as_json:
        echo_json(found)
        return
    cost = found["cost_per_hour"]
    click.echo(
        f"{pool_id}: launches by {found['mode']} (beta {found['beta']:g}, spread "
        f"{found['spread']:g}); running workers cost "
        + (f"${cost:.4f}/h" if cost is not None else "unknown (no prices held)")
    )
    echo_table(
        ["launch config", "offering", "$/h", "avail", "preempt/h", "ready s", "bench",
         "weight", "final", "why"],
        [
            (
                row["launch_config_id"],
                row["offering"] or "-",
                _number(row["price_per_hour"]),
                _number(row["availability"]),
                _number(row["preemption_rate"]),
                _number(row["ready_s"], "{:.0f}"),
                _bench(row),
                _number(row["weight"]),
                _number(row["final_weight"]),
                "; ".join(row["why"]) or "-",
            )
            for row in found["launch_configs"]
        ],
    )  # fmt: skip


def _number(value: object, form: str = "{:.4g}") -> str:
    return "-" if value is None else form.format(value)


def _bench(row: dict) -> str:
    until = row["benched_until"]
    if until is None:
        return row["admission"]
    return f"{row['admission']} until {until} ({row['bench_failures']}x {row['bench_code']})"
