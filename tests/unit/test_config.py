import copy

import pytest
from pydantic import ValidationError

from tests.support.configs import BASE, build, raw
from wm.config.loader import load, parse
from wm.errors import ConfigError
from wm.kinds import KINDS


def problems_of(data) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        build(data)
    return caught.value.problems


def test_the_example_config_is_valid_and_shows_every_kind():
    config = load("config.toml", environ={})
    # The three clouds, and the static provider of the demo's hand-made machines.
    assert {p.kind for p in config.providers} == set(KINDS)


def test_a_valid_config_loads_into_frozen_objects():
    config = build()
    assert config.provider("aws-a").regions == ("us-east-1", "us-west-2")
    with pytest.raises(ValidationError):
        config.provider("aws-a").scan_interval_s = 3  # type: ignore[misc]


def test_pools_in_the_config_are_refused_with_where_they_went():
    data = raw()  # with its pools under "pools", as an old config.toml had them
    with pytest.raises(ConfigError) as caught:
        parse(data, environ={}, source="old.toml")
    (problem,) = caught.value.problems
    assert problem.startswith("pools: [[pools]] moved out of config.toml")
    assert "wm pools apply" in problem and "wm pools convert" in problem


def test_environment_supplies_secrets_and_never_prints_them():
    config = build(environ={"DATABASE_URL": "postgresql://u:hunter2@h/db", "PORT": "9000"})
    assert config.env.database_url == "postgresql://u:hunter2@h/db"
    assert config.env.port == 9000
    assert "hunter2" not in repr(config)


def test_sentry_repeat_window_comes_from_the_environment_and_a_typo_is_named():
    assert build(environ={}).env.sentry_repeat_window_s == 600
    assert build(environ={"SENTRY_REPEAT_WINDOW_S": "0"}).env.sentry_repeat_window_s == 0
    assert build(environ={"SENTRY_REPEAT_WINDOW_S": "90"}).env.sentry_repeat_window_s == 90
    for typo in ("10m", "-5", "nan"):
        with pytest.raises(ConfigError) as caught:
            build(environ={"SENTRY_REPEAT_WINDOW_S": typo})
        assert caught.value.problems == [
            f"SENTRY_REPEAT_WINDOW_S (environment): must be seconds, 0 or more, not {typo!r}"
        ]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["providers"][0].update(kind="ibm"), "providers[0].kind: must be one of"),
        (lambda d: d["providers"][1].pop("project"), "providers[1].project: required"),
        (lambda d: d.update(intervls={"provision_s": 5}), "intervls: unknown key"),
        (
            lambda d: d["providers"][0].update(secret_access_key="x"),
            "providers[0].secret_access_key: secrets belong in the environment",
        ),
        (
            lambda d: d["providers"][0].update(budgets={"runinstances": {"burst": 9, "per_s": 1}}),
            "providers[0].budgets.runinstances: unknown call class",
        ),
        (
            lambda d: d["providers"][0].update(
                budgets={"run-instances": {"burst": 50, "per_s": 2}}
            ),
            "providers[0].budgets.run-instances.burst: must be at least 251 at per_s 2",
        ),
        (
            lambda d: d["providers"][0].update(signals={"price_intreval_s": 60}),
            "providers[0].signals.price_intreval_s: unknown key",
        ),
        (
            lambda d: d["providers"][1].update(signals={"os": "macos"}),
            "providers[1].signals.os: must be one of",
        ),
    ],
)
def test_each_problem_is_named_by_its_key_path(edit, expected):
    data = raw()
    edit(data)
    assert any(p.startswith(expected) for p in problems_of(data)), problems_of(data)


TC_PROVIDER_ID = "^[a-zA-Z0-9-_]{1,38}$"


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("provider_id", ["azure_trusted", "Fxci_Level3-GCP", "x" * 38, "A", "_"])
def test_every_id_taskcluster_takes_names_a_provider_of_any_kind(index, provider_id):
    data = raw()
    data["providers"][index]["id"] = provider_id
    config = build(data)
    assert config.providers[index].id == provider_id


@pytest.mark.parametrize("provider_id", ["x" * 39, "a.b", "a/b", "", "a b", "ab\n", "é"])
def test_an_id_taskcluster_refuses_is_named_with_its_pattern(provider_id):
    data = raw()
    data["providers"][2]["id"] = provider_id
    assert problems_of(data) == [
        f"providers[2].id: must match {TC_PROVIDER_ID} (Taskcluster's providerId: 1 to 38 "
        "letters, digits, `-` and `_`)"
    ]


