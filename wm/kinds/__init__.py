"""The provider kinds: what each kind *is*, one pure description per kind, in one table.

Every per-kind part of wm (config model, launch config schema, worker group, warnings,
budgets, batch size, Taskcluster provider type, proof refusal, boot data, whether a scanner
lists it or createWorker makes its workers, how they register) is read from `KINDS[kind]`;
what a kind *does* is its package wm.providers.<kind>. Adding a kind is its description module
here, its entry below, its provider package and its simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from wm.kinds import aws, azure, gcp, static
from wm.kinds.base import BootFacts, KindDescription

# kind -> description, in the order wm lists kinds (the CLI's choices, a null-provider pool's
# worker group guesses).
KINDS: Mapping[str, KindDescription] = MappingProxyType(
    {d.name: d for d in (aws.DESCRIPTION, gcp.DESCRIPTION, azure.DESCRIPTION, static.DESCRIPTION)}
)


def describe(name: str) -> KindDescription:
    """The description of a kind; a KeyError naming the known kinds otherwise."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown provider kind {name!r}; wm's kinds are {sorted(KINDS)}") from None


__all__ = ["KINDS", "BootFacts", "KindDescription", "describe"]
