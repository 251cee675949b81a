"""Which buckets a process makes for a provider when it starts: EC2 limits each region on its
own, the other clouds the whole account (wm/kinds: `budgets_per_region`)."""

from __future__ import annotations

import pytest

from procs.providers import budget_scopes
from tests.support.configs import build
from wm.calls import ACCOUNT_WIDE


@pytest.mark.parametrize(
    ("provider_id", "scopes"),
    [
        ("aws-a", ("us-east-1", "us-west-2")),
        ("gcp-a", (ACCOUNT_WIDE,)),
        ("azure-a", (ACCOUNT_WIDE,)),
    ],
)
def test_a_provider_draws_from_its_regions_buckets_or_its_accounts(provider_id, scopes):
    config = next(p for p in build().providers if p.id == provider_id)

    assert budget_scopes(config) == scopes
