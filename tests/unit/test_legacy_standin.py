"""The legacy stand-in's pure parts: worker-manager's estimator, the VM id a proof names, and
paging as libraries/api cuts pages."""

from __future__ import annotations

import base64
import json

import pytest

from wmsim.legacy.proofs import proof_vm_id
from wmsim.legacy.provisioner import to_spawn
from wmsim.legacy.store import BadToken, launch_config_id, page


@pytest.mark.parametrize(
    ("pending", "claimed", "existing", "stopping", "requested", "low", "high", "spawn"),
    [
        (0, 0, 0, 0, 0, 0, 4, 0),  # nothing queued, nothing wanted
        (3, 0, 0, 0, 0, 0, 4, 3),  # three tasks, three workers
        (9, 0, 0, 0, 0, 0, 4, 4),  # up to the maximum only
        (3, 0, 1, 0, 1, 0, 4, 1),  # a requested worker counts as idle and again as requested
        (3, 2, 2, 0, 0, 0, 4, 2),  # two busy workers: three more would be 5 > 4
        (0, 0, 0, 0, 0, 2, 4, 2),  # the minimum is kept
        (5, 0, 0, 2, 0, 0, 4, 2),  # stopping capacity still counts against the maximum
    ],
)
def test_the_estimator_spawns_as_worker_managers(
    pending, claimed, existing, stopping, requested, low, high, spawn
):
    assert (
        to_spawn(
            pending=pending,
            claimed=claimed,
            existing=existing,
            stopping=stopping,
            requested=requested,
            min_capacity=low,
            max_capacity=high,
        )
        == spawn
    )


def _jwt(claims: dict) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{body}.sig"


@pytest.mark.parametrize(
    ("proof", "named"),
    [
        ({"document": json.dumps({"instanceId": "i-123"}), "signature": "x"}, "i-123"),
        ({"token": _jwt({"google": {"compute_engine": {"instance_id": "42"}}})}, "42"),
        (
            {"document": base64.b64encode(b'0\x82..{"nonce":"","vmId":"abc-1"}..').decode()},
            "abc-1",
        ),
        ({"document": "not base64 at all!"}, None),
        ({"token": "no-dots"}, None),
        ({"staticSecret": "s"}, None),
    ],
)
def test_a_proof_names_its_vm_by_its_shape(proof, named):
    assert proof_vm_id(proof) == named


def test_pages_follow_one_another_and_end_without_a_token():
    items = list(range(5))
    first = page(items, "2", None, "x")
    second = page(items, "2", first["continuationToken"], "x")
    last = page(items, "2", second["continuationToken"], "x")

    assert (first["x"], second["x"], last["x"]) == ([0, 1], [2, 3], [4])
    assert "continuationToken" not in last
    assert page(items, None, None, "x") == {"x": items}
    with pytest.raises(BadToken):
        page(items, "2", "garbage!", "x")


def test_a_launch_config_keeps_the_id_its_definition_names():
    # A named id needs no database (the derived ones: tests/integration/legacy).
    named = {"workerManager": {"launchConfigId": "lc-1"}}
    assert launch_config_id(None, "p/q", named) == "lc-1"  # type: ignore[arg-type]
