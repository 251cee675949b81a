"""The AWS provider against the simulated EC2, through the real boto3.

Every call below is a real HTTP request from botocore to wmsim.aws.ec2 (moto behind wm's
middleware) on 127.0.0.1; nothing is patched. Request counts come from the simulation's own
counter.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import time
import urllib.request
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.sim_ec2 import (
    EC2_DEPLOYMENT,
    EC2_OTHER_REGION,
    EC2_REGION,
    EC2_ROOT_URL,
    AwsProviderFactory,
    aws_config,
)
from wm.errors import ON_DEMAND, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec, WorkerRef, WorkerState
from wm.providers.aws.errors import classify, error_scope
from wm.providers.aws.provider import AwsProvider, make
from wm.providers.base import (
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    LaunchBatch,
    LaunchIntent,
    LaunchResult,
)
from wmsim.aws.ec2 import SimEc2, serve
from wmsim.aws.moto_models import KNOWN_IMAGES
from wmsim.aws.run_instances import example_launch_config
from wmsim.config import SimCloudConfig
from wmsim.wsgi import ServerThread

POOL = "proj-ci/linux-large"
OWNER = "ci-team@example.com"
LAUNCH_CONFIG = "lc-0123456789abcdef"
IMAGE = "ami-0abcdef1234567890"


def spec(*, region: str = EC2_REGION, spot: bool = False, **worker_config: Any) -> LaunchSpec:
    return LaunchSpec(
        launch_config_id=LAUNCH_CONFIG,
        region=region,
        capacity_per_worker=1,
        launch_config=example_launch_config(
            region,
            image_id=IMAGE,
            spot=spot,
            launch_config_id=LAUNCH_CONFIG,
            worker_config=worker_config,
        ),
        worker_config=worker_config,
        pool_owner=OWNER,
    )


def batch(count: int, *, token: str = "batch-1", **spec_args: Any) -> LaunchBatch:
    intents = tuple(LaunchIntent(f"{token}-w{i}", f"{token}-t{i}") for i in range(count))
    return LaunchBatch(pool_id=POOL, spec=spec(**spec_args), intents=intents, batch_token=token)


def refs(launched: LaunchBatch, results: list[LaunchResult]) -> list[WorkerRef]:
    return [
        WorkerRef(
            worker_id=r.worker_id,
            region=launched.spec.region,
            cloud_id=r.cloud_id,
            batch_token=launched.batch_token,
            launch_index=r.launch_index,
        )
        for r in results
    ]


def raw_ec2(endpoint: str, region: str = EC2_REGION) -> Any:
    """A plain boto3 client, as a user of `wm sim serve` would type it."""
    return boto3.client(
        "ec2",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1}),
    )


def control(sim: SimEc2, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        sim.endpoint + path, data=data, method="POST" if data is not None else "GET"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_a_new_provider_has_its_regions_clients_ready_and_has_sent_nothing(
    sim_ec2: SimEc2, aws_provider_factory: AwsProviderFactory
):
    # Scenario: a process builds its provider at start, before any pass has demand.
    provider = aws_provider_factory()

    # Outcome: botocore's client and operation models of each configured region are made (a
    # first create does not wait for them), and the cloud has not been called.
    assert sorted(provider._clients) == sorted((EC2_REGION, EC2_OTHER_REGION))
    assert sim_ec2.faults.counts() == {}
    assert sim_ec2.launch_requests() == []


def test_a_started_sim_holds_nothing_of_its_warm_up(sim_ec2: SimEc2, aws_provider: AwsProvider):
    # Scenario: the sim answered a listing and a launch of its own as it started.
    # Outcome: no instance, launch request, call count or public AMI is left of them.
    assert sim_ec2.instances() == []
    assert sim_ec2.launch_requests() == []
    assert sim_ec2.faults.counts() == {}
    assert aws_provider.list_instances(EC2_REGION) == []
    images = aws_provider._client(EC2_REGION).describe_images()["Images"]
    assert sorted(i["ImageId"] for i in images) == sorted(KNOWN_IMAGES)


def test_a_batch_is_launched_with_one_call_and_listed_back_across_pages(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    # Scenario: seven workers of one launch config; the cloud hands out pages of three.
    sim_ec2.faults.behaviour.update(page_size_max=3)
    launched = batch(7)

    results = aws_provider.create(launched)
    listed = aws_provider.list_instances(EC2_REGION)

    assert [r.error for r in results] == [None] * 7
    assert [r.launch_index for r in results] == list(range(7))
    assert sim_ec2.faults.counts()["RunInstances"] == 1  # one call for the whole batch
    # No look-up before launching (ClientToken makes the launch safe to repeat), then
    # ceil(7 / 3) pages for the list.
    assert sim_ec2.faults.counts()["DescribeInstances"] == 3
    by_id = {i.cloud_id: i for i in listed}
    assert sorted(by_id) == sorted(r.cloud_id for r in results)
    for result in results:
        instance = by_id[result.cloud_id]
        assert instance.worker_id is None  # EC2 has a batch tag, not a tag per worker
        assert (instance.batch_token, instance.launch_index) == ("batch-1", result.launch_index)
        assert instance.pool_id == POOL
        assert instance.launch_config_id == LAUNCH_CONFIG
        assert instance.region == EC2_REGION
        assert instance.state is WorkerState.RUNNING  # boot_s = 0
        assert instance.launched_at is not None
        assert instance.provider_data["instance_type"] == "m5.large"
        assert instance.provider_data["image_id"] == IMAGE
        assert instance.provider_data["availability_zone"].startswith(EC2_REGION)


def test_a_batch_of_one_also_carries_its_worker_tag(aws_provider: AwsProvider):
    # Scenario: a batch of a single worker: the call's tags can name that worker.
    results = aws_provider.create(batch(1, token="solo"))

    [instance] = aws_provider.list_instances(EC2_REGION)

    assert instance.cloud_id == results[0].cloud_id
    assert instance.worker_id == "solo-w0"


def test_instances_boot_then_terminate_through_stopping_to_gone(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    # Scenario: instances take an hour to boot and an hour to delete. The simulated cloud reads
    # these times whenever it is asked, so shortening them later moves the clock on for every
    # instance without the test racing a timer.
    behaviour = sim_ec2.faults.behaviour
    behaviour.update(boot_s=3600, delete_s=3600)
    launched = batch(2)
    results = aws_provider.create(launched)

    # Pending at first: still `requested` for wm.
    assert {i.state for i in aws_provider.list_instances(EC2_REGION)} == {WorkerState.REQUESTED}
    behaviour.update(boot_s=0)
    assert {i.state for i in aws_provider.list_instances(EC2_REGION)} == {WorkerState.RUNNING}

    # Action: terminate. The cloud says shutting-down: not gone yet.
    first = aws_provider.terminate(refs(launched, results))
    assert [t.gone for t in first] == [False, False]
    assert {i.state for i in aws_provider.list_instances(EC2_REGION)} == {WorkerState.STOPPING}
    assert {vm.state for vm in sim_ec2.instances()} == {"stopping"}

    behaviour.update(delete_s=0)
    # Terminating again costs only a look-up: the cloud already shows them terminated.
    second = aws_provider.terminate(refs(launched, results))
    assert [(t.gone, t.error) for t in second] == [(True, None), (True, None)]
    assert sim_ec2.faults.counts()["TerminateInstances"] == 1
    listed = aws_provider.list_instances(EC2_REGION)
    assert {(i.state, i.reason) for i in listed} == {
        (WorkerState.STOPPED, "Client.UserInitiatedShutdown")
    }
    assert {vm.state for vm in sim_ec2.instances()} == {"gone"}


def test_lookup_finds_workers_by_id_or_batch_slot_and_leaves_missing_ones_out(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    launched = batch(3)
    results = aws_provider.create(launched)
    sim_ec2.faults.reset_counts()
    asked = [
        WorkerRef("by-id", EC2_REGION, cloud_id=results[0].cloud_id),
        # An intent whose create never returned: found by its batch tag and launch index.
        WorkerRef("by-slot", EC2_REGION, batch_token="batch-1", launch_index=2),
        WorkerRef("missing-id", EC2_REGION, cloud_id="i-0123456789abcdef0"),
        WorkerRef("missing-batch", EC2_REGION, batch_token="never-launched", launch_index=0),
    ]

    found = aws_provider.lookup(asked)

    assert sorted(found) == ["by-id", "by-slot"]
    assert found["by-id"].cloud_id == results[0].cloud_id
    assert found["by-slot"].cloud_id == results[2].cloud_id
    assert found["by-slot"].launch_index == 2
    # One call for the ids (a filter, so the missing id does not fail it), one for the batches.
    assert sim_ec2.faults.counts() == {"DescribeInstances": 2}


def test_listing_costs_one_call_per_page_at_the_largest_page_size(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    # Scenario: 2,000 workers in one region (seeded in-process, no API call). The sim refuses
    # MaxResults above EC2's maximum of 1,000, so two calls prove the provider asks for it.
    count = 2000
    sim_ec2.seed_instances(count, tags={TAG_DEPLOYMENT: EC2_DEPLOYMENT, TAG_POOL: POOL})

    listed = aws_provider.list_instances(EC2_REGION)

    assert len({i.cloud_id for i in listed}) == count
    assert sim_ec2.faults.counts() == {"DescribeInstances": math.ceil(count / 1000)}


def test_a_repeated_create_returns_the_same_instances_without_a_second_launch(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    # Scenario: the same batch is created again (a RunInstances whose answer was lost, sent
    # again): its ClientToken is the first call's, so EC2 answers with the first launch.
    launched = batch(3)
    first = aws_provider.create(launched)

    again = aws_provider.create(launched)

    assert [(r.worker_id, r.cloud_id, r.launch_index) for r in again] == [
        (r.worker_id, r.cloud_id, r.launch_index) for r in first
    ]
    assert sim_ec2.faults.counts() == {"RunInstances": 2}  # no look-up: the token is enough
    assert len(sim_ec2.instances()) == 3


def test_other_deployments_and_untagged_instances_are_never_seen_or_touched(
    sim_ec2: SimEc2, aws_provider: AwsProvider, aws_provider_factory: AwsProviderFactory
):
    other = aws_provider_factory(deployment_id="other-deploy")
    [theirs] = other.create(batch(1, token="theirs"))
    untagged = raw_ec2(sim_ec2.endpoint).run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1)
    untagged_id = untagged["Instances"][0]["InstanceId"]
    [ours] = aws_provider.create(batch(1, token="ours"))
    foreign = [
        WorkerRef("theirs-w0", EC2_REGION, cloud_id=theirs.cloud_id),
        WorkerRef("theirs-by-batch", EC2_REGION, batch_token="theirs", launch_index=0),
        WorkerRef("untagged", EC2_REGION, cloud_id=untagged_id),
    ]

    listed = aws_provider.list_instances(EC2_REGION)
    found = aws_provider.lookup(foreign)
    terminated = aws_provider.terminate(foreign)

    assert [i.cloud_id for i in listed] == [ours.cloud_id]
    assert found == {}
    # Nothing of this deployment is there, so nothing is left to delete; nothing was asked.
    assert [t.gone for t in terminated] == [True, True, True]
    assert "TerminateInstances" not in sim_ec2.faults.counts()
    states = {vm.cloud_id: vm.state for vm in sim_ec2.instances()}
    assert states[theirs.cloud_id] == states[untagged_id] == "running"


def test_a_throttling_burst_is_absorbed_by_the_gate_with_backoff(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    aws_provider.create(batch(2))
    sim_ec2.faults.reset_counts()
    # Scenario: the next three requests are throttled (HTTP 503 RequestLimitExceeded).
    sim_ec2.queue_outcomes("throttle", "throttle", "throttle")

    listed = aws_provider.list_instances(EC2_REGION)

    assert len(listed) == 2
    assert sim_ec2.faults.counts() == {"DescribeInstances": 4}  # three refused, then served
    assert aws_provider.gate.attempts["DescribeInstances"] == 4
    assert not aws_provider.gate.paused


def test_throttling_past_the_attempt_budget_raises_a_throttled_error(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    sim_ec2.faults.behaviour.update(throttle_rate=1.0)

    with pytest.raises(CloudError) as raised:
        aws_provider.list_instances(EC2_REGION)

    assert raised.value.category is ErrorCategory.THROTTLED
    assert raised.value.code == "RequestLimitExceeded"
    assert sim_ec2.faults.counts() == {"DescribeInstances": 4}  # the gate's max_attempts


def test_a_5xx_storm_pauses_this_provider_and_leaves_another_alone(
    sim_ec2: SimEc2,
    aws_provider: AwsProvider,
    aws_provider_factory: AwsProviderFactory,
    caplog: pytest.LogCaptureFixture,
):
    healthy_sim = SimEc2().start()
    try:
        healthy = aws_provider_factory(healthy_sim.endpoint, provider_id="aws-healthy")
        # Scenario: every EC2 request of the first sim answers 500/503.
        sim_ec2.faults.behaviour.update(failure_rate=1.0)

        with caplog.at_level(logging.WARNING, logger="wm"):
            with pytest.raises(CloudError) as storm:
                aws_provider.list_instances(EC2_REGION)
            with pytest.raises(CloudError) as paused:
                aws_provider.list_instances(EC2_REGION)

        assert storm.value.category is ErrorCategory.TRANSIENT
        assert storm.value.code in {"InternalError", "Unavailable"}
        assert paused.value.category is ErrorCategory.PAUSED
        # The paused call never reached the cloud.
        assert sim_ec2.faults.counts() == {"DescribeInstances": 4}
        events = [r for r in caplog.records if getattr(r, "wm_event", "") == "cloud-api-paused"]
        assert [e.wm_fields["provider"] for e in events] == ["aws-test"]
        # Another provider (its own gate, its own cloud) is unaffected.
        assert healthy.list_instances(EC2_REGION) == []
        assert healthy.create(batch(1))[0].error is None

        # When the pause is over and the cloud has recovered, calls go through again.
        sim_ec2.faults.behaviour.update(failure_rate=0.0)
        while aws_provider.gate.paused:  # the pause runs out on its own clock
            time.sleep(0.05)
        assert aws_provider.list_instances(EC2_REGION) == []
    finally:
        healthy_sim.stop()


def test_quota_errors_come_back_as_data(sim_ec2: SimEc2, aws_provider: AwsProvider):
    # Scenario: the account may run two instances.
    sim_ec2.faults.behaviour.update(quota_instances=2)

    # Three asked: EC2 launches the two that fit (MinCount=1); the third gets a quota error.
    partial = aws_provider.create(batch(3, token="first"))
    # Full: the whole batch is refused with EC2's InstanceLimitExceeded.
    second = batch(2, token="second")
    refused = aws_provider.create(second)

    assert [r.cloud_id is not None for r in partial] == [True, True, False]
    assert partial[2].error is not None
    assert (partial[2].error.category, partial[2].error.code) == (
        ErrorCategory.QUOTA,
        "PartialLaunch",
    )
    assert [(r.cloud_id, r.error.category, r.error.code) for r in refused if r.error] == [
        (None, ErrorCategory.QUOTA, "InstanceLimitExceeded")
    ] * 2
    assert len(sim_ec2.instances()) == 2
    # EC2's limit holds for the type's vCPU bucket in the region, as the real one's does.
    error = refused[0].error
    assert error is not None
    assert error_scope(error.code, error.message, second.spec) == ErrorScope(
        ErrorCategory.QUOTA, EC2_REGION, family="Standard", market=ON_DEMAND
    )


def test_an_out_of_band_kill_shows_as_stopped_with_the_clouds_reason(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    [spot] = aws_provider.create(batch(1, token="spot", spot=True))
    [on_demand] = aws_provider.create(batch(1, token="on-demand"))

    # Scenario: EC2 reclaims the spot instance; the on-demand one fails underneath.
    sim_ec2.kill(spot.cloud_id)
    sim_ec2.kill(on_demand.cloud_id)
    listed = {i.cloud_id: i for i in aws_provider.list_instances(EC2_REGION)}

    assert listed[spot.cloud_id].state is WorkerState.STOPPED
    assert listed[spot.cloud_id].reason == "Server.SpotInstanceTermination"
    assert listed[spot.cloud_id].provider_data["spot"] is True
    assert listed[spot.cloud_id].provider_data["ec2_state"] == "terminated"
    assert listed[on_demand.cloud_id].state is WorkerState.STOPPED
    assert listed[on_demand.cloud_id].reason == "Server.InternalError"
    assert listed[on_demand.cloud_id].provider_data["ec2_state"] == "stopped"

    # A stopped instance still exists (and bills its volume): terminate really deletes it.
    done = aws_provider.terminate(
        [
            WorkerRef("spot-w0", EC2_REGION, cloud_id=spot.cloud_id),
            WorkerRef("on-demand-w0", EC2_REGION, cloud_id=on_demand.cloud_id),
        ]
    )
    assert [t.gone for t in done] == [True, False]
    assert sim_ec2.faults.counts()["TerminateInstances"] == 1


def test_a_removed_instance_is_gone_for_lookup_and_terminate(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    launched = batch(2)
    results = aws_provider.create(launched)
    # Scenario: someone deleted the first instance by hand long ago.
    sim_ec2.remove(results[0].cloud_id)

    listed = aws_provider.list_instances(EC2_REGION)
    found = aws_provider.lookup(refs(launched, results))
    done = aws_provider.terminate(refs(launched, results))

    assert [i.cloud_id for i in listed] == [results[1].cloud_id]
    assert list(found) == [results[1].worker_id]
    assert [(t.gone, t.error) for t in done] == [(True, None), (False, None)]


def test_a_protected_instance_does_not_keep_the_others_from_terminating(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    launched = batch(3)
    results = aws_provider.create(launched)
    raw_ec2(sim_ec2.endpoint).modify_instance_attribute(
        InstanceId=results[1].cloud_id, DisableApiTermination={"Value": True}
    )

    done = aws_provider.terminate(refs(launched, results))

    assert [t.error is None for t in done] == [True, False, True]
    assert done[1].error is not None
    assert done[1].error.category is ErrorCategory.BAD_CONFIG
    assert done[1].error.code == "OperationNotPermitted"
    states = {vm.cloud_id: vm.state for vm in sim_ec2.instances()}
    assert [states[r.cloud_id] for r in results] == ["gone", "running", "gone"]


def test_spot_tags_and_taskclusters_user_data_reach_the_cloud(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    [result] = aws_provider.create(batch(1, token="spot", spot=True, queue="linux-large"))
    ec2 = raw_ec2(sim_ec2.endpoint)

    described = ec2.describe_instances(InstanceIds=[result.cloud_id])
    [instance] = described["Reservations"][0]["Instances"]
    user_data = ec2.describe_instance_attribute(InstanceId=result.cloud_id, Attribute="userData")
    volumes = ec2.describe_volumes(
        Filters=[{"Name": f"tag:{TAG_DEPLOYMENT}", "Values": [EC2_DEPLOYMENT]}]
    )["Volumes"]

    assert instance["InstanceLifecycle"] == "spot"
    # Exactly what worker-manager writes (aws.js); worker-runner reads it from IMDS user-data.
    assert json.loads(base64.b64decode(user_data["UserData"]["Value"])) == {
        "rootUrl": EC2_ROOT_URL,
        "workerPoolId": POOL,
        "providerId": aws_provider.id,
        "workerGroup": EC2_REGION,
        "launchConfigId": LAUNCH_CONFIG,
        "workerConfig": {"queue": "linux-large"},
    }
    # Its workerId is the instance id (from the identity document), named on the result.
    assert result.tc_worker_id == result.cloud_id == instance["InstanceId"]
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert {k: tags[k] for k in ("CreatedBy", "Owner", "ManagedBy", "Name", "WorkerPoolId")} == {
        "CreatedBy": f"taskcluster-wm-{aws_provider.id}",
        "Owner": OWNER,
        "ManagedBy": "taskcluster",
        "Name": POOL,
        "WorkerPoolId": POOL,
    }
    ours = (TAG_DEPLOYMENT, TAG_PROVIDER, TAG_POOL, TAG_LAUNCH_CONFIG, TAG_BATCH)
    assert {k: tags[k] for k in ours} == {
        TAG_DEPLOYMENT: EC2_DEPLOYMENT,
        TAG_PROVIDER: aws_provider.id,
        TAG_POOL: POOL,
        TAG_LAUNCH_CONFIG: LAUNCH_CONFIG,
        TAG_BATCH: "spot",
    }
    assert [v["Attachments"][0]["InstanceId"] for v in volumes] == [result.cloud_id]


def test_each_region_is_its_own_scan_unit(aws_provider: AwsProvider):
    [result] = aws_provider.create(batch(1, region=EC2_OTHER_REGION))

    assert aws_provider.list_instances(EC2_REGION) == []
    [instance] = aws_provider.list_instances(EC2_OTHER_REGION)
    assert (instance.cloud_id, instance.region) == (result.cloud_id, EC2_OTHER_REGION)


def test_a_raw_sdk_call_against_the_sim_works(sim_ec2: SimEc2):
    # What a user of `wm sim serve` would type:
    ec2 = boto3.client(
        "ec2",
        endpoint_url=sim_ec2.endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )

    launched = ec2.run_instances(ImageId=IMAGE, MinCount=2, MaxCount=2)
    described = ec2.describe_instances()

    ids = sorted(i["InstanceId"] for i in launched["Instances"])
    assert sorted(i["InstanceId"] for r in described["Reservations"] for i in r["Instances"]) == ids
    assert sim_ec2.faults.counts() == {"RunInstances": 1, "DescribeInstances": 1}


def test_the_control_endpoints_drive_the_sim_from_another_process(sim_ec2: SimEc2):
    ec2 = raw_ec2(sim_ec2.endpoint)
    first, second = (
        i["InstanceId"]
        for i in ec2.run_instances(ImageId=IMAGE, MinCount=2, MaxCount=2)["Instances"]
    )

    assert control(sim_ec2, "/_sim/requests") == {"RunInstances": 1}
    assert control(sim_ec2, "/_sim/behaviour", {"page_size_max": 1})["page_size_max"] == 1
    control(sim_ec2, "/_sim/kill", {"id": first, "reason": "preempted"})
    control(sim_ec2, "/_sim/remove", {"id": second})
    vms = control(sim_ec2, "/_sim/instances")
    assert [(vm["cloud_id"], vm["state"]) for vm in vms] == [(first, "stopped")]
    # Control requests are neither counted nor faulted.
    assert control(sim_ec2, "/_sim/requests") == {"RunInstances": 1}

    control(sim_ec2, "/_sim/outcomes", {"outcomes": ["throttle"]})
    with pytest.raises(ClientError) as throttled:
        ec2.describe_instances()
    assert throttled.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503

    control(sim_ec2, "/_sim/reset", {})
    assert control(sim_ec2, "/_sim/instances") == []
    assert control(sim_ec2, "/_sim/requests") == {}
    assert sim_ec2.faults.behaviour.page_size_max is None


def test_moto_api_reset_resets_only_this_sim(sim_ec2: SimEc2):
    other = SimEc2().start()
    try:
        raw_ec2(sim_ec2.endpoint).run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1)
        raw_ec2(other.endpoint).run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1)

        request = urllib.request.Request(sim_ec2.endpoint + "/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=5).close()

        assert sim_ec2.instances() == []
        assert len(other.instances()) == 1
    finally:
        other.stop()


def test_a_throttle_with_retry_after_is_classified_with_its_delay(sim_ec2: SimEc2):
    sim_ec2.faults.behaviour.update(throttle_rate=1.0, retry_after_s=2)

    with pytest.raises(ClientError) as raised:
        raw_ec2(sim_ec2.endpoint).describe_instances()
    error = classify("aws-test", raised.value)

    assert (error.category, error.code, error.retry_after_s) == (
        ErrorCategory.THROTTLED,
        "RequestLimitExceeded",
        2.0,
    )


def test_a_bad_endpoint_is_a_transient_error_without_credentials_in_it(sim_ec2: SimEc2):
    endpoint = sim_ec2.endpoint
    sim_ec2.stop()  # nothing listens there any more
    provider = make(aws_config(endpoint), EC2_DEPLOYMENT)
    try:
        with pytest.raises(CloudError) as raised:
            provider.list_instances(EC2_REGION)
    finally:
        provider.close()

    assert raised.value.category is ErrorCategory.TRANSIENT
    assert raised.value.code == "EndpointConnectionError"
    assert "AKIA" not in str(raised.value) and "secret" not in str(raised.value)


def test_the_provider_never_asks_the_instance_metadata_service(
    sim_ec2: SimEc2, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
):
    # Scenario: no keys anywhere in the environment, and the metadata service "exists" (a
    # local stand-in that counts requests), so any credential discovery would reach it.
    hits: list[str] = []

    def metadata_service(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        hits.append(environ["PATH_INFO"])
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]

    imds = ServerThread(metadata_service).start()
    try:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED", raising=False)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.base_url)
        provider = make(aws_config(sim_ec2.endpoint), EC2_DEPLOYMENT)
        try:
            provider.create(batch(1))
            assert len(provider.list_instances(EC2_REGION)) == 1
        finally:
            provider.close()
        assert hits == []

        # The stand-in does see a credential chain that goes looking (the control case).
        boto3.session.Session().get_credentials()
        assert hits
    finally:
        imds.stop()


def test_serve_starts_the_sim_with_the_configured_behaviour(tmp_path: Any):
    sim = serve(SimCloudConfig(page_size_max=2, boot_s=5.0), tmp_path)
    try:
        ec2 = raw_ec2(sim.endpoint)
        ec2.run_instances(ImageId=IMAGE, MinCount=3, MaxCount=3)
        page = ec2.describe_instances(MaxResults=5)

        assert [i["State"]["Name"] for i in page["Reservations"][0]["Instances"]] == ["pending"] * 2
        assert "NextToken" in page
    finally:
        sim.stop()
