"""wmsim/aws/pages.py: a DescribeInstances answer cut into its parts and put back together is
the same bytes; an answer that is not a page of instances gives no parts."""

from __future__ import annotations

import pytest

from wmsim.aws import pages

HEAD = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15"><reservationSet>'
)
TAIL = b"</reservationSet><requestId>request-id</requestId></DescribeInstancesResponse>"


def reservation(rid: str, *instance_ids: str) -> tuple[bytes, list[bytes], bytes]:
    head = (
        f"<item><reservationId>{rid}</reservationId><ownerId>1</ownerId><groupSet/><instancesSet>"
    )
    items = [
        # Nested items (tags, devices) and a field after them, as moto renders an instance.
        f"<item><tagSet><item><key>k</key><value>&lt;v&gt;</value></item></tagSet>"
        f"<instanceId>{iid}</instanceId><instanceState><code>16</code><name>running</name>"
        f"</instanceState><reason/></item>".encode()
        for iid in instance_ids
    ]
    return head.encode(), items, b"</instancesSet><requesterId>x</requesterId></item>"


@pytest.mark.parametrize(
    "layout",
    [
        {"r-1": ["i-1"]},
        {"r-1": ["i-1", "i-2", "i-3"]},
        {"r-1": ["i-1"], "r-2": ["i-4", "i-5"]},
    ],
)
def test_an_answer_split_and_joined_is_the_same_bytes(layout: dict[str, list[str]]):
    reservations = [reservation(rid, *ids) for rid, ids in layout.items()]
    body = pages.join_page(HEAD, TAIL, reservations)
    parts = pages.split_page(body)
    assert parts is not None
    assert (parts.head, parts.tail) == (HEAD, TAIL)
    assert {r.reservation_id: [iid for iid, _ in r.instances] for r in parts.reservations} == layout
    rebuilt = [(r.head, [item for _, item in r.instances], r.tail) for r in parts.reservations]
    assert rebuilt == reservations
    assert pages.join_page(parts.head, parts.tail, rebuilt) == body


@pytest.mark.parametrize(
    "body",
    [
        HEAD.replace(b"<reservationSet>", b"<reservationSet/>") + TAIL.split(b">", 1)[1],  # empty
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>Throttling'
        b"</Code></Error></Errors><RequestID>x</RequestID></Response>",  # an error
        pages.join_page(HEAD, TAIL, [reservation("r-1", "i-1")])[:-10],  # cut short
        HEAD + b"<item><reservationId>r-1</reservationId><instancesSet/></item>" + TAIL,
        HEAD
        + b"<item><reservationId>r-1</reservationId><instancesSet><item><reason/></item>"
        + b"</instancesSet></item>"
        + TAIL,  # an instance without its id
    ],
)
def test_what_is_not_a_page_of_instances_has_no_parts(body):
    assert pages.split_page(body) is None
