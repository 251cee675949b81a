"""The simulated EC2's cheap answers (issue 28): a DescribeInstances page built from the parts
of moto's earlier answers is byte for byte moto's own answer, and a request's state sync
touches only the instances due to change, with the states they would have had anyway.

The sim's clock is a hand-moved one here, so states change exactly when a test says."""

from __future__ import annotations

import types
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest

import wmsim.aws.ec2 as ec2_module
import wmsim.aws.lifecycle as lifecycle_module
import wmsim.aws.seeding as seeding_module
from wmsim.aws.ec2 import SimEc2
from wmsim.behaviour import Behaviour

REGION = "us-east-1"
BOOT_S, DELETE_S, VISIBLE_S = 10.0, 10.0, 100.0
AUTH = (
    f"AWS4-HMAC-SHA256 Credential=a/20261205/{REGION}/ec2/aws4_request, "
    "SignedHeaders=host, Signature=x"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    # Every module of the sim that reads the clock.
    for module in (ec2_module, lifecycle_module, seeding_module):
        monkeypatch.setattr(module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    return clock


@pytest.fixture
def sim(clock: Clock) -> Iterator[SimEc2]:
    sim = SimEc2(
        Behaviour(boot_s=BOOT_S, delete_s=DELETE_S), seed=1, terminated_visible_s=VISIBLE_S
    ).start()
    try:
        yield sim
    finally:
        sim.stop()


def client(sim: SimEc2) -> Any:
    return boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=sim.endpoint,
        aws_access_key_id="a",
        aws_secret_access_key="b",
    )


def post(sim: SimEc2, params: dict[str, str]) -> bytes:
    body = urlencode({"Action": "DescribeInstances", "Version": "2016-11-15", **params})
    request = urllib.request.Request(
        sim.endpoint,
        data=body.encode(),
        headers={"Authorization": AUTH, "Content-Type": "application/x-www-form-urlencoded"},
    )
    with urllib.request.urlopen(request) as answer:
        return answer.read()


def listings(sim: SimEc2, ids: list[str]) -> list[dict[str, str]]:
    """DescribeInstances requests as wm and the old scanner send them."""
    return [
        {},
        {"MaxResults": "5"},
        {"MaxResults": "5", "NextToken": token_after(sim, 5)},
        {"Filter.1.Name": "tag:pool", "Filter.1.Value.1": "a"},
        {"Filter.1.Name": "instance-state-name", "Filter.1.Value.1": "running"},
        {"InstanceId.1": ids[4]},
        {"InstanceId.1": ids[-1], "InstanceId.2": ids[0], "InstanceId.3": ids[3]},
    ]


def token_after(sim: SimEc2, count: int) -> str:
    first = client(sim).describe_instances(MaxResults=count)
    return first.get("NextToken", "")


def assert_pages_are_motos(sim: SimEc2, ids: list[str]) -> None:
    for params in listings(sim, ids):
        sim.page_cache = True
        cold, warm = post(sim, params), post(sim, params)
        sim.page_cache = False
        motos = post(sim, params)
        sim.page_cache = True
        assert cold == motos, params
        assert warm == motos, params


def test_pages_built_from_parts_are_motos_answers_as_states_move(sim: SimEc2, clock: Clock):
    # Scenario: a spot instance with user data launched through the API, two seeded
    # reservations ten seconds apart (so one is running while the other is still pending: a
    # page mixes kept items with items rendered again), one instance terminated through the API
    # and one stopped out of band; listings compared with moto's own answers at each step.
    ec2 = client(sim)
    launched = ec2.run_instances(
        ImageId="ami-0abcdef1234567890",
        InstanceType="m5.large",
        MinCount=2,
        MaxCount=2,
        UserData='{"rootUrl": "https://tc.example.test"}',
        InstanceMarketOptions={"MarketType": "spot"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "pool", "Value": "a"}]}],
    )
    ids = [i["InstanceId"] for i in launched["Instances"]]
    ids += sim.seed_instances(4, region=REGION, tags={"pool": "a", "empty": ""})
    assert_pages_are_motos(sim, ids)
    clock.now += 5
    ids += sim.seed_instances(3, region=REGION, tags={"pool": "b"})
    assert_pages_are_motos(sim, ids)
    clock.now += 5  # the first six boot; the last three are still pending
    assert_pages_are_motos(sim, ids)
    more = ec2.run_instances(ImageId="ami-0abcdef1234567890", MinCount=1, MaxCount=1)
    ids += [i["InstanceId"] for i in more["Instances"]]
    assert_pages_are_motos(sim, ids)
    ec2.terminate_instances(InstanceIds=[ids[2]])
    sim.kill(ids[3], "maintenance")
    clock.now += 6  # the seeded three boot; the terminated one is shutting down
    assert_pages_are_motos(sim, ids)
    clock.now += DELETE_S
    assert_pages_are_motos(sim, ids)
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
    }
    assert states[ids[2]] == "terminated"
    assert states[ids[3]] == "stopped"
    assert {states[i] for i in ids[4:]} == {"running"}


def test_a_listing_of_kept_parts_asks_moto_nothing(sim: SimEc2, clock: Clock):
    # Scenario: a seeded fleet (rendered as it is seeded) listed a page at a time, twice.
    sim.faults.behaviour.update(boot_s=0.0)
    for _ in range(3):
        sim.seed_instances(20, region=REGION, tags={"pool": "a"})
    calls: list[dict[str, str]] = []
    call_moto = sim._call_moto

    def counted(environ: dict[str, Any], params: dict[str, str]) -> Any:
        calls.append(params)
        return call_moto(environ, params)

    sim._call_moto = counted  # type: ignore[method-assign]
    ec2 = client(sim)
    for _ in range(2):
        pages = ec2.get_paginator("describe_instances").paginate(PaginationConfig={"PageSize": 25})
        assert sum(len(r["Instances"]) for page in pages for r in page["Reservations"]) == 60
    assert calls == []


def test_states_change_at_their_times_and_a_quiet_request_reads_no_fleet(sim: SimEc2, clock: Clock):
    # Scenario: instances boot, one is terminated and drops out of listings after the
    # visible window; between changes a describe or a metadata request goes over no instance.
    ids = sim.seed_instances(3, region=REGION)
    ec2 = client(sim)

    def states() -> dict[str, str]:
        return {
            i["InstanceId"]: i["State"]["Name"]
            for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"]
        }

    assert set(states().values()) == {"pending"}
    read_all = 0
    all_instances = sim._all_instances

    def counted() -> Iterator[tuple[str, Any]]:
        nonlocal read_all
        read_all += 1
        return all_instances()

    sim._all_instances = counted  # type: ignore[method-assign]
    clock.now += BOOT_S - 0.001
    assert set(states().values()) == {"pending"}
    clock.now += 0.001
    assert set(states().values()) == {"running"}
    assert sim.identity_document(ids[0])["instanceId"] == ids[0]
    assert read_all == 0
    ec2.terminate_instances(InstanceIds=[ids[1]])  # a request moto carries out: all read again
    assert read_all > 0
    assert states()[ids[1]] == "shutting-down"
    read_all = 0
    clock.now += DELETE_S
    assert states()[ids[1]] == "terminated"
    clock.now += VISIBLE_S
    assert ids[1] not in states()
    assert read_all == 0
    # A new boot time moves every instance's next change: all are read again.
    sim.faults.behaviour.update(boot_s=100 * BOOT_S)
    assert set(states().values()) == {"pending"}
    assert read_all > 0
