"""The gcp provider kind: Google Compute Engine (Taskcluster's providerType `google`;
services/worker-manager/src/providers/google.js, schemas/v1/config-google.yml). Pure: no I/O,
no SDK."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from wm.calls import CallClass
from wm.config.base import BudgetLimit, ConfigPath, ProviderConfigBase
from wm.config.provider_ids import gce_label_problem
from wm.errors import ON_DEMAND, SPOT
from wm.kinds.base import MANAGED_BY, BootFacts, KindDescription, never, no_problems
from wm.kinds.schema_parts import ARRAY, INTEGER_MIN_1, OBJECT, STRING, worker_manager
from wm.model import Offering
from wm.pools.json_check import Schema

# GCE's published defaults, per project ("Compute Engine rate quotas": 1,500 requests a minute
# in each quota group; writes, gets and lists are groups apart). A quota is a window of a
# minute: as a bucket, a minute's requests refilled over the minute.
PUBLISHED_BUDGETS: Mapping[CallClass, BudgetLimit] = {
    CallClass.WRITE: BudgetLimit(burst=1500, per_s=25),
    CallClass.READ: BudgetLimit(burst=1500, per_s=25),
    CallClass.LIST: BudgetLimit(burst=1500, per_s=25),
}
CREATE_BATCH_MAX = 100  # instances per bulk insert
GCE_METADATA_KEY = "taskcluster"  # the metadata item worker-runner reads
# The only scope worker-manager gives a worker's service account: IAM roles limit what it may
# do (https://cloud.google.com/compute/docs/access/service-accounts#accesscopesiam).
GCE_SERVICE_ACCOUNT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
_GCE_LABEL_UNSAFE = re.compile(r"[^a-zA-Z0-9-]")
_GCE_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")  # what GCE accepts as a label value


class GcpProviderConfig(ProviderConfigBase):
    published_budgets: ClassVar[Mapping[CallClass, BudgetLimit]] = PUBLISHED_BUDGETS

    kind: Literal["gcp"]
    project: Annotated[str, Field(min_length=1)]
    operation_poll_s: float = Field(1.0, gt=0)  # between zone operation polls
    # JWKS file trusted for identity tokens; else Google's keys.
    identity_jwks: ConfigPath | None = None
    # The service account every worker VM runs as: without one a VM cannot fetch an identity
    # token. The email goes on the instance; the numeric unique id is what tokens carry as
    # `sub`, and is checked (a token of any other account in the project is refused).
    worker_service_account_email: Annotated[str, Field(min_length=3)] | None = None
    worker_service_account_id: Annotated[str, Field(pattern=r"^[0-9]{1,32}$")] | None = None

    @field_validator("id")
    @classmethod
    def _fits_gce_labels(cls, value: str) -> str:
        # Its VMs are found by a label holding the id: refused here, not by GCE at launch.
        problem = gce_label_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _service_account_whole(self) -> GcpProviderConfig:
        if (self.worker_service_account_email is None) != (self.worker_service_account_id is None):
            raise ValueError(
                "worker_service_account_email and worker_service_account_id go together: "
                "set both (the account's email and its numeric unique id) or neither"
            )
        return self

    @model_validator(mode="after")
    def _registering_workers_have_an_account(self) -> GcpProviderConfig:
        # Without one its VMs cannot fetch an identity token: every registration would be
        # refused, and every worker expire unregistered.
        if self.workers_register and self.worker_service_account_email is None:
            raise ValueError(
                f"provider {self.id!r} has workers_register = true (the default) but no "
                "worker_service_account_email and worker_service_account_id: its VMs could "
                "not fetch an identity token, so every registration would be refused; set "
                "the service account the worker VMs run as, or workers_register = false"
            )
        return self


LAUNCH_CONFIG: Schema = {
    "type": "object",  # and anything else of the instances.insert body
    "required": [
        "workerConfig",
        "region",
        "zone",
        "machineType",
        "disks",
        "networkInterfaces",
        "scheduling",
    ],
    "properties": {
        "workerManager": worker_manager(),
        "capacityPerInstance": INTEGER_MIN_1,
        "workerConfig": OBJECT,
        "region": STRING,
        "zone": STRING,
        "machineType": STRING,
        "disks": ARRAY,
        "networkInterfaces": ARRAY,
        "scheduling": OBJECT,
    },
}


def worker_group(launch_config: Mapping[str, Any]) -> Any:
    """The zone."""
    return launch_config.get("zone")


def worker_group_guesses(launch_config: Mapping[str, Any]) -> tuple[Any, ...]:
    return (launch_config.get("zone"),)


def gce_metadata(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    zone: str,
    worker_config: Mapping[str, Any],
) -> dict[str, Any]:
    """The value (as JSON) of the instance's `taskcluster` metadata item."""
    return {
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "workerGroup": zone,
        "rootUrl": root_url,
        "workerConfig": dict(worker_config),
    }


