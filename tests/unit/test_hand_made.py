"""The simulated worker's static path against worker-runner's static provider
(tools/worker-runner/provider/static/static.go and static_test.go, registration/registration.go):
the config it reads, the boot data and proof it makes of it, and registerWorker's body."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from wmsim.agent import registration_body
from wmsim.hand_made import (
    STATIC_SECRET,
    StaticConfigError,
    StaticProvider,
    StaticProviderConfig,
    new_static_secret,
)

# static_test.go's TestConfigureRun config, as worker-runner's YAML `provider:` block holds it.
RUNNER_CONFIG = {
    "providerType": "static",
    "rootURL": "https://tc.example.com",
    "providerID": "static-1",
    "workerPoolID": "w/p",
    "workerGroup": "wg",
    "workerID": "wi",
    "staticSecret": "quiet",
    "workerLocation": {"region": "underworld", "zone": "666"},
    "providerMetadata": {"temperature": "24"},
}


def test_the_static_config_configures_the_run_as_worker_runner_does():
    config = StaticProviderConfig.from_runner_config(RUNNER_CONFIG)

    provider = StaticProvider(config)
    boot = provider.configure()

    assert (boot.root_url, boot.provider_id, boot.worker_pool_id) == (
        "https://tc.example.com",
        "static-1",
        "w/p",
    )
    assert (boot.worker_group, boot.worker_id) == ("wg", "wi")
    assert boot.provider_metadata == {"temperature": "24"}
    assert provider.worker_location() == {"cloud": "static", "region": "underworld", "zone": "666"}
    # GetWorkerIdentityProof: the secret, and nothing else.
    assert dict(boot.proof) == {"staticSecret": "quiet"}
    assert provider.identity_proof("https://tc.example.com") == {"staticSecret": "quiet"}


def test_a_static_worker_has_no_metadata_service_and_is_not_dynamically_provisioned():
    provider = StaticProvider(StaticProviderConfig.from_runner_config(RUNNER_CONFIG))

    boot = provider.configure()

    # worker-runner's exit manager: a static host exits without removeWorker.
    assert boot.dynamically_provisioned is False
    assert provider.terminating() is False


def test_the_root_url_is_normalised_without_its_trailing_slash():
    config = StaticProviderConfig.from_runner_config(
        {**RUNNER_CONFIG, "rootURL": "https://tc.example.com/"}
    )

    assert StaticProvider(config).configure().root_url == "https://tc.example.com"


def test_registration_sends_worker_runners_body_with_the_static_secret_as_proof():
    boot = StaticProvider(StaticProviderConfig.from_runner_config(RUNNER_CONFIG)).configure()

    body = registration_body(boot, datetime(2026, 12, 5, 3, 0, tzinfo=UTC))

    # registration.go's RegisterWorkerRequest, field for field.
    assert body == {
        "workerPoolId": "w/p",
        "providerId": "static-1",
        "workerGroup": "wg",
        "workerId": "wi",
        "workerIdentityProof": {"staticSecret": "quiet"},
        "systemBootTime": "2026-12-05T03:00:00.000Z",
    }


def test_keys_the_static_provider_does_not_read_are_left_alone_as_worker_runner_does():
    config = StaticProviderConfig.from_runner_config({**RUNNER_CONFIG, "someday": "maybe"})

    assert config == StaticProviderConfig.from_runner_config(RUNNER_CONFIG)


def test_the_runner_config_an_operator_writes_reads_back_the_same():
    config = StaticProviderConfig.from_runner_config(RUNNER_CONFIG)

    assert config.runner_config() == RUNNER_CONFIG
    assert StaticProviderConfig.from_runner_config(config.runner_config()) == config


def test_the_secret_stays_out_of_the_configs_repr():
    config = StaticProviderConfig.from_runner_config(RUNNER_CONFIG)

    assert "quiet" not in repr(config)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"providerType": "aws"}, "providerType is 'aws', not 'static'"),
        ({"staticSecret": None}, "configuration value `provider.staticSecret` not found"),
        ({"workerID": 7}, "configuration value `provider.workerID` should have type string"),
        ({"workerGroup": ""}, "provider did not set WorkerGroup"),
        ({"workerLocation": {"rack": 3}}, "workerLocation value rack is not a string"),
        ({"workerLocation": ["rack"]}, "workerLocation is not a mapping"),
    ],
)
def test_a_config_worker_runner_could_not_run_with_is_refused_by_name(change, message):
    raw = {key: value for key, value in {**RUNNER_CONFIG, **change}.items() if value is not None}

    with pytest.raises(StaticConfigError, match=message):
        StaticProviderConfig.from_runner_config(raw)


def test_new_secrets_have_the_shape_worker_manager_takes_and_differ():
    made = {new_static_secret() for _ in range(20)}

    assert len(made) == 20
    assert all(STATIC_SECRET.fullmatch(secret) for secret in made)
