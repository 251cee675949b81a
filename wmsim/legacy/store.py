"""The legacy worker-manager stand-in's state: worker pools as Taskcluster defines them and
workers with worker-manager's own fields (services/worker-manager/src/data.js), kept in memory
behind one lock. Everything here is plain data and pure answers; the HTTP service, the
provisioner and the scanner change it under `Store.lock`.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, text

STATES = ("requested", "running", "stopping", "stopped")
MAX_LIMIT = 1000  # libraries/api/src/pagination.js maxLimit


def js_time(moment: datetime) -> str:
    """A date as JavaScript's Date.toJSON writes it (milliseconds, `Z`)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def launch_config_id(engine: Engine, pool_id: str, launch_config: Mapping[str, Any]) -> str:
    """The id worker-manager gives a launch config: the one it names in
    `workerManager.launchConfigId`, otherwise the one its database derives (db/versions 0105:
    `'lc-' || left(md5(worker_pool_id || (config - 'workerManager')::text), 20)`), computed
    by Postgres itself, as worker-manager's is, rather than by a reimplementation."""
    named = (launch_config.get("workerManager") or {}).get("launchConfigId")
    if named:
        return str(named)
    query = text(
        "SELECT 'lc-' || left(md5(:pool || (CAST(:config AS jsonb) - 'workerManager')::text), 20)"
    )
    # worker-manager is JavaScript: its JSON.stringify writes an integral double without a
    # fraction (10, not 10.0), and the id hashes what Postgres stored.
    values = {"pool": pool_id, "config": json.dumps(_as_javascript(launch_config))}
    with engine.connect() as conn:
        return str(conn.execute(query, values).scalar_one())


def _as_javascript(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _as_javascript(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_javascript(item) for item in value]
    return value


@dataclass
class Pool:
    worker_pool_id: str
    provider_id: str
    description: str
    config: dict[str, Any]
    owner: str
    email_on_error: bool
    created: datetime
    last_modified: datetime
    previous_provider_ids: list[str] = field(default_factory=list)

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any], now: datetime) -> Pool:
        """A pool from a definition as tc-admin sends it (create-worker-pool-request plus
        workerPoolId)."""
        return cls(
            worker_pool_id=definition["workerPoolId"],
            provider_id=definition["providerId"],
            description=definition.get("description", ""),
            config=dict(definition.get("config") or {}),
            owner=definition.get("owner", ""),
            email_on_error=bool(definition.get("emailOnError", False)),
            created=now,
            last_modified=now,
        )

    def launch_configs(self) -> list[dict[str, Any]]:
        return list(self.config.get("launchConfigs") or [])


@dataclass
class Worker:
    worker_pool_id: str
    worker_group: str
    worker_id: str
    provider_id: str
    state: str
    capacity: int
    created: datetime
    expires: datetime
    last_modified: datetime
    last_checked: datetime
    launch_config_id: str | None = None
    first_claim: datetime | None = None
    last_date_active: datetime | None = None
    secret: str | None = None  # worker-manager keeps it encrypted; plain text is enough here
    provider_data: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.worker_pool_id, self.worker_group, self.worker_id)

    def as_api(self) -> dict[str, Any]:
        """worker-full.json: exactly its properties."""
        answer: dict[str, Any] = {
            "workerPoolId": self.worker_pool_id,
            "workerGroup": self.worker_group,
            "workerId": self.worker_id,
            "providerId": self.provider_id,
            "created": js_time(self.created),
            "expires": js_time(self.expires),
            "state": self.state,
            "capacity": self.capacity,
            "lastModified": js_time(self.last_modified),
            "lastChecked": js_time(self.last_checked),
        }
        if self.launch_config_id:
            answer["launchConfigId"] = self.launch_config_id
        return answer


@dataclass
class PoolError:
    worker_pool_id: str
    error_id: str
    reported: datetime
    kind: str
    title: str
    description: str
    extra: dict[str, Any]
    launch_config_id: str | None = None

    def as_api(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "workerPoolId": self.worker_pool_id,
            "errorId": self.error_id,
            "reported": js_time(self.reported),
            "kind": self.kind,
            "title": self.title,
            "description": self.description,
            "extra": self.extra,
        }
        if self.launch_config_id:
            answer["launchConfigId"] = self.launch_config_id
        return answer


COUNTED = ("requested", "running", "stopping", "stopped")


def capacity_counts(workers: Iterable[Worker]) -> dict[str, int]:
    """The count and capacity fields worker-manager's pool and stats answers carry;
    currentCapacity is what is requested or running (WorkerPool.currentCapacity in data.js)."""
    counts = {f"{state}Count": 0 for state in COUNTED} | {
        f"{state}Capacity": 0 for state in COUNTED
    }
    for worker in workers:
        counts[f"{worker.state}Count"] += 1
        counts[f"{worker.state}Capacity"] += worker.capacity
    counts["currentCapacity"] = counts["requestedCapacity"] + counts["runningCapacity"]
    return counts


def pool_api(pool: Pool, workers: Iterable[Worker]) -> dict[str, Any]:
    """worker-pool-full.json."""
    return {
        "workerPoolId": pool.worker_pool_id,
        "providerId": pool.provider_id,
        "description": pool.description,
        "created": js_time(pool.created),
        "lastModified": js_time(pool.last_modified),
        "config": pool.config,
        "owner": pool.owner,
        "emailOnError": pool.email_on_error,
        **capacity_counts(workers),
    }


class BadToken(ValueError):
    """A continuation token this service did not hand out."""


def encode_offset(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        padded = token + "=" * (-len(token) % 4)
        offset = json.loads(base64.urlsafe_b64decode(padded))["o"]
    except (ValueError, KeyError, TypeError) as error:
        raise BadToken(f"invalid continuationToken {token!r}") from error
    if not isinstance(offset, int) or offset < 0:
        raise BadToken(f"invalid continuationToken {token!r}")
    return offset


def page(items: Sequence[Any], limit: str | None, token: str | None, key: str) -> dict[str, Any]:
    """One page as libraries/api/src/pagination.js cuts it (offset paging, `limit` capped at
    1000, a continuationToken only when more follow): `{key: items, continuationToken?}`."""
    size = min(int(limit), MAX_LIMIT) if limit else MAX_LIMIT
    start = decode_offset(token)
    chosen = list(items[start : start + size])
    answer: dict[str, Any] = {key: chosen}
    if start + size < len(items) and size > 0:
        answer["continuationToken"] = encode_offset(start + size)
    return answer


@dataclass
class Store:
    pools: dict[str, Pool] = field(default_factory=dict)
    workers: dict[tuple[str, str, str], Worker] = field(default_factory=dict)
    errors: list[PoolError] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def pool_workers(
        self, pool_id: str, where: Callable[[Worker], bool] = lambda w: True
    ) -> list[Worker]:
        return sorted(
            (w for w in self.workers.values() if w.worker_pool_id == pool_id and where(w)),
            key=lambda w: (w.worker_group, w.worker_id),
        )

    def sorted_pools(self) -> list[Pool]:
        return [self.pools[k] for k in sorted(self.pools)]
