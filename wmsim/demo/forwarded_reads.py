"""The take-over demo's check of wm's forwarding: the legacy's pools read through the rootUrl
(wm forwards what it does not serve) and at the legacy worker-manager itself must answer the
same. An observer client of the legacy's makes both reads."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import taskcluster
import taskcluster.exceptions

from wmsim.demo.take_over_report import Comparison
from wmsim.legacy.manager import LegacyWorkerManager

OBSERVER_CLIENT = "demo/observer"  # the demo's own reads, through the rootUrl and directly
COMPARE_ATTEMPTS = 3  # reads of a listing that changed while it was read
SHED_RETRIES = 5
SHED_BACKOFF_S = 0.2
READS = ("workerPool", "listWorkerPoolErrors", "listWorkersForWorkerPool")


class ForwardedReads:
    """Compares answers through wm with the legacy's own; keeps every comparison made."""

    def __init__(self) -> None:
        self.observer_token = secrets.token_urlsafe(32)
        self.comparisons: list[Comparison] = []
        self.shed = 0  # reads through wm it shed (429) and the demo asked again

    def compare(
        self,
        legacy: LegacyWorkerManager,
        root_url: str,
        pool_providers: Mapping[str, str],
        moved: str,
    ) -> None:
        """The legacy's pools (those not of the `moved` provider), each read both ways. A
        listing that changes while it is read is read again on either side of the forwarded
        read, a few times at most."""
        if OBSERVER_CLIENT not in legacy.deployment.clients:
            legacy.add_client(OBSERVER_CLIENT, self.observer_token, ["worker-manager:*"])
        through = self._observer(root_url)
        direct = self._observer(legacy.base_url)
        for pool_id, provider_id in sorted(pool_providers.items()):
            if provider_id == moved:
                continue
            for name in READS:
                for _ in range(COMPARE_ATTEMPTS):
                    before = _answer(getattr(direct, name), pool_id)
                    forwarded = self._forwarded(getattr(through, name), pool_id)
                    after = _answer(getattr(direct, name), pool_id)
                    if forwarded in (before, after):
                        break
                equal = forwarded in (before, after)
                detail = "" if equal else f"through wm: {forwarded!r:.300}; legacy: {after!r:.300}"
                self.comparisons.append(Comparison(name, pool_id, equal, detail))

    def _observer(self, root_url: str) -> Any:
        return taskcluster.WorkerManager(
            {
                "rootUrl": root_url,
                "credentials": {"clientId": OBSERVER_CLIENT, "accessToken": self.observer_token},
            }
        )

    def _forwarded(self, call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
        """A read through wm, asked again while wm sheds it (429: too many requests in flight,
        never forwarded), as a client backs off and retries."""
        answer = _answer(call, *args)
        for attempt in range(1, SHED_RETRIES + 1):
            if answer != ("error", (429, "TooManyRequests")):
                break
            self.shed += 1
            time.sleep(SHED_BACKOFF_S * attempt)
            answer = _answer(call, *args)
        return answer


def _answer(call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """A call's answer, or its failure's status and code: what two sides must agree on."""
    try:
        return ("answer", call(*args))
    except taskcluster.exceptions.TaskclusterRestFailure as failure:
        return ("error", (failure.status_code, (failure.body or {}).get("code")))
    except taskcluster.exceptions.TaskclusterFailure as failure:
        return ("failed", str(failure))