def gce_service_accounts(email: str) -> list[dict[str, Any]]:
    """The instance's `serviceAccounts`: the one account its identity tokens are minted for."""
    return [{"email": email, "scopes": list(GCE_SERVICE_ACCOUNT_SCOPES)}]


def gce_labels(
    *, pool_id: str, provider_id: str, launch_config_id: str, owner: str = ""
) -> dict[str, str]:
    """worker-manager's labels, on the instance and its persistent disks, valued as it values
    them (google.js: pool id and owner with [^a-zA-Z0-9-] made `-` and lowercased; the launch
    config id as it is). Where worker-manager's value would break GCE's rule for label values
    (lowercase [a-z0-9_-], at most 63 characters) and fail the insert, it is made to fit."""
    return {
        "created-by": _gce_label(f"taskcluster-wm-{provider_id}"),
        "managed-by": MANAGED_BY,
        "worker-pool-id": _gce_label(pool_id),
        "owner": _gce_label(owner),
        "launch-config-id": launch_config_id
        if _GCE_LABEL_VALUE.fullmatch(launch_config_id)
        else _gce_label(launch_config_id),
    }


def _gce_label(value: str) -> str:
    return _GCE_LABEL_UNSAFE.sub("-", value).lower()[:63]


def boot_data(facts: BootFacts) -> Mapping[str, Any]:
    """The instance's `taskcluster` metadata item (JSON), where worker-runner reads it."""
    return gce_metadata(
        root_url=facts.root_url,
        pool_id=facts.pool_id,
        provider_id=facts.provider_id,
        zone=facts.worker_group,
        worker_config=facts.worker_config,
    )


def offering(launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
    """The worker group is the zone, its region the zone less its last "-x" (GCE's naming:
    us-central1-a in us-central1); the type is machineType's last path segment
    ("zones/us-central1-a/machineTypes/n2-standard-2" or a bare name); spot for
    scheduling.provisioningModel SPOT (GCE reads its enums without regard to case) or the
    older scheduling.preemptible. None without a machine type or a zone-shaped worker group."""
    machine_type = launch_config.get("machineType")
    if not isinstance(machine_type, str) or not machine_type.rsplit("/", 1)[-1]:
        return None
    region, dash, _ = worker_group.rpartition("-")
    if not dash or not region:
        return None
    scheduling = launch_config.get("scheduling")
    scheduling = scheduling if isinstance(scheduling, Mapping) else {}
    model = scheduling.get("provisioningModel")
    spot = (isinstance(model, str) and model.upper() == "SPOT") or scheduling.get(
        "preemptible"
    ) is True
    return Offering(
        region=region,
        zone=worker_group,
        instance_type=machine_type.rsplit("/", 1)[-1],
        market=SPOT if spot else ON_DEMAND,
    )


DESCRIPTION = KindDescription(
    name="gcp",
    config_model=GcpProviderConfig,
    provider_type="google",
    launch_config_schema=LAUNCH_CONFIG,
    worker_group=worker_group,
    worker_group_guesses=worker_group_guesses,
    template_form=never,
    override_warnings=no_problems,
    launch_config_problems=no_problems,
    published_budgets=PUBLISHED_BUDGETS,
    budgets_per_region=False,
    create_batch_max=CREATE_BATCH_MAX,
    proof_rejected="Token validation error",
    boot_data=boot_data,
    offering=offering,
)
