"""The take-over's figures in the demo's report: a worker both sides list counts once, and
each figure the issue asks for fails the run in words."""

from __future__ import annotations

import pytest

from wm.api.routers.workers import SCALE_DOWN_REASON
from wmsim.agent import Refusal
from wmsim.demo.take_over_report import (
    AgentLife,
    Comparison,
    Held,
    TakeOverFacts,
    figures,
    pool_capacity,
    problems,
)


@pytest.mark.parametrize(
    ("held", "expected"),
    [
        ([], {}),
        ([Held("p", "vm-1", 2), Held("p", "vm-2", 1)], {"p": 3}),
        # An imported worker: the legacy's row and wm's name the same VM.
        ([Held("p", "vm-1", 2), Held("p", "vm-1", 2), Held("q", "vm-1", 1)], {"p": 2, "q": 1}),
    ],
)
def test_capacity_counts_each_worker_once_per_pool(held, expected):
    assert pool_capacity(held) == expected


def facts(**changes: object) -> TakeOverFacts:
    base: dict[str, object] = {
        "provider_id": "azure2",
        "moved_at_s": 12.0,
        "imported_pools": ["win"],
        "imported_workers": 1,
        "agents": [
            AgentLife("azure2", "win", "vm-1", ["registered"], ["reregistered", "task-done"]),
            AgentLife("aws", "linux", "i-1", ["registered"], ["task-done", "removed"]),
        ],
        "tasks_submitted": 5,
        "tasks_completed": 5,
        "tasks_requeued": 0,
        "capacity": [{"win": 1, "linux": 2}],
        "max_capacity": {"win": 1, "linux": 2},
        "leaked_vms": 0,
        "leaked_resources": 0,
        "forwarded": {"registerWorker": 1},
        "comparisons": [Comparison("workerPool", "linux", True)],
    }
    return TakeOverFacts(**{**base, **changes})  # type: ignore[arg-type]


def test_a_move_that_held_has_no_problem():
    scaled_down = AgentLife(
        "azure2", "win", "vm-2", ["registered"], [f"told-to-terminate:{SCALE_DOWN_REASON}"]
    )
    figured = figures(facts(agents=[*facts().agents, scaled_down]))

    assert problems(figured) == []
    assert figured["imported_workers_scaled_down"] == 1
    assert figured["moved_workers_running_through"] == 2
    assert figured["moved_workers_reregistered_at_wm"] == 1


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {
                "agents": [
                    AgentLife(
                        "azure2", "win", "vm-1", ["registered"], ["reregister-refused:InputError"]
                    )
                ]
            },
            "1 imported workers refused at re-registration",
        ),
        (
            {
                "agents": [
                    AgentLife(
                        "aws",
                        "linux",
                        "i-1",
                        ["registered", "reregister-refused:InputError"],
                        [],
                        [Refusal("reregisterWorker", 400, "InputError", "bad secret", (0, 400))],
                    )
                ]
            },
            "reregisterWorker of aws worker i-1 (linux) answered 400 InputError: bad secret "
            "(tries: [0, 400])",
        ),
        (
            {
                "agents": [
                    AgentLife("azure2", "win", "vm-1", ["registered"], ["told-to-terminate:x"])
                ]
            },
            "1 imported workers told to terminate",
        ),
        ({"tasks_completed": 4}, "1 tasks lost"),
        ({"capacity": [{"win": 2}]}, "1 samples with a pool's capacity over its maximum"),
        ({"leaked_vms": 2}, "2 VMs left in the clouds"),
        ({"comparisons": [Comparison("workerPool", "linux", False)]}, "1 answers through the"),
        ({"moved_at_s": None}, "azure2 never moved to wm"),
        ({"imported_workers": 0}, "no worker of azure2 was imported"),
    ],
)
def test_each_failed_figure_fails_the_run_saying_which(changes, words):
    assert any(words in problem for problem in problems(figures(facts(**changes))))
