"""Each process type's default metrics port: its own, so that all may share a host."""

from __future__ import annotations

import pytest

from tests.support.configs import build, raw
from wm.errors import ConfigError
from wm.ops.metrics_ports import METRICS_PORTS, metrics_port


@pytest.mark.parametrize(
    ("process", "kinds", "offset"),
    [
        ("provisioner", (), 0),
        ("scanner", ("aws",), 1),
        ("scanner", ("gcp",), 2),
        ("scanner", ("azure",), 3),
        ("scanner", (), 4),  # every cloud, or --except
        ("provisioner", ("aws",), 5),
        ("provisioner", ("azure",), 7),
        ("all", (), 8),
        ("all", ("aws",), 8),
    ],
)
def test_each_process_type_has_a_port_of_its_own_from_the_configured_one(process, kinds, offset):
    assert metrics_port(9464, process, kinds) == 9464 + offset
    assert offset < METRICS_PORTS


@pytest.mark.parametrize(("base", "process"), [(0, "provisioner"), (0, "scanner"), (9464, "web")])
def test_no_metrics_server_when_turned_off_or_for_the_web_process(base, process):
    assert metrics_port(base, process) == 0


def test_a_configured_port_without_room_for_every_process_types_port_is_refused():
    assert build(raw(metrics={"port": 65536 - METRICS_PORTS})).metrics.port == 65527
    with pytest.raises(ConfigError) as caught:
        build(raw(metrics={"port": 65536 - METRICS_PORTS + 1}))
    assert [p.split(":")[0] for p in caught.value.problems] == ["metrics.port"]
