"""DescribeInstances answers read for the fields wm reads, not for the whole model.

botocore parses an EC2 answer into the whole DescribeInstances model: about 3 KB of XML and a
hundred elements an instance, walked in Python shape by shape, some 0.66 ms of CPU an instance
(bench/README.md, "scan"): most of a scan's CPU. wm reads a dozen fields of it (provider.py:
`cloud_instance`, `_identity`, `_tags`, the look-ups and deletions). `LeanParsers` gives wm's
EC2 clients a parser that reads a DescribeInstances answer with expat, keeping those fields in
the keys and types botocore gives them (timestamps by botocore's own parser); every other
answer, and every error, is botocore's own parse.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any
from xml.parsers import expat

from botocore.parsers import DEFAULT_TIMESTAMP_PARSER, EC2QueryParser, ResponseParserFactory

LEAN_SHAPE = "DescribeInstancesResult"

_TEXT: Callable[[str], Any] = str
# An instance's own elements wm reads -> (botocore's key, conversion); "time": a timestamp.
_INSTANCE: dict[str, tuple[str, Any]] = {
    "instanceId": ("InstanceId", _TEXT),
    "imageId": ("ImageId", _TEXT),
    "instanceType": ("InstanceType", _TEXT),
    "privateIpAddress": ("PrivateIpAddress", _TEXT),
    "instanceLifecycle": ("InstanceLifecycle", _TEXT),
    "amiLaunchIndex": ("AmiLaunchIndex", int),
    "launchTime": ("LaunchTime", "time"),
}
# Structures of an instance wm reads -> (botocore's key, {element: (key, conversion)}).
_NESTED: dict[str, tuple[str, dict[str, tuple[str, Any]]]] = {
    "instanceState": ("State", {"name": ("Name", _TEXT), "code": ("Code", int)}),
    "stateReason": ("StateReason", {"code": ("Code", _TEXT), "message": ("Message", _TEXT)}),
    "placement": ("Placement", {"availabilityZone": ("AvailabilityZone", _TEXT)}),
}
_RESERVATION = {"reservationId": "ReservationId", "ownerId": "OwnerId"}
# EC2's launch times: UTC, to the second or the millisecond ("2026-03-02T09:14:27.000Z").
_ZULU = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3}|\.\d{6})?Z")


class _LeanEc2Parser(EC2QueryParser):
    def _do_parse(self, response: dict[str, Any], shape: Any) -> dict[str, Any]:
        if shape is not None and shape.name == LEAN_SHAPE:
            return describe_instances(response["body"], self._timestamp_parser)
        return super()._do_parse(response, shape)


class LeanParsers(ResponseParserFactory):
    """botocore's parsers, but the lean one for EC2's DescribeInstances answers."""

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "ec2":
            return _LeanEc2Parser(**self._defaults)
        return super().create_parser(protocol_name)


def describe_instances(body: bytes, timestamp: Callable[[str], Any]) -> dict[str, Any]:
    """A DescribeInstances answer's reservations, instances and page token, with the fields
    wm reads, as botocore's dict has them."""
    reservations: list[dict[str, Any]] = []
    result: dict[str, Any] = {"Reservations": reservations}
    stack: list[str] = []
    text: list[str] = []
    # The reservation, instance and tag being read.
    current: dict[str, Any] = {}
    parse_time = _times(timestamp)

    def start(name: str, _attrs: Any) -> None:
        stack.append(name)
        text.clear()
        depth = len(stack)
        if name != "item":
            return
        if depth == 3 and stack[1] == "reservationSet":
            current["reservation"] = {"Instances": []}
        elif depth == 5 and stack[3] == "instancesSet":
            current["instance"] = {}
        elif depth == 7 and stack[5] == "tagSet":
            current["tag"] = {}

    def end(name: str) -> None:
        depth = len(stack)
        value = "".join(text)
        text.clear()
        if depth >= 6 and stack[3] == "instancesSet":
            instance = current["instance"]
            if depth == 6:
                if name in _INSTANCE:
                    key, convert = _INSTANCE[name]
                    instance[key] = parse_time(value) if convert == "time" else convert(value)
                elif name == "tagSet":
                    instance.setdefault("Tags", [])
            elif depth == 7 and stack[5] in _NESTED:
                key, fields = _NESTED[stack[5]]
                if name in fields:
                    field, convert = fields[name]
                    instance.setdefault(key, {})[field] = convert(value)
            elif depth == 7 and stack[5] == "tagSet" and name == "item":
                instance.setdefault("Tags", []).append(current["tag"])
            elif depth == 8 and stack[5] == "tagSet" and name in ("key", "value"):
                current["tag"][name.capitalize()] = value
        elif depth == 5 and name == "item" and stack[3] == "instancesSet":
            current["reservation"]["Instances"].append(current["instance"])
        elif depth == 4 and stack[1] == "reservationSet" and name in _RESERVATION:
            current["reservation"][_RESERVATION[name]] = value
        elif depth == 3 and name == "item" and stack[1] == "reservationSet":
            reservations.append(current["reservation"])
        elif depth == 2 and name == "nextToken" and value:
            result["NextToken"] = value
        elif depth == 2 and name == "requestId":
            result["ResponseMetadata"] = {"RequestId": value}
        stack.pop()

    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text.append
    parser.Parse(body, True)
    return result


def _times(timestamp: Callable[[str], Any]) -> Callable[[str], Any]:
    """botocore's timestamp parser, but quick for EC2's UTC times.

    botocore's default parser reads a time with dateutil, about 170 microseconds each (a third
    of the lean parse's CPU). A UTC time of EC2's form reads as `datetime.fromisoformat` reads
    it, in the time zone botocore's parser gives such a time (learnt from the answer's first:
    dateutil's choice, tzutc or tzlocal, hangs on the machine's zone). Another parser, or
    another form, is left to `timestamp`."""
    if timestamp is not DEFAULT_TIMESTAMP_PARSER:
        return timestamp
    zone: list[Any] = []

    def parse(value: str) -> Any:
        if not _ZULU.fullmatch(value):
            return timestamp(value)
        if not zone:
            first = timestamp(value)
            zone.append(first.tzinfo)
            return first
        return datetime.fromisoformat(value[:-1]).replace(tzinfo=zone[0])

    return parse
