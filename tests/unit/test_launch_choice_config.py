"""`[launch_choice]`: each pool's mode by the first glob that matches it; typos refused at start
with their key path."""

import pytest

from tests.support.configs import build, raw
from wm.config.launch_choice import ChoiceMode, PoolChoice
from wm.errors import ConfigError


def choice_config(section):
    data = raw()
    data.pop("pools", None)
    data["launch_choice"] = section
    return build(data).launch_choice


def problems_of(section) -> list[str]:
    data = raw()
    data.pop("pools", None)
    data["launch_choice"] = section
    with pytest.raises(ConfigError) as caught:
        build(data)
    return caught.value.problems


def test_without_the_section_every_pool_launches_by_weights():
    config = build().launch_choice
    assert config.for_pool("proj-ci/linux") == PoolChoice(ChoiceMode.WEIGHTS, 3.0, 0.5)
    assert config.all_weights


def test_the_first_matching_glob_gives_a_pool_its_mode_and_settings():
    config = choice_config(
        {
            "default": "shadow",
            "beta": 2.0,
            "pools": [
                {"match": "proj-ci/*", "mode": "cost", "beta": 4, "spread": 0.25},
                {"match": "proj-*", "mode": "weights"},
            ],
        }
    )
    assert config.for_pool("proj-ci/linux") == PoolChoice(ChoiceMode.COST, 4.0, 0.25)
    assert config.for_pool("proj-web/win") == PoolChoice(ChoiceMode.WEIGHTS, 2.0, 0.5)
    assert config.for_pool("gecko-3/b-linux") == PoolChoice(ChoiceMode.SHADOW, 2.0, 0.5)
    assert not config.all_weights


def test_a_simulated_markets_clock_speed_reaches_every_pools_choice():
    config = choice_config({"clock_speed": 60, "pools": [{"match": "proj-ci/*", "mode": "cost"}]})
    assert config.for_pool("proj-ci/linux") == PoolChoice(ChoiceMode.COST, 3.0, 0.5, 60.0)
    assert config.for_pool("other/pool").clock_speed == 60.0


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"defualt": "cost"}, "launch_choice.defualt: unknown key"),
        ({"default": "cheapest"}, "launch_choice.default: must be one of"),
        ({"beta": -1}, "launch_choice.beta: must be >= 0"),
        ({"spread": 0}, "launch_choice.spread: must be > 0"),
        ({"clock_speed": 0}, "launch_choice.clock_speed: must be > 0"),
        ({"spread": "half"}, "launch_choice.spread: must be a number"),
        ({"pools": [{"match": "a/*", "mode": "cost", "bta": 3}]}, "launch_choice.pools[0].bta"),
        ({"pools": [{"match": "a/*", "mode": "costs"}]}, "launch_choice.pools[0].mode: must be"),
        ({"pools": [{"mode": "cost"}]}, "launch_choice.pools[0].match: required"),
        ({"pools": [{"match": "a/*", "mode": "cost", "spread": 2}]}, "launch_choice.pools[0].spre"),
    ],
)
def test_a_typo_is_refused_naming_its_key_path(section, expected):
    problems = problems_of(section)
    assert any(p.startswith(expected) for p in problems), problems
