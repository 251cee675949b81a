"""The providers of a process: each cloud account's calls also draw from its API budget,
shared through Postgres with every other process and replica (wm/budget.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from sqlalchemy import Engine

from wm.budget import SharedBudget
from wm.config import DEFAULT_ROOT_URL, ProviderConfig
from wm.providers import build_provider
from wm.providers.base import Provider


def build_providers(
    configs: Iterable[ProviderConfig],
    deployment_id: str,
    engine: Engine | None,
    stop: threading.Event | None = None,
    root_url: str = DEFAULT_ROOT_URL,
) -> dict[str, Provider]:
    """Provider id -> provider; with `engine`, drawing from the shared budget unless its
    config turns that off; with `stop`, calls still waiting when it is set are not sent."""
    built = {}
    for config in configs:
        provider = build_provider(config, deployment_id, stop, root_url=root_url)
        if engine is not None and config.shared_budget:
            provider.gate.use_budget(
                SharedBudget(engine, config.id, config.budget_account, config.budget_limits())
            )
        built[config.id] = provider
    return built
