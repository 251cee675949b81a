"""`wmsim serve`: all three clouds from one command, reachable with one-line SDK calls."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest
from azure.identity import ClientSecretCredential
from azure.mgmt.compute import ComputeManagementClient
from botocore.config import Config as BotoConfig
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sim_section() -> str:
    """More keys of the [sim] table the served clouds are started with."""
    return ""


@pytest.fixture
def served(tmp_path, sim_section):
    config = (REPO / "config.toml").read_text()
    config = re.sub(r"^port = 510\d$", "port = 0", config, flags=re.M)
    config += f'\n[sim]\nstate_dir = "{tmp_path / "sim"}"\n{sim_section}'
    path = tmp_path / "config.toml"
    path.write_text(config)
    env = {**os.environ, "WM_CONFIG": str(path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wmsim", "serve", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    lines = []
    deadline = time.monotonic() + 30
    endpoints = None
    while time.monotonic() < deadline and endpoints is None:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        try:
            endpoints = json.loads("".join(lines))
        except json.JSONDecodeError:
            continue
    assert endpoints, proc.stderr.read() if proc.poll() is not None else "no endpoints printed"
    yield proc, {e["kind"]: e for e in endpoints}
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def test_each_printed_endpoint_answers_a_one_line_sdk_call(served):
    proc, by_kind = served
    ec2 = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=by_kind["aws"]["endpoint"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=BotoConfig(retries={"total_max_attempts": 1}),
    )
    assert ec2.describe_instances()["Reservations"] == []

    gce = compute_v1.InstancesClient(
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=by_kind["gcp"]["endpoint"]),
    )
    assert list(gce.list(project="p", zone="us-central1-a")) == []

    cert = by_kind["azure"]["cert_path"]
    # The simulated ARM issues its own tokens, through the real Entra ID client flow.
    credential = ClientSecretCredential(
        "tenant",
        "client",
        "secret",
        authority=by_kind["azure"]["endpoint"],
        disable_instance_discovery=True,
        connection_verify=cert,
    )
    azure = ComputeManagementClient(
        credential,
        "00000000-0000-0000-0000-000000000000",
        base_url=by_kind["azure"]["endpoint"],
        connection_verify=cert,
        retry_total=0,
    )
    assert list(azure.virtual_machines.list_all()) == []

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize(
    ("sim_section", "scenario"),
    [("", None), ('market = "S1"\nmarket_seed = 3\n', "S1")],
    ids=["no-market", "market-S1"],
)
def test_every_cloud_obeys_the_market_the_config_names_and_none_by_default(served, scenario):
    proc, by_kind = served

    for kind, endpoint in by_kind.items():
        cert = endpoint["cert_path"]
        context = ssl.create_default_context(cafile=cert) if cert else None
        with urllib.request.urlopen(endpoint["endpoint"] + "/_sim/market", context=context) as r:
            market = json.loads(r.read())
        assert market["scenario"] == scenario, kind
        if scenario is not None:
            assert market["seed"] == 3

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize("sim_section", ['market = "S1"\nmarket_seed = 7\n'])
def test_a_named_market_is_what_the_served_clouds_price_with(served):
    from wmsim.market import Market, SimOffering

    _, by_kind = served
    ec2 = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=by_kind["aws"]["endpoint"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=BotoConfig(retries={"total_max_attempts": 1}),
    )
    history = ec2.describe_spot_price_history(InstanceTypes=["m5.2xlarge"])["SpotPriceHistory"]

    # S1's prices do not drift: what the market prices at its start it prices throughout.
    market = Market.from_scenario("S1", 7)
    expected = {
        zone: market.price(SimOffering("aws", "us-east-1", zone, "m5.2xlarge", "spot"), 0.0)
        for zone in ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d")
    }
    got = {item["AvailabilityZone"]: float(item["SpotPrice"]) for item in history}
    assert got == pytest.approx(expected, rel=1e-5)  # and only the market's zones
