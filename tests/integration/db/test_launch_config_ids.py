"""Derived launch config ids equal what Postgres computes for worker-manager.

Taskcluster's db version 0105 derives `'lc-' || left(md5(worker_pool_id || (config -
'workerManager')::text), 20)`, with the launch config sent as JavaScript's JSON.stringify
writes it. Here Postgres gets that same text and computes the id itself, for a table of launch
configs chosen to stress key order, string escapes and number printing.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from wm.db.engine import make_engine
from wm.pools.definition import derive_launch_config_id, jsonb_text

POOL = "proj/pool"
TC_POOLS = Path(__file__).resolve().parents[2] / "fixtures" / "tc_pools"


def js_number(value: float) -> str:
    """ECMAScript Number::toString (what JSON.stringify writes), from the shortest digits."""
    double = float(value)
    if double == 0:
        return "0"
    if double < 0:
        return "-" + js_number(-double)
    _, digit_tuple, exponent = Decimal(repr(double)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), exponent + len(digits)  # value = 0.digits * 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def js_json(value: Any) -> str:
    """JSON.stringify of the value JavaScript would hold (every number a double)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{js_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(js_json(v) for v in value) + "]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    return js_number(value)


def tc_launch_configs() -> list[dict]:
    found = []
    for path in sorted(TC_POOLS.glob("*.json")):
        data = json.loads(path.read_text())
        found += data.get("config", data)["launchConfigs"]
    return found


STRESS = [
    {"é": 1, "ab": 2, "z": 3, "ü1": 4, "😀": 5, "abc": 6, "B": 7, "a": 8, "": 9},
    {
        "strings": [
            'quote " and backslash \\',
            "newline\n tab\t return\r backspace\b formfeed\f",
            "controls \x01 \x1f and delete \x7f",
            "slash / line separator \u2028 emoji 😀 accents é ü",
        ]
    },
    {
        "numbers": [
            0,
            -0.0,
            1.0,
            1.5,
            -2.25,
            0.1,
            1e-7,
            1.5e-7,
            0.000001,
            123456789.123,
            1e16,
            1e21,
            1.5e21,
            1.7976931348623157e308,
            5e-324,
            2**53 + 1,
            2**60,
            12345678901234567890,
            -1e-10,
        ]
    },
    {"nested": {"empty": {}, "list": [], "deep": [{"b": [True, False, None]}, {"aa": {"a": 1}}]}},
    {
        "workerManager": {"launchConfigId": "ignored", "initialWeight": 0.5},
        "region": "us-east-1",
        "launchConfig": {"ImageId": "ami-1", "MinCount": 1.0},
    },
]


@pytest.fixture
def connection(empty_db_url: str):
    engine = make_engine(empty_db_url)
    with engine.connect() as conn:
        # md5 hashes the text's bytes in the database encoding; Taskcluster's is UTF8
        assert conn.execute(text("SHOW server_encoding")).scalar() == "UTF8"
        yield conn
    engine.dispose()


@pytest.mark.parametrize(
    "launch_config",
    tc_launch_configs() + STRESS,
    ids=lambda lc: js_json(lc)[:40],
)
def test_derived_ids_match_postgres(connection, launch_config: dict):
    derived = connection.execute(
        text(
            "SELECT 'lc-' || left(md5(:pool || "
            "(CAST(:config AS jsonb) - 'workerManager')::text), 20)"
        ),
        {"config": js_json(launch_config), "pool": POOL},
    ).scalar()
    without_manager = {k: v for k, v in launch_config.items() if k != "workerManager"}
    printed = connection.execute(
        text("SELECT (CAST(:config AS jsonb))::text"), {"config": js_json(without_manager)}
    ).scalar()
    assert jsonb_text(without_manager) == printed
    assert derive_launch_config_id(POOL, launch_config) == derived