def test_providers_whose_ids_differ_in_case_only_are_two_providers():
    data = raw()
    data["providers"][0]["id"] = "AWS-a"
    data["providers"][2]["id"] = "aws-A"
    data["providers"][1]["id"] = "aws-a"
    data["providers"][1]["kind"] = "aws"
    for key in ("project", "worker_service_account_email", "worker_service_account_id"):
        data["providers"][1].pop(key)
    assert [p.id for p in build(data).providers] == ["AWS-a", "aws-a", "aws-A"]


@pytest.mark.parametrize("kind", ["aws", "azure"])
def test_an_id_too_long_for_gce_labels_is_refused_for_gcp_providers_only(kind):
    long_id = "FXCI_LEVEL3_GCP_TRUSTED_WORKERS_POOLS"  # 37 characters, 73 escaped
    data = raw()
    data["providers"][1]["id"] = long_id
    (problem,) = problems_of(data)
    assert problem.startswith(f"providers[1].id: provider {long_id!r} would be written in GCE")
    assert "73 characters, and GCE allows 63" in problem
    other = next(i for i, p in enumerate(data["providers"]) if p["kind"] == kind)
    data["providers"][1]["id"] = "gcp-a"
    data["providers"][other]["id"] = long_id
    assert build(data).providers[other].id == long_id


def test_every_problem_is_listed_at_once():
    data = raw()
    data["providers"][0]["gate"] = {"timeout_s": -1}
    data["providers"][1].pop("project")
    data["providers"][2]["subscription_id"] = ""
    found = problems_of(data)
    assert len(found) == 3, found


