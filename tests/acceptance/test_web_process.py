"""`wm run web` as the platform runs it: on $PORT, answering health, metrics and auth checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from tests.support.stack import REPO, Stack, aws_provider, pool
from wm.db.server import free_port


def get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_web_process_serves_on_port_and_stops_on_sigterm(tmp_path, db_url, engine, sim_ec2):
    aws = aws_provider(sim_ec2)
    stack = Stack.write(tmp_path, db_url, [aws], [pool("proj/web", aws)])
    stack.sync_pools(engine)
    port = free_port()
    env = {
        **os.environ,
        "WM_CONFIG": str(stack.path),
        "DATABASE_URL": db_url,
        "PORT": str(port),
        "WM_OPERATOR_TOKEN": "op-token",
    }
    web = subprocess.Popen(
        [sys.executable, "-m", "wm", "run", "web"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if get(base + "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert get(base + "/healthz") == (200, '{"status":"ok"}')
        assert "wm_api_requests_total" in get(base + "/metrics")[1]
        assert get(base + "/api/v1/pools")[0] == 401
        status, body = get(base + "/api/v1/pools", token="op-token")
        assert status == 200 and "proj/web" in body
        web.send_signal(signal.SIGTERM)
        assert web.wait(timeout=10) == 0
        output = web.stdout.read()
        assert "op-token" not in output
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
        web.stdout.close()
