"""wm's EC2 clients read DescribeInstances answers for the fields wm reads
(wm/providers/aws/listing.py): on the simulated EC2's answers, through boto3, every one of
those fields is what botocore's own parse of the same answer holds."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore import parsers

from tests.fixtures.sim_ec2 import EC2_REGION
from wm.providers.aws.listing import describe_instances
from wmsim.aws.ec2 import SimEc2

# What wm reads of an instance (provider.py): top-level keys, and keys of structures.
READ = ("InstanceId", "ImageId", "InstanceType", "PrivateIpAddress", "InstanceLifecycle")
READ += ("AmiLaunchIndex", "LaunchTime", "Tags")
READ_NESTED = {
    "State": ("Name", "Code"),
    "StateReason": ("Code", "Message"),
    "Placement": ("AvailabilityZone",),
}


def read_by_wm(parsed: dict[str, Any]) -> list[Any]:
    return [
        (
            reservation.get("OwnerId"),
            reservation.get("ReservationId"),
            [
                {
                    **{k: raw[k] for k in READ if k in raw},
                    **{
                        k: {f: raw[k][f] for f in fields if f in raw[k]}
                        for k, fields in READ_NESTED.items()
                        if k in raw
                    },
                }
                for raw in reservation["Instances"]
            ],
        )
        for reservation in parsed["Reservations"]
    ]


def launch_times(parsed: dict[str, Any]) -> list[str]:
    return [repr(i["LaunchTime"]) for r in parsed["Reservations"] for i in r["Instances"]]


@pytest.mark.parametrize(
    "launch_time",
    [
        "2026-03-02T09:14:27.000Z",
        "2026-03-02T09:14:27Z",
        "2026-03-02T09:14:27.123456Z",
        "2026-03-02T09:14:27.1234567Z",  # not EC2's form: botocore's parser
        "2026-03-02T09:14:27+02:00",  # nor this
    ],
)
def test_a_launch_time_reads_as_botocore_reads_it(launch_time: str):
    # Scenario: an answer whose instances were launched at these times, the first of EC2's form.
    items = "".join(
        f"<item><instanceId>i-{n}</instanceId><launchTime>{value}</launchTime></item>"
        for n, value in enumerate(["2026-01-01T00:00:00.000Z", launch_time])
    )
    body = (
        '<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        "<requestId>r</requestId><reservationSet><item><reservationId>r-1</reservationId>"
        f"<instancesSet>{items}</instancesSet></item></reservationSet>"
        "</DescribeInstancesResponse>"
    ).encode()

    lean = describe_instances(body, parsers.DEFAULT_TIMESTAMP_PARSER)

    # Outcome: each time what botocore's parser makes of it, time zone included.
    assert launch_times(lean) == [
        repr(parsers.DEFAULT_TIMESTAMP_PARSER(t)) for t in ["2026-01-01T00:00:00.000Z", launch_time]
    ]


def test_a_lean_describe_instances_holds_what_botocore_parses(sim_ec2: SimEc2):
    # Scenario: instances in two reservations, tagged (an empty value too), one stopped by the cloud
    # with a reason, one terminating; listed a page at a time (a page token on the first).
    tags = {"wm-deployment": "d", "wm-worker": "w-1", "wm-pool": "p/q", "empty": ""}
    ids = sim_ec2.seed_instances(4, region=EC2_REGION, tags=tags)
    ids += sim_ec2.seed_instances(2, region=EC2_REGION, tags={"only": "one"})
    sim_ec2.kill(ids[1], "preempted")
    client = boto3.client(
        "ec2",
        region_name=EC2_REGION,
        endpoint_url=sim_ec2.endpoint,
        aws_access_key_id="a",
        aws_secret_access_key="b",
    )
    client.terminate_instances(InstanceIds=[ids[4]])
    answers: list[dict[str, Any]] = []
    client.meta.events.register(
        "before-parse.ec2.DescribeInstances",
        lambda response_dict, **_: answers.append(dict(response_dict)),
    )
    shape = client.meta.service_model.operation_model("DescribeInstances").output_shape

    first = client.describe_instances(MaxResults=5)
    client.describe_instances(MaxResults=5, NextToken=first["NextToken"])

    # Outcome: the same fields, values and types, the page token and request id included.
    for answer in answers:
        full = parsers.create_parser("ec2").parse(answer, shape)
        lean = describe_instances(answer["body"], parsers.DEFAULT_TIMESTAMP_PARSER)
        assert read_by_wm(lean) == read_by_wm(full)
        # Times equal in their time zone too (datetimes compare equal across zones).
        assert launch_times(lean) == launch_times(full)
        assert lean.get("NextToken") == full.get("NextToken")
        assert lean["ResponseMetadata"]["RequestId"] == full["ResponseMetadata"]["RequestId"]
    listed = [
        i
        for a in answers
        for r in describe_instances(a["body"], str)["Reservations"]
        for i in r["Instances"]
    ]
    assert sorted(i["InstanceId"] for i in listed) == sorted(ids)
    assert {i["State"]["Name"] for i in listed} >= {"stopped", "running"}
