"""The providers and identity verifiers of a process: each cloud account's calls also draw
from its API budget, shared through Postgres with every other process and replica
(wm/providers/budget.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from sqlalchemy import Engine

from wm.calls import ACCOUNT_WIDE
from wm.config.loader import DEFAULT_ROOT_URL, Config, ProviderConfig
from wm.kinds import describe
from wm.providers import build_provider, build_verifier
from wm.providers.base import Provider
from wm.providers.budget import SharedBudget
from wm.workers.identity import IdentityVerifier


def launching_providers(
    config: Config, kinds: Sequence[str] = (), excluded: Sequence[str] = ()
) -> list[ProviderConfig]:
    """The providers of the kinds asked for (all when none is) but those excluded, of a
    scanned kind (its description's): what a provisioner launches for and a scanner lists."""
    return [
        p
        for p in config.providers
        if (not kinds or p.kind in kinds) and p.kind not in excluded and describe(p.kind).scanned
    ]


def build_providers(
    configs: Iterable[ProviderConfig],
    deployment_id: str,
    engine: Engine | None,
    stop: threading.Event | None = None,
    root_url: str = DEFAULT_ROOT_URL,
) -> dict[str, Provider]:
    """Provider id -> provider; with `engine`, drawing from the shared budget unless its
    config turns that off; with `stop`, calls still waiting when it is set are not sent.
    `configs` are of scanned kinds (launching_providers'): only those have a provider."""
    built = {}
    for config in configs:
        provider = build_provider(config, deployment_id, stop, root_url=root_url)
        budget = shared_budget(config, engine)
        if budget is not None:
            provider.gate.use_budget(budget)
            budget.prepare(budget_scopes(config))
        built[config.id] = provider
    return built


def build_verifiers(
    configs: Iterable[ProviderConfig], deployment_id: str, audience: str, engine: Engine | None
) -> dict[str, IdentityVerifier]:
    """Provider id -> its identity verifier; a verifier's cloud calls (Azure's VM look-ups)
    draw from the same shared budget as the provider's own."""
    return {
        config.id: build_verifier(
            config, deployment_id, audience, budget=shared_budget(config, engine)
        )
        for config in configs
    }


def budget_scopes(config: ProviderConfig) -> tuple[str, ...]:
    """The scopes of the buckets a provider's calls draw from: its regions where its cloud
    limits each region on its own, else the whole account."""
    return tuple(config.regions) if describe(config.kind).budgets_per_region else (ACCOUNT_WIDE,)


def shared_budget(config: ProviderConfig, engine: Engine | None) -> SharedBudget | None:
    """The account's shared budget for this provider's calls; None without a database or
    when its config turns the shared budget off."""
    if engine is None or not config.shared_budget:
        return None
    return SharedBudget(engine, config.id, config.budget_account, config.budget_limits())
