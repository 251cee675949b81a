"""EC2's SDK clients: one boto3 session per credentials mode in a process, and a client per
region built on it with the gate as the only retry policy."""

from __future__ import annotations

import threading
from typing import Any

from wm.kinds.aws import AwsProviderConfig

# Fixed fake keys for `credentials = "simulated"`: explicit keys keep boto3's credential chain,
# and with it the instance metadata service, out of the picture.
SIMULATED_ACCESS_KEY_ID = "AKIAWMSIMULATED00000"
SIMULATED_SECRET_ACCESS_KEY = "wm-simulated-secret-access-key"
_SESSIONS: dict[str, Any] = {}  # credentials mode -> boto3 session
_SESSIONS_LOCK = threading.Lock()


def build_client(provider: AwsProviderConfig, region: str) -> Any:
    """A boto3 EC2 client of one region for the provider's endpoint and credentials."""
    from botocore.config import Config

    gate = provider.gate
    config = Config(
        # One attempt per call: the gate is the only retry policy.
        retries={"total_max_attempts": 1},
        connect_timeout=gate.timeout_s,
        read_timeout=gate.timeout_s,
        max_pool_connections=gate.concurrency,
        user_agent_extra="wm",
    )
    with _SESSIONS_LOCK:  # boto3 sessions are not thread-safe; the clients they make are
        session = _session(provider.credentials)
        return session.client(
            "ec2", region_name=region, endpoint_url=provider.endpoint, config=config
        )


def _session(credentials: str) -> Any:
    """The process's boto3 session for a credentials mode: one per process, because each new
    session parses the EC2 service model again (~0.2 s)."""
    import boto3
    import botocore.session

    from wm.providers.aws.listing import LeanParsers  # botocore's, loaded with the SDK

    session = _SESSIONS.get(credentials)
    if session is None:
        core = botocore.session.get_session()
        # DescribeInstances answers read for what wm reads (listing.py): most of a scan's CPU.
        core.register_component("response_parser_factory", LeanParsers())
        if credentials == "simulated":
            session = boto3.session.Session(
                aws_access_key_id=SIMULATED_ACCESS_KEY_ID,
                aws_secret_access_key=SIMULATED_SECRET_ACCESS_KEY,
                botocore_session=core,
            )
        else:
            # boto3's usual chain: env, files, roles
            session = boto3.session.Session(botocore_session=core)
        _SESSIONS[credentials] = session
    return session
