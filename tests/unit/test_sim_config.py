"""wmsim's [sim] and [demo] tables: read from the same file as wm's sections, checked together."""

import pytest
import tomli_w

from tests.support.configs import raw
from wm.config.loader import extension_sections
from wm.errors import ConfigError
from wmsim.config import SECTIONS, load


def test_the_example_config_gives_wm_and_the_simulator_their_sections():
    settings = load("config.toml", environ={})

    assert settings.wm.deployment_id == "wm-demo"
    assert (settings.sim.aws.port, settings.sim.gcp.port, settings.sim.azure.port) == (
        5101,
        5102,
        5103,
    )
    assert settings.demo.minutes == 3


def test_the_installed_package_declares_the_simulators_tables_to_wm():
    assert extension_sections() == SECTIONS


def test_problems_in_both_packages_sections_are_listed_at_once(tmp_path):
    data = {k: v for k, v in raw().items() if k != "pools"}
    data["providers"][0]["scan_interval_s"] = -1
    data["sim"] = {"aws": {"port": 70000, "boot": 3}}
    data["demo"] = {"task_s": [9.0, 1.0]}
    path = tmp_path / "config.toml"
    path.write_text(tomli_w.dumps(data))

    with pytest.raises(ConfigError) as caught:
        load(path, environ={})

    problems = caught.value.problems
    assert "providers[0].scan_interval_s: must be > 0" in problems
    assert "sim.aws.port: must be <= 65535" in problems
    assert "sim.aws.boot: unknown key" in problems
    assert any(p.startswith("demo.task_s: must be [shortest, longest]") for p in problems)


def test_the_simulators_tables_are_as_strict_as_wms(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        'deployment_id = "d"\n[sim.aws]\nport = "5101"\n[demo]\ntask_s = [5, 20.0]\n'
        "minutes = true\n"
    )
    with pytest.raises(ConfigError) as caught:
        load(path, environ={})
    assert caught.value.problems == [
        'sim.aws.port: must be an integer, not a string ("5101")',
        "demo.minutes: must be a number, not a boolean (true)",
    ]


def test_the_simulators_state_dir_is_beside_the_config_as_the_files_it_names(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text('deployment_id = "d"\n')
    monkeypatch.chdir("/")
    assert load(path, environ={}).sim.state_dir == str(tmp_path / ".wm-sim")


def test_a_market_scenario_is_off_by_default_and_one_that_cannot_be_read_is_refused(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('deployment_id = "d"\n')
    assert load(path, environ={}).sim.market is None
    path.write_text('deployment_id = "d"\n[sim]\nmarket = "S1"\nmarket_seed = 4\n')
    assert (load(path, environ={}).sim.market, load(path, environ={}).sim.market_seed) == ("S1", 4)

    path.write_text('deployment_id = "d"\n[sim]\nmarket = "S9"\nmarket_speed = 0\n')
    with pytest.raises(ConfigError) as caught:
        load(path, environ={})

    problems = caught.value.problems
    assert any(p.startswith("sim.market: no market scenario 'S9' (known: S0, S1") for p in problems)
    assert "sim.market_speed: must be > 0" in problems
