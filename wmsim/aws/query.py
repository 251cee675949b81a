"""EC2's Query API form (`SecurityGroupId.1`, `TagSpecification.1.Tag.2.Key`) decoded into the
parameters boto3 takes, and encoded back, by EC2's own service model from botocore."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

EC2_API_VERSION = "2016-11-15"  # what botocore sends as Version
_ABSENT = object()  # a parameter the form does not hold


def decode_query(action: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The parameters of an EC2 Query API request as boto3 takes them: the form's flattened
    keys (`SecurityGroupId.1`, `TagSpecification.1.Tag.2.Key`) folded back into lists and
    structures by EC2's service model, scalars typed. Keys the model does not know are left
    out, and so are empty lists and structures (botocore does not send them)."""
    shape = ec2_model().operation_model(action).input_shape
    prefixes = set()
    for key in params:
        parts = key.split(".")
        prefixes.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    decoded = _decode(shape, params, "", prefixes)
    return decoded if isinstance(decoded, dict) else {}


@lru_cache(maxsize=1)
def ec2_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("ec2")


def _decode(shape: Any, params: Mapping[str, str], key: str, prefixes: set[str]) -> Any:
    if key and key not in prefixes:
        return _ABSENT
    if shape.type_name == "structure":
        found = {}
        for name, member in shape.members.items():
            value = _decode(member, params, _join(key, _query_name(member, name)), prefixes)
            if value is not _ABSENT:
                found[name] = value
        return found if found or not key else _ABSENT
    if shape.type_name == "list":
        start = len(key) + 1
        indexes = sorted(
            int(p[start:]) for p in prefixes if p.startswith(key + ".") and p[start:].isdigit()
        )
        items = [_decode(shape.member, params, f"{key}.{i}", prefixes) for i in indexes]
        return [item for item in items if item is not _ABSENT] or _ABSENT
    if key not in params:
        return _ABSENT
    return _scalar(shape.type_name, params[key])


def _query_name(shape: Any, default: str) -> str:
    """The form key of a member, as botocore's EC2 serializer names it."""
    if "queryName" in shape.serialization:
        return str(shape.serialization["queryName"])
    name = shape.serialization.get("name")
    return name[0].upper() + name[1:] if name else default


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _scalar(type_name: str, text: str) -> Any:
    try:
        if type_name == "boolean":
            return text.lower() == "true"
        if type_name in ("integer", "long"):
            return int(text)
        if type_name in ("float", "double"):
            return float(text)
    except ValueError:
        return text  # as sent: the checks refuse it
    return text


def off_enum(shape: Any, value: Any, path: str) -> tuple[str, Any] | None:
    """The first value (its parameter path and itself) outside its enumeration."""
    if shape.type_name == "structure" and isinstance(value, Mapping):
        for name, item in value.items():
            member = shape.members.get(name)
            if member is not None and (off := off_enum(member, item, _join(path, name))):
                return off
    elif shape.type_name == "list" and isinstance(value, list):
        for index, item in enumerate(value, 1):
            if off := off_enum(shape.member, item, f"{path}.{index}"):
                return off
    elif getattr(shape, "enum", None) and value not in shape.enum:
        return path, value
    return None


def readable(request: dict[str, Any]) -> dict[str, Any]:
    """The request with its UserData as the text it encodes (what the caller gave boto3)."""
    if "UserData" not in request:
        return request
    try:
        text = base64.b64decode(request["UserData"], validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return request
    return {**request, "UserData": text}


def encode_query(shape: Any, value: Any, key: str) -> dict[str, str]:
    """The Query API form of a value, as botocore's EC2 serializer writes it."""
    if shape.type_name == "structure":
        form: dict[str, str] = {}
        for name, item in value.items():
            member = shape.members[name]
            form.update(encode_query(member, item, _join(key, _query_name(member, name))))
        return form
    if shape.type_name == "list":
        form = {}
        for index, item in enumerate(value, 1):
            form.update(encode_query(shape.member, item, f"{key}.{index}"))
        return form
    if isinstance(value, bool):
        return {key: "true" if value else "false"}
    return {key: str(value)}


def launch_params(params: Mapping[str, str]) -> dict[str, str]:
    # What defines a launch: every parameter but the protocol's own.
    return {k: v for k, v in params.items() if k not in ("Action", "Version")}
