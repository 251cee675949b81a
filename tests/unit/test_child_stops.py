"""What a provisioner's exit code is, given how its children ended once it was stopping."""

from __future__ import annotations

import signal

import pytest

from procs.children import EXIT_CHILD_LOST, stop_exit_code


@pytest.mark.parametrize(
    "codes",
    [
        [0, 0, 0],
        # The group's signal reached a child as it finished (the interpreter no longer
        # handled it): it stopped as asked.
        [0, -signal.SIGTERM, -signal.SIGTERM],
        [-signal.SIGINT, 0, 0],
    ],
)
def test_children_that_stopped_by_their_own_hand_or_by_the_stop_signal_are_a_clean_stop(codes):
    assert stop_exit_code(codes) == 0


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([0, 3, 0], 3),  # one gave up: its own code
        ([0, -signal.SIGKILL, 0], EXIT_CHILD_LOST),  # killed after the grace
        ([-signal.SIGSEGV, 1], EXIT_CHILD_LOST),  # the first failure decides
        ([-signal.SIGTERM, 1], 1),
    ],
)
def test_a_child_that_failed_or_outlived_the_grace_fails_the_stop(codes, expected):
    assert stop_exit_code(codes) == expected
