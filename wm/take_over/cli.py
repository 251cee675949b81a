"""`wm import`: take some providers' pools and workers from a live worker-manager (README:
"Moving a deployment onto wm"). import_plan.py decides, legacy_client.py reads, and importer.py
writes in one transaction (all three beside this module); this module only wires and prints."""

from __future__ import annotations

import click

from wm.cli.context import CliContext, UserError, echo_json, json_option
from wm.errors import ConfigError
from wm.take_over.import_plan import ProviderFacts, chosen_pools, provider_problems, summary_lines

REFUSED = "wm import (nothing written)"


@click.command("import")
@click.option(
    "--from",
    "root_url",
    required=True,
    help="The legacy deployment's root URL (its worker-manager answers under /api/worker-manager).",
)
@click.option(
    "--provider",
    "provider_ids",
    multiple=True,
    required=True,
    help="A providerId to take over (repeat for several); its pools and workers are imported.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be imported; write nothing.")
@json_option
@click.pass_obj
def import_command(
    obj: CliContext, root_url: str, provider_ids: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Import the pools of the providers named and their workers that are not stopped from a
    live worker-manager, reading its API with $TASKCLUSTER_CLIENT_ID/$TASKCLUSTER_ACCESS_TOKEN.

    Pools and workers are written in one transaction, or nothing is; run again, it adds only
    what changed. Pools of other providers are neither read into wm nor touched.
    """
    config = obj.config()
    providers = {
        p.id: ProviderFacts(kind=p.kind, adopt_legacy=p.adopt_legacy, regions=p.regions)
        for p in config.providers
    }
    chosen = tuple(dict.fromkeys(provider_ids))
    problems = provider_problems(chosen, providers)
    if problems:
        raise ConfigError(problems, REFUSED)
    env = config.env
    # Here, not at the top: every process starts through wm.cli, and only this command needs
    # the taskcluster client and the import's use case loaded.
    from wm.take_over.importer import ImportRefused, import_fleet
    from wm.take_over.legacy_client import LegacyApiError, LegacyClient

    legacy = LegacyClient(root_url, env.taskcluster_client_id, env.taskcluster_access_token)
    try:
        pools = chosen_pools(legacy.pools(), chosen)
        workers = legacy.workers([p.worker_pool_id for p in pools])
    except LegacyApiError as exc:
        raise UserError(f"{exc} (nothing written)") from exc
    outcome = import_fleet(
        obj.engine(),
        legacy.root_url,
        pools,
        workers,
        {p: providers[p] for p in chosen},
        workers_register={p.id: p.workers_register for p in config.providers},
        dry_run=dry_run,
    )
    if isinstance(outcome, ImportRefused):
        raise ConfigError(list(outcome.problems), REFUSED)
    if as_json:
        echo_json(
            {
                "from": legacy.root_url,
                "providers": list(chosen),
                "dry_run": dry_run,
                "pools": list(outcome.summaries),
                "pool_changes": list(outcome.pool_changes),
                "workers_written": outcome.workers_written,
            }
        )
        return
    click.echo(f"importing from {legacy.root_url}: providers {', '.join(chosen)}")
    for line in summary_lines(outcome.summaries):
        click.echo(line)
    if dry_run:
        click.echo("dry run: nothing written")
    else:
        click.echo(
            f"written: {len(outcome.pool_changes)} pool and launch config change(s), "
            f"{outcome.workers_written} worker row(s)"
        )
