"""The static provider kind: workers no cloud launches (Taskcluster's providerType `static`;
services/worker-manager/src/providers/static.js, schemas/v1/config-static.yml). Machines in a
rack, GPU boxes, long-lived VMs made by hand: an operator makes each known with createWorker
(its expiry, capacity and a secret), and worker-runner's static provider registers it with
that secret. Pure: no I/O, no SDK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from wm.calls import CallClass
from wm.config.base import BudgetLimit, ProviderConfigBase
from wm.kinds.base import BootFacts, KindDescription, never, no_offering, no_problems
from wm.kinds.schema_parts import MAX_REREGISTRATION_TIMEOUT_S, OBJECT, closed
from wm.pools.json_check import Schema

# Keys of a provider table that only a cloud account has: a static provider calls no cloud.
CLOUD_KEYS = (
    "regions",
    "endpoint",
    "credentials",
    "scan_interval_s",
    "max_scan_s",
    "provision_interval_s",
    "gate",
    "account",
    "budgets",
    "shared_budget",
    "workers_register",
    "adopt_legacy",
)


class StaticProviderConfig(ProviderConfigBase):
    """`[[providers]] kind = "static"`: an id, nothing else (no cloud, no regions)."""

    published_budgets: ClassVar[Mapping[CallClass, BudgetLimit]] = {}

    kind: Literal["static"]
    regions: tuple[str, ...] = ()  # no scan units: nothing to list
    shared_budget: bool = False  # no cloud calls to draw a budget for

    @model_validator(mode="before")
    @classmethod
    def _no_cloud_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            given = [key for key in CLOUD_KEYS if key in data]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: a static provider has no cloud settings (its workers "
                    "are made with createWorker and register with a secret)"
                )
        return data


# config-static.yml: the lifecycle knows only reregistrationTimeout; no launch configs.
POOL_CONFIG: Schema = closed(
    {
        "lifecycle": closed(
            {
                "reregistrationTimeout": {
                    "type": "integer",
                    "maximum": MAX_REREGISTRATION_TIMEOUT_S,
                }
            }
        ),
        "workerConfig": OBJECT,
    }
)


def worker_group(launch_config: Mapping[str, Any]) -> Any:
    """None: a static worker's group is the one createWorker names."""
    return None


def worker_group_guesses(launch_config: Mapping[str, Any]) -> tuple[Any, ...]:
    return ()


def boot_data(facts: BootFacts) -> Mapping[str, Any]:
    """worker-runner's static provider config (tools/worker-runner/provider/static): written
    by the operator on the machine, not by wm; its keys are these, with the machine's
    workerId and staticSecret beside them."""
    return {
        "providerType": "static",
        "rootURL": facts.root_url,
        "providerID": facts.provider_id,
        "workerPoolID": facts.pool_id,
        "workerGroup": facts.worker_group,
    }


DESCRIPTION = KindDescription(
    name="static",
    config_model=StaticProviderConfig,
    provider_type="static",
    launch_config_schema=OBJECT,  # no launch configs: pool_config_schema has none
    worker_group=worker_group,
    worker_group_guesses=worker_group_guesses,
    template_form=never,
    override_warnings=no_problems,
    launch_config_problems=no_problems,
    published_budgets=StaticProviderConfig.published_budgets,
    budgets_per_region=False,
    create_batch_max=0,
    # static.js's refusal of a wrong secret (a missing one gets the same answer: one answer
    # to every refused proof).
    proof_rejected="bad staticSecret in workerIdentityProof",
    boot_data=boot_data,
    offering=no_offering,  # hand-made machines: no cloud sells them
    hand_made=True,
    pool_config_schema=POOL_CONFIG,
)
