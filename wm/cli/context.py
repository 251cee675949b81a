"""What every command shares: the config and the engine, built lazily; error handling."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any

import click
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from wm.config import loader as config_module
from wm.config.loader import Config
from wm.db import schema as db_schema
from wm.db.engine import make_engine
from wm.errors import ConfigError, SchemaNotReady, WmError

USAGE_ERROR_EXIT = 2


class UserError(WmError):
    """The command cannot do what was asked (unknown pool, missing database...)."""


class CliContext:
    def __init__(self, config_path: str | None) -> None:
        self.config_path = config_path
        self._config: Config | None = None
        self._engine: Engine | None = None

    def config(self) -> Config:
        if self._config is None:
            self._config = config_module.load(self.config_path)
        return self._config

    def database_url(self) -> str:
        url = self.config().env.database_url
        if not url:
            raise UserError(
                "DATABASE_URL is not set: point it at a PostgreSQL database "
                "(`make demo` starts a throwaway one)."
            )
        return url

    def engine(self, *, schema: bool = True) -> Engine:
        """The database, checked to hold the schema this wm needs (unless not `schema`:
        `wm db upgrade`, which makes it so)."""
        if self._engine is None:
            self._engine = make_engine(self.database_url(), application_name="wm-cli")
            if schema:
                db_schema.require(self._engine)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


# The option every command group takes: where config.toml is.
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Path of config.toml (default: $WM_CONFIG, else ./config.toml).",
)


def _given_after(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # The root group's callback made the context object (its config read lazily), so the
    # path given after a subcommand is set before anything reads it.
    if value is None:
        return
    holder = ctx.find_root().obj
    if holder.config_path not in (None, value):
        raise click.UsageError(f"--config given twice: {holder.config_path} and {value}")
    holder.config_path = value


def config_everywhere(group: click.Group) -> None:
    """Accept `--config` after every subcommand too (`wm pools list --config x.toml`), as
    before it: each command and group under `group` gets the option. Call once all commands
    are added."""
    for command in group.commands.values():
        command.params.append(
            click.Option(
                ["--config"],
                type=click.Path(dir_okay=False),
                default=None,
                expose_value=False,
                callback=_given_after,
                help="Path of config.toml (default: $WM_CONFIG, else ./config.toml).",
            )
        )
        if isinstance(command, click.Group):
            config_everywhere(command)


def run_guarded(command: Callable[..., Any]) -> None:
    """Run the click group; turn wm's errors into a message naming what is wrong and exit 2."""
    try:
        command(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ConfigError as exc:
        click.echo(f"{exc.source}: {len(exc.problems)} problem(s)", err=True)
        for problem in exc.problems:
            click.echo(f"  {problem}", err=True)
        sys.exit(USAGE_ERROR_EXIT)
    except (UserError, SchemaNotReady) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(USAGE_ERROR_EXIT)
    except OperationalError as exc:
        click.echo(f"error: cannot reach the database: {str(exc.orig).strip()}", err=True)
        sys.exit(USAGE_ERROR_EXIT)


def to_jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: to_jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return value


def echo_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable(value), indent=2, sort_keys=True))


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for index, row in enumerate(cells):
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if index == 0:
            click.echo("  ".join("-" * width for width in widths))
    if not rows:
        click.echo("(none)")


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
