"""Key Vault secrets in the simulated ARM, only as far as deployments use them: a parameter
given as `{"reference": {"keyVault": {"id"}, "secretName"[, "secretVersion"]}}` resolves to a
secret put here (`SimArm.deployments.put_secret`, POST /_sim/keyvault/secrets).
"""

from __future__ import annotations

from typing import Any

from wmsim.azure.errors import ArmError
from wmsim.azure.resources import _key, as_object

KEYVAULT_HELP = "Please see https://aka.ms/arm-keyvault for usage details."


class KeyVault:
    """The secrets of every vault of one SimArm (its lock held by the caller)."""

    def __init__(self) -> None:
        self._secrets: dict[tuple[str, str], dict[str | None, str]] = {}

    def reset(self) -> None:
        self._secrets.clear()

    def put(self, vault_id: str, name: str, value: str, version: str | None = None) -> None:
        """A Key Vault secret `{"reference": {"keyVault": {"id"}, "secretName"}}` parameters
        resolve to (the latest one put, or `version` when a reference names one)."""
        held = self._secrets.setdefault((_key(vault_id.rstrip("/")), name.lower()), {})
        held[None] = value
        if version:
            held[version.lower()] = value

    def resolve(self, parameter: str, reference: dict[str, Any]) -> str:
        """The secret a parameter's Key Vault reference names, or ARM's error."""
        vault = str(as_object(reference.get("keyVault")).get("id") or "").rstrip("/")
        name = str(reference.get("secretName") or "")
        version = reference.get("secretVersion")
        if not any(v == _key(vault) for v, _ in self._secrets):
            raise ArmError(
                400,
                "KeyVaultParameterReferenceNotFound",
                f"The specified KeyVault '{vault}' could not be found. {KEYVAULT_HELP}",
            )
        held = self._secrets.get((_key(vault), name.lower()), {})
        value = held.get(str(version).lower() if version else None)
        if value is None:
            raise ArmError(
                404,
                "KeyVaultParameterReferenceSecretRetrieveFailed",
                f"The secret of KeyVault parameter '{parameter}' cannot be retrieved. Http "
                f"status code: 'NotFound'. Error message: 'A secret with (name/id) {name} was "
                f"not found in this key vault.'. {KEYVAULT_HELP}",
            )
        return value
