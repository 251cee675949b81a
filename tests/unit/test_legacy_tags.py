"""Which tags and labels mean "worker-manager made this for this provider", per kind, and the
import key and scan outcome that follow from them. Pure: tables only."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from wm.model import CloudInstance, WorkerRecord, WorkerState
from wm.providers.base import TAG_DEPLOYMENT
from wm.scanning.scan_diff import diff
from wm.take_over.adoption import aws, azure, gcp
from wm.take_over.adoption.base import imported_tc_worker_id, made_by_wm
from wm.take_over.marks import imported_worker_id

ROOT = "https://tc.example.com"
EC2 = {
    "CreatedBy": "taskcluster-wm-aws",
    "Owner": "relops@example.com",
    "ManagedBy": "taskcluster",
    "Name": "proj/Linux_Big",
    "WorkerPoolId": "proj/Linux_Big",
}


@pytest.mark.parametrize(
    ("scenario", "tags", "pool"),
    [
        ("worker-manager's, this provider", EC2, "proj/Linux_Big"),
        ("another provider's", {**EC2, "CreatedBy": "taskcluster-wm-aws2"}, None),
        ("not managed by taskcluster", {**EC2, "ManagedBy": "someone"}, None),
        ("no pool tag", {k: v for k, v in EC2.items() if k != "WorkerPoolId"}, None),
        ("untagged", {}, None),
    ],
)
def test_ec2_tags(scenario, tags, pool):
    assert aws.legacy_pool(tags, "aws") == pool, scenario


def gce_metadata(**changes):
    boot = {"workerPoolId": "proj/linux_big", "providerId": "fxci-level1-gcp", "rootUrl": ROOT}
    return {"taskcluster": json.dumps({**boot, **changes})}


GCE = {
    "created-by": "taskcluster-wm-fxci-level1-gcp",
    "managed-by": "taskcluster",
    "worker-pool-id": "proj-linux-big",
}


@pytest.mark.parametrize(
    ("scenario", "labels", "metadata", "pool"),
    [
        ("worker-manager's, this provider", GCE, gce_metadata(), "proj/linux_big"),
        ("root URL with a trailing slash", GCE, gce_metadata(rootUrl=ROOT + "/"), "proj/linux_big"),
        ("another deployment's", GCE, gce_metadata(rootUrl="https://other.example"), None),
        (
            "another provider's labels",
            {**GCE, "created-by": "taskcluster-wm-x"},
            gce_metadata(),
            None,
        ),
        ("another provider's boot data", GCE, gce_metadata(providerId="x"), None),
        ("no taskcluster item", GCE, {}, None),
        ("a broken taskcluster item", GCE, {"taskcluster": "{"}, None),
        ("not managed by taskcluster", {**GCE, "managed-by": "x"}, gce_metadata(), None),
        ("a pool id that is not a string", GCE, gce_metadata(workerPoolId=7), None),
        ("an empty pool id", GCE, gce_metadata(workerPoolId=""), None),
    ],
)
def test_gce_labels_and_metadata(scenario, labels, metadata, pool):
    assert gcp.legacy_pool(labels, metadata, "fxci-level1-gcp", ROOT) == pool, scenario


def test_a_gce_root_url_configured_with_a_trailing_slash_is_the_same_deployment():
    assert gcp.legacy_pool(GCE, gce_metadata(), "fxci-level1-gcp", ROOT + "/") == "proj/linux_big"


def test_gce_created_by_is_escaped_and_not_lowercased_as_worker_manager_writes_it():
    assert gcp.legacy_created_by("my_Provider.1") == "taskcluster-wm-my-Provider-1"


AZURE = {
    "created-by": "taskcluster-wm-azure2",
    "managed-by": "taskcluster",
    "provider-id": "azure2",
    "worker-group": "eastus",
    "worker-pool-id": "proj/win_2022",
    "root-url": ROOT,
    "owner": "relops@example.com",
    "launch-config-id": "lc-1",
}


@pytest.mark.parametrize(
    ("scenario", "tags", "pool"),
    [
        ("worker-manager's, this provider", AZURE, "proj/win_2022"),
        ("another provider id", {**AZURE, "provider-id": "azure_trusted"}, None),
        ("another creator", {**AZURE, "created-by": "taskcluster-wm-azure_trusted"}, None),
        ("another deployment", {**AZURE, "root-url": "https://other.example"}, None),
        ("not managed by taskcluster", {**AZURE, "managed-by": "x"}, None),
        ("root URL with a trailing slash", {**AZURE, "root-url": ROOT + "/"}, "proj/win_2022"),
    ],
)
def test_azure_tags(scenario, tags, pool):
    assert azure.legacy_pool(tags, "azure2", ROOT) == pool, scenario


def test_an_azure_root_url_configured_with_a_trailing_slash_is_the_same_deployment():
    assert azure.legacy_pool(AZURE, "azure2", ROOT + "/") == "proj/win_2022"


@pytest.mark.parametrize(
    ("tags", "wm_made"),
    [(EC2, False), ({**EC2, TAG_DEPLOYMENT: "prod"}, True), ({}, False)],
)
def test_wms_own_vms_carry_worker_managers_tags_and_wms(tags, wm_made):
    assert made_by_wm(tags) is wm_made


@pytest.mark.parametrize(
    ("pool", "group", "tc_id"),
    [
        ("proj/linux", "us-east-1", "i-0123456789abcdef0"),
        ("gecko-t/t-linux-large", "us-central1-a", "4471532345346346"),
        ("a/b", "eastus", "vm-abcdef"),
    ],
)
def test_the_workerid_inside_an_import_key(pool, group, tc_id):
    assert imported_tc_worker_id(imported_worker_id(pool, group, tc_id)) == tc_id


NOW = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
U, X = WorkerState.RUNNING, WorkerState.STOPPED


def legacy(state=U, worker_id="p/r/i-1") -> CloudInstance:
    return CloudInstance(worker_id, "i-1", "r", state, pool_id="p", legacy=True)


def imported_row() -> WorkerRecord:
    return WorkerRecord(
        worker_id="p/r/i-1",
        pool_id="p",
        worker_group="r",
        provider_id="prov",
        state=U,
        capacity=1,
        launch_config_id="lc",
        created=NOW,
        last_modified=NOW,
        idempotency_token="p/r/i-1",
        cloud_id=None,
        tc_worker_id="i-1",
    )


@pytest.mark.parametrize(
    ("scenario", "instance", "rows", "unadopted", "learns"),
    [
        ("imported: adopted, its cloud id learnt", legacy(), [imported_row()], 0, ["i-1"]),
        ("not imported: reported, not an orphan", legacy(), [], 1, []),
        ("not imported and ended by the cloud: no news", legacy(state=X), [], 0, []),
    ],
)
def test_legacy_vms_in_a_scan(scenario, instance, rows, unadopted, learns):
    found = diff(
        [instance], rows, now=NOW, requires_registration={"p": True}, orphan_grace=timedelta(0)
    )
    assert len(found.unadopted) == unadopted, scenario
    assert found.orphans == (), scenario
    assert [c.cloud_id for c in found.changes] == learns, scenario
