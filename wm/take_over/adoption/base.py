"""What a provider kind does to take over a legacy worker-manager's instances: the one
optional interface a provider holds (`provider.adoption`, None unless its config says
`adopt_legacy = true`; wm/take_over/adoption/__init__.py builds it where providers are built).

An adopter recognises the legacy's instances of its provider by worker-manager's own tags
(labels), lists them in a scan unit as `CloudInstance`s keyed as `wm import` keys their rows
(wm/take_over/marks.py `imported_worker_id`, `legacy=True`), looks up the rows `wm import`
wrote, and says how an imported worker's instance is addressed for its teardown. It makes
every cloud call through its provider's gated calls, which the provider hands it: it owns no
client and no gate. The provider calls it at a few hook points (its listing, look-up and
teardown), and holds no logic of the take-over's own (tests/unit/test_take_over_hooks.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from wm.model import CloudInstance, WorkerRef
from wm.providers.base import TAG_DEPLOYMENT


class Adoption(Protocol):
    """A provider kind's take-over of a legacy worker-manager's instances (one per provider)."""

    provider_id: str

    def pool_of(self, tags: Mapping[str, str]) -> str | None:
        """The pool of a resource the legacy worker-manager made for this provider, from its
        tags (labels); None for anything else, wm's own resources included."""
        ...

    def pages(self, region: str) -> Iterator[Sequence[CloudInstance]]:
        """The legacy's instances of this provider in one scan unit, page by page, under their
        import keys; the provider yields them after its own pages."""
        ...

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        """The instances of imported rows (`imported(refs)`), by worker id; absent: not found."""
        ...


def made_by_wm(tags: Mapping[str, str]) -> bool:
    """Whether a resource carries wm's deployment tag: wm writes worker-manager's tags too, so
    only a resource without it can be a legacy worker-manager's."""
    return TAG_DEPLOYMENT in tags


def imported_tc_worker_id(worker_id: str) -> str:
    """worker-manager's workerId inside an imported worker's wm id (the last part of
    wm.take_over.marks.imported_worker_id: neither it nor the worker group holds a `/`)."""
    return worker_id.rsplit("/", 1)[-1]
