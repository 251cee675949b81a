"""Checking JSON values against schemas written as data, naming each problem's key path.

The subset of JSON Schema that Taskcluster's worker-manager schemas use, interpreted the way
its validator (ajv 8 with ajv-formats 2.1.1, "full" formats) does, so that wm accepts and
refuses exactly what worker-manager does. Problems are `path: message` strings with the path
in JavaScript notation (`config.launchConfigs[1].launchConfig.ImageId: required`); every
problem is reported, none stops the check.

Keywords: type, properties, required, additionalProperties (false or a schema), items,
uniqueItems, minimum, maximum, minLength, maxLength, pattern (matched whole), format (email,
date-time), enum, allOf, oneOf. wm's own: `forbidden` (a property that may not appear: the
schemas' `{not: {}}`, with the reason), `notAllOf` (the object may not hold all these keys:
`not: {required: [...]}`), `hint` (the message for a failed pattern) and, beside a oneOf,
`pick` (given the value, the index of the branch whose problems to show when none matches, or
None to show `none`), `none` and `both` (the messages when no branch, or more than one,
matches).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

Schema = Mapping[str, Any]

_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
}
_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")


def key_path(path: str, key: str) -> str:
    """`path.key`, or `path["odd key"]` for a key that would read ambiguously."""
    part = key if _PLAIN_KEY.fullmatch(key) else f"[{json.dumps(key)}]"
    if not path:
        return part
    return f"{path}{part}" if part.startswith("[") else f"{path}.{part}"


def where(path: str) -> str:
    return path or "body"


def is_number(value: Any) -> bool:
    """A JSON number: int or finite float, and not a bool (Python's bool is an int)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def has_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, Mapping)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if not is_number(value):
        return False
    # JavaScript has one number type: 2.0 is an integer there.
    return name == "number" or not isinstance(value, float) or value.is_integer()


def js_truthy(value: Any) -> bool:
    """JavaScript's truthiness of a JSON value (worker-manager's `if (x)`)."""
    if isinstance(value, float) and math.isnan(value):
        return False
    return value is not None and value is not False and value != 0 and value != ""


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as JavaScript's deep-equal sees them: 1 == 1.0, true != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def check(value: Any, schema: Schema, path: str = "") -> list[str]:
    """Every problem `value` has against `schema`, each naming its key path."""
    problems: list[str] = []
    _check(value, schema, path, problems)
    return list(dict.fromkeys(problems))  # allOf parts may find the same problem twice


def _check(value: Any, schema: Schema, path: str, out: list[str]) -> None:
    if "forbidden" in schema:
        out.append(f"{where(path)}: not allowed ({schema['forbidden']})")
        return
    kind = schema.get("type")
    if kind is not None and not has_type(value, kind):
        out.append(f"{where(path)}: must be {_TYPE_NAMES[kind]}")
        return
    for part in schema.get("allOf", ()):
        _check(value, part, path, out)
    if "oneOf" in schema:
        _check_one_of(value, schema, path, out)
    if "enum" in schema and not any(json_equal(value, choice) for choice in schema["enum"]):
        out.append(f"{where(path)}: must be one of: {', '.join(map(str, schema['enum']))}")
    if isinstance(value, str):
        _check_string(value, schema, path, out)
    if is_number(value):
        _check_number(value, schema, path, out)
    if isinstance(value, Mapping):
        _check_object(value, schema, path, out)
    if isinstance(value, list):
        _check_array(value, schema, path, out)


def _check_one_of(value: Any, schema: Schema, path: str, out: list[str]) -> None:
    verdicts = [check(value, branch, path) for branch in schema["oneOf"]]
    matching = sum(1 for problems in verdicts if not problems)
    if matching == 1:
        return
    if matching > 1:
        out.append(f"{where(path)}: {schema.get('both', 'matches more than one of its forms')}")
    else:
        picked = schema["pick"](value) if "pick" in schema else None
        if picked is not None:
            out.extend(verdicts[picked])
        else:
            out.append(f"{where(path)}: {schema.get('none', 'matches none of its forms')}")


def _check_string(value: str, schema: Schema, path: str, out: list[str]) -> None:
    at = where(path)
    if len(value) < schema.get("minLength", 0):  # ajv counts code points, as len() does
        out.append(f"{at}: must be at least {schema['minLength']} character(s) long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(f"{at}: must be at most {schema['maxLength']} characters long")
    if "pattern" in schema and not re.fullmatch(schema["pattern"], value):
        out.append(f"{at}: {schema.get('hint') or 'must match ' + schema['pattern']}")
    form = schema.get("format")
    if form == "email" and not is_email(value):
        out.append(f"{at}: must be an email address")
    if form == "date-time" and not is_date_time(value):
        out.append(f"{at}: must be a date-time such as 2019-10-18T21:16:41.593Z")


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _check_number(value: float, schema: Schema, path: str, out: list[str]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        out.append(f"{where(path)}: must be >= {_number_text(schema['minimum'])}")
    if "maximum" in schema and value > schema["maximum"]:
        out.append(f"{where(path)}: must be <= {_number_text(schema['maximum'])}")


def _check_object(value: Mapping[str, Any], schema: Schema, path: str, out: list[str]) -> None:
    out.extend(
        f"{key_path(path, k)}: required" for k in schema.get("required", ()) if k not in value
    )
    keys = schema.get("notAllOf")
    if keys and all(k in value for k in keys):
        out.append(f"{where(path)}: must not set all of {', '.join(keys)} (at most three)")
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            _check(item, properties[key], key_path(path, key), out)
        elif extra is False:
            allowed = ", ".join(properties)
            out.append(f"{key_path(path, key)}: unknown key (allowed: {allowed})")
        elif isinstance(extra, Mapping):
            _check(item, extra, key_path(path, key), out)


def _check_array(value: list[Any], schema: Schema, path: str, out: list[str]) -> None:
    items = schema.get("items")
    for index, item in enumerate(value):
        if items is not None:
            _check(item, items, f"{path}[{index}]", out)
        if schema.get("uniqueItems"):
            earlier = next((i for i in range(index) if json_equal(value[i], item)), None)
            if earlier is not None:
                out.append(f"{path}[{index}]: repeats {path}[{earlier}] (items must be unique)")


# ajv-formats 2.1.1 "full" email, rewritten without nested quantifiers (the same language: a
# domain label is alphanumerics with inner hyphens) so a long address cannot stall the regex.
# JavaScript's `i` flag folds ASCII only, hence re.ASCII.
_EMAIL_LOCAL = r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_EMAIL_LABEL = r"[a-z0-9]+(?:-+[a-z0-9]+)*"
_EMAIL = re.compile(rf"{_EMAIL_LOCAL}@(?:{_EMAIL_LABEL}\.)+{_EMAIL_LABEL}", re.I | re.ASCII)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(z|[+-][0-9]{2}(?::?[0-9]{2})?)?", re.I
)
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_email(text: str) -> bool:
    return _EMAIL.fullmatch(text) is not None


def is_date_time(text: str) -> bool:
    """ajv-formats 2.1.1's date-time: a valid calendar date, `T` (or a space), a valid time.
    Its time-zone check compares the zone with "" and so never fails: no zone passes too."""
    parts = re.split(r"[tT\s]", text)
    if len(parts) != 2:
        return False
    date, time = _DATE.fullmatch(parts[0]), _TIME.fullmatch(parts[1])
    if not date or not time:
        return False
    year, month, day = (int(g) for g in date.groups())
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = 29 if month == 2 and leap else _DAYS_IN_MONTH[month]
    hour, minute, second = (int(g) for g in time.groups()[:3])
    leap_second = (hour, minute, second) == (23, 59, 60)
    return 1 <= day <= days and ((hour <= 23 and minute <= 59 and second <= 59) or leap_second)
