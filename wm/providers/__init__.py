"""Cloud providers: one module per cloud with the same interface (see base.py)."""

from __future__ import annotations

import importlib

from wm.config import ProviderConfig
from wm.providers.base import Provider

# kind -> module; each module exposes `make(config, deployment_id) -> Provider`.
MODULES = {"aws": "wm.providers.aws", "gcp": "wm.providers.gcp", "azure": "wm.providers.azure"}


def build_provider(config: ProviderConfig, deployment_id: str) -> Provider:
    # SDKs are imported lazily: a scanner for one cloud never loads the other clouds' SDKs.
    module = importlib.import_module(MODULES[config.kind])
    return module.make(config, deployment_id)