def test_missing_file_and_bad_toml_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load(tmp_path / "absent.toml", environ={})
    bad = tmp_path / "bad.toml"
    bad.write_text("deployment_id = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(bad, environ={})


def test_config_path_comes_from_wm_config_when_not_given(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('deployment_id = "from-env"\n')
    assert load(environ={"WM_CONFIG": str(path)}).deployment_id == "from-env"


@pytest.mark.parametrize(
    ("burst", "per_s", "fits"),
    [
        (1000, 2, True),  # EC2's published bucket
        (251, 2, True),  # 250 usable after the 0.5 s reserve
        (250.5, 2, False),
        (500, 1000, True),  # a fast refill: the reserve is capped at half the bucket
        (499, 1000, False),
    ],
)
def test_a_per_worker_bucket_must_hold_a_whole_create_batch(burst, per_s, fits):
    data = raw()
    data["providers"][0]["budgets"] = {"run-instances": {"burst": burst, "per_s": per_s}}
    if fits:
        assert build(data).providers[0].budget_limits()["run-instances"].burst == burst
    else:
        assert any("run-instances.burst: must be at least" in p for p in problems_of(data))


def test_the_retired_intent_recovery_setting_is_refused_with_the_reason():
    data = raw()
    data["intervals"] = {"intent_recovery_s": 60}
    (problem,) = problems_of(data)
    assert "intervals" in problem and "intent_recovery_s is no longer a setting" in problem


def test_tables_another_package_declares_are_left_to_it_and_others_refused():
    data = {**BASE, "sim": {"aws": {"port": "not checked by wm"}}}

    config = parse(data, environ={}, source="c.toml", skip=frozenset({"sim"}))
    with pytest.raises(ConfigError) as caught:
        parse(data, environ={}, source="c.toml", skip=frozenset())

    assert config.deployment_id == "test-deploy"
    assert caught.value.problems == ["sim: unknown key"]


def test_the_retired_public_url_is_refused_naming_root_url():
    data = raw()
    data["web"] = {"port": 8080, "public_url": "https://wm.example.com"}
    (problem,) = problems_of(data)
    assert problem.startswith("web: ") and "public_url is no longer a setting" in problem
    assert "root_url" in problem


def test_root_url_comes_from_the_file_and_taskcluster_root_url_wins():
    assert build().root_url == "http://127.0.0.1:8080"  # standalone: the web process itself
    in_file = build({**raw(), "root_url": "https://tc.example.com/"})
    assert in_file.root_url == "https://tc.example.com"  # one form, as clients join it
    from_env = build(
        {**raw(), "root_url": "https://tc.example.com"},
        environ={"TASKCLUSTER_ROOT_URL": "https://tc.other.example"},
    )
    assert from_env.root_url == "https://tc.other.example"


@pytest.mark.parametrize(
    "url", ["tc.example.com", "ftp://tc.example.com", "https://tc.example.com/api", "https://"]
)
def test_a_root_url_that_is_not_a_bare_http_url_is_refused(url):
    (problem,) = problems_of({**raw(), "root_url": url})
    assert problem.startswith("root_url: ")


def test_the_workers_service_account_takes_both_email_and_id():
    data = raw()
    del data["providers"][1]["worker_service_account_id"]
    (problem,) = problems_of(data)
    assert "providers[1]" in problem and "worker_service_account_id" in problem
    data["providers"][1]["worker_service_account_id"] = "112233445566778899001"
    gcp = build(data).provider("gcp-a")
    assert gcp.worker_service_account_id == "112233445566778899001"  # type: ignore[union-attr]


NO_ACCOUNT = {"worker_service_account_email": None, "worker_service_account_id": None}


@pytest.mark.parametrize(
    ("scenario", "changes", "refused"),
    [
        ("workers register, with an account", {}, False),
        ("workers register by default, no account", NO_ACCOUNT, True),
        ("workers register, said so, no account", {**NO_ACCOUNT, "workers_register": True}, True),
        ("workers do not register, no account", {**NO_ACCOUNT, "workers_register": False}, False),
        ("workers do not register, with an account", {"workers_register": False}, False),
    ],
)
def test_a_gcp_provider_whose_workers_register_needs_their_service_account(
    scenario, changes, refused
):
    data = raw()
    gcp = data["providers"][1]
    gcp.update(changes)
    for key in [k for k, v in gcp.items() if v is None]:
        del gcp[key]  # a key left out of the file
    if not refused:
        assert build(data).provider("gcp-a").workers_register is gcp.get("workers_register", True)
        return
    (problem,) = problems_of(data)
    assert problem.startswith("providers[1]: provider 'gcp-a' ")
    assert "worker_service_account_email" in problem and "workers_register" in problem


def test_a_static_provider_is_an_id_and_nothing_of_a_cloud():
    data = {**BASE, "providers": [*BASE["providers"], {"id": "static", "kind": "static"}]}

    config = build(data)

    assert config.provider("static").regions == ()
    assert config.provider_kinds()["static"] == "static"
    assert "static" not in config.scanned_regions()


def test_a_static_provider_with_cloud_settings_is_refused_naming_them():
    hand_made = {"id": "rack", "kind": "static", "regions": ["x"], "budgets": {}}
    data = {**BASE, "providers": [*BASE["providers"], hand_made]}

    (problem,) = problems_of(data)

    assert problem.startswith("providers[3]: regions, budgets: a static provider has no cloud")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: d.update(web={"port": "8080"}),
            'web.port: must be an integer, not a string ("8080")',
        ),
        (
            lambda d: d["providers"][0].update(scan_interval_s=True),
            "providers[0].scan_interval_s: must be a number, not a boolean (true)",
        ),
        (
            lambda d: d["providers"][2].update(regions="eastus"),
            'providers[2].regions: must be a list, not a string: regions = ["eastus"]',
        ),
        (
            lambda d: d["providers"][0].update(shared_budget="yes"),
            'providers[0].shared_budget: must be true or false, not a string ("yes")',
        ),
        (
            lambda d: d["providers"][1].update(project=7),
            "providers[1].project: must be a string, not a number (7)",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_never_coerced(edit, expected):
    data = copy.deepcopy(BASE)
    edit(data)
    assert expected in problems_of(data)


def test_an_integer_is_a_number_and_an_array_a_list():
    data = copy.deepcopy(BASE)
    data["providers"][0].update(scan_interval_s=10, regions=["us-east-1"])
    provider = build(data).provider("aws-a")
    assert provider.scan_interval_s == 10.0 and provider.regions == ("us-east-1",)


def test_files_a_config_names_are_found_beside_it_not_where_the_process_runs(tmp_path, monkeypatch):
    deployment = tmp_path / "deploy"
    deployment.mkdir()
    path = deployment / "config.toml"
    path.write_text(
        'deployment_id = "d"\n'
        "[[providers]]\n"
        'id = "aws-a"\nkind = "aws"\nregions = ["us-east-1"]\n'
        'identity_certificate = "certs/ec2.pem"\n'
        'identity_certificates = {eu-west-1 = "/etc/wm/eu.pem"}\n'
        "[[providers]]\n"
        'id = "azure-a"\nkind = "azure"\nsubscription_id = "s"\nresource_group = "rg"\n'
        'regions = ["eastus"]\nca_bundle = "../arm.pem"\nidentity_roots = ["roots/a.pem"]\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load("../deploy/config.toml", environ={})
    aws, azure = config.providers
    assert aws.identity_certificate == str(deployment / "certs" / "ec2.pem")
    assert aws.identity_certificates == {"eu-west-1": "/etc/wm/eu.pem"}  # absolute: as given
    assert azure.ca_bundle == str(deployment / ".." / "arm.pem")
    assert azure.identity_roots == (str(deployment / "roots" / "a.pem"),)
