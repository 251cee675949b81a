"""Cloud providers: one package per provider kind, wm.providers.<kind>, each exposing
`make(config, deployment_id, root_url) -> Provider` (the contract in base.py) and
`make_verifier(config, deployment_id, audience, *, budget, now) -> IdentityVerifier`. The
pieces every kind shares sit beside them: base, gate, meter, pkcs7, identity_fetch, data; and
budget.py, one API budget per cloud account shared through Postgres, which procs/ wires to the
providers' gates (no provider imports it)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from wm.config.loader import DEFAULT_ROOT_URL, ProviderConfig
from wm.kinds import describe
from wm.providers.base import Provider

if TYPE_CHECKING:
    import threading

    from wm.providers.gate import Budget
    from wm.providers.signal_sources import SignalCollector
    from wm.workers.identity import Clock, IdentityVerifier


def kind_package(kind: str) -> ModuleType:
    """The package of a provider kind, wm.providers.<kind>; KeyError for a kind wm.kinds does
    not describe. Imported when first asked for: a scanner for one cloud never loads the other
    clouds' packages, and no package imports its SDK before it builds its clients."""
    return importlib.import_module(f"{__name__}.{describe(kind).name}")


def build_provider(
    config: ProviderConfig,
    deployment_id: str,
    stop: threading.Event | None = None,
    *,
    root_url: str = DEFAULT_ROOT_URL,
) -> Provider:
    """The provider for one config entry; with `stop`, calls still waiting for their turn when
    it is set are not sent. `root_url` (the config's) goes into every VM's boot data. The
    account's shared API budget is wired by the processes (procs/providers.py): providers sit
    below it and never reach up to it."""
    provider = kind_package(config.kind).make(config, deployment_id, root_url)
    if config.adopt_legacy:  # the take-over's one hook here: its adopter of the legacy's VMs
        from wm.take_over.adoption import adopter

        provider.adoption = adopter(config.kind, provider)
    if stop is not None:
        provider.gate.stop_on(stop)
    return provider


def build_signals(config: ProviderConfig, provider: Provider) -> SignalCollector | None:
    """The launch choice's signal reads of one provider (its package's signals.py, through the
    provider's gate); None for a kind whose package reads none."""
    package = kind_package(config.kind)
    try:
        module = importlib.import_module(f"{package.__name__}.signals")
    except ModuleNotFoundError:
        return None
    return module.make_signals(config, provider)


def build_verifier(
    config: ProviderConfig,
    deployment_id: str,
    audience: str,
    *,
    budget: Budget | None = None,
    now: Clock | None = None,
) -> IdentityVerifier:
    """The identity verifier for one provider; its trust anchors are loaded now, so a bad path
    in the config fails at start-up (ConfigError), not at the first registration. `audience`
    is the deployment's root_url (the audience of GCE identity tokens). A verifier that calls
    its cloud's API (Azure's VM look-up) draws from `budget`, the account's shared budget the
    web process wires (procs/providers.py). `now`: the clock proofs are checked at (default:
    the real one; tests check captured proofs at their own time)."""
    module = kind_package(config.kind)
    if now is None:
        return module.make_verifier(config, deployment_id, audience, budget=budget)
    return module.make_verifier(config, deployment_id, audience, budget=budget, now=now)
