"""createWorker's and updateWorker's decisions for workers no cloud launches, as a table:
what the pool's provider is and what the body asks, and worker-manager's refusal or none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wm.providers.static import make_verifier
from wm.workers.identity import ExpectedIdentity, IdentityRejected
from wm.workers.static_workers import (
    EXPIRES_PAST,
    NO_SECRET,
    NOT_SUPPORTED,
    SECRET_HASH_KEY,
    HandMade,
    decide_create,
    decide_update,
    hand_made_worker_id,
    secret_hash,
)

NOW = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
SECRET = "s" * 44
STORED = secret_hash(SECRET)
ASKED = HandMade(expires=NOW + timedelta(hours=1), capacity=1, secret=SECRET)


@pytest.mark.parametrize(
    ("scenario", "hand_made", "asked", "refusal"),
    [
        ("a static pool", True, ASKED, None),
        ("a cloud pool", False, ASKED, NOT_SUPPORTED),
        ("a deleted pool (the null provider)", None, ASKED, NOT_SUPPORTED),
        ("no secret", True, HandMade(ASKED.expires, 1, None), NO_SECRET),
        ("an empty secret", True, HandMade(ASKED.expires, 1, ""), NO_SECRET),
        (
            "an expiry in the past",
            True,
            HandMade(NOW - timedelta(seconds=1), 1, SECRET),
            EXPIRES_PAST,
        ),
        # worker-manager judges the expiry before it asks the provider
        (
            "a cloud pool and a past expiry",
            False,
            HandMade(NOW - timedelta(hours=1), 1, SECRET),
            EXPIRES_PAST,
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_create_worker_is_refused_with_worker_managers_words(scenario, hand_made, asked, refusal):
    assert decide_create(hand_made, asked, NOW) == refusal, scenario


@pytest.mark.parametrize(
    ("hand_made", "refusal"), [(True, None), (False, NOT_SUPPORTED), (None, NOT_SUPPORTED)]
)
def test_update_worker_is_for_static_pools_only(hand_made, refusal):
    assert decide_update(hand_made) == refusal


def test_refusals_carry_taskclusters_codes():
    assert {r.code for r in (NOT_SUPPORTED, NO_SECRET, EXPIRES_PAST)} == {"InputError"}


def test_a_static_worker_is_keyed_by_its_three_names_and_its_secret_by_sha256():
    assert hand_made_worker_id("proj/mac", "rack-1", "mini-1") == "proj/mac/rack-1/mini-1"
    assert secret_hash(SECRET) == secret_hash(SECRET) != secret_hash("t" * 44)
    assert len(secret_hash(SECRET)) == 64 and SECRET not in secret_hash(SECRET)


# -- the static verifier: registerWorker's {staticSecret} against the stored hash ---------------


def expected_with(provider_data: dict) -> ExpectedIdentity:
    return ExpectedIdentity(
        deployment_id="dep",
        provider_id="rack",
        pool_id="proj/mac",
        worker_id="proj/mac/rack-1/mini-1",
        region="rack-1",
        cloud_id=None,
        audience="https://tc.example.com",
        provider_data=provider_data,
    )


def test_the_secret_createworker_gave_is_accepted():
    verifier = make_verifier(None, "dep", "https://tc.example.com")

    verifier.verify({"staticSecret": SECRET}, expected_with({SECRET_HASH_KEY: secret_hash(SECRET)}))


@pytest.mark.parametrize(
    ("scenario", "proof", "recorded"),
    [
        ("another secret", {"staticSecret": "t" * 44}, {SECRET_HASH_KEY: secret_hash(SECRET)}),
        ("no secret recorded", {"staticSecret": SECRET}, {}),
        ("a cloud's proof", {"token": "eyJ"}, {SECRET_HASH_KEY: secret_hash(SECRET)}),
        ("more than the secret", {"staticSecret": SECRET, "x": "y"}, {SECRET_HASH_KEY: "h"}),
        ("a secret too long", {"staticSecret": SECRET + "s"}, {SECRET_HASH_KEY: "h"}),
        (
            "the hash itself",
            {"staticSecret": secret_hash(SECRET)[:44]},
            {SECRET_HASH_KEY: secret_hash(SECRET)},
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_anything_else_is_rejected(scenario, proof, recorded):
    verifier = make_verifier(None, "dep", "https://tc.example.com")

    with pytest.raises(IdentityRejected):
        verifier.verify(proof, expected_with(recorded))
