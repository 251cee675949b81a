"""When the simulated worker renews its credentials: worker-runner's renewBeforeExpire
(tools/worker-runner/registration/registration.go), a quarter in for compressed lifetimes."""

from __future__ import annotations

import pytest

from wmsim.agent import renew_in_s

HOUR = 3600.0


@pytest.mark.parametrize(
    ("lifetime_s", "renew_after_s"),
    [
        (96 * HOUR, 96 * HOUR - 1800),  # worker-manager's default: 30 minutes ahead
        (2100.0, 300.0),  # 30 minutes ahead is exactly the 5 minutes it waits at least
        (HOUR, 1800.0),
        (1000.0, 300.0),  # waits 5 minutes although 30 minutes ahead would be sooner
        (330.0, 300.0),
        (200.0, 170.0),  # shorter than 5 minutes: 30 s before they expire
        (60.0, 30.0),
        # compressed (tests, demos): worker-runner would renew at once, over and over
        (40.0, 10.0),
        (16.0, 4.0),
    ],
)
def test_credentials_are_renewed_as_worker_runner_renews_them(lifetime_s, renew_after_s):
    assert renew_in_s(lifetime_s) == pytest.approx(renew_after_s)
