"""The provisioner process wakes the job of the provider whose pool's tasks arrived, pools made
after it started included."""

from __future__ import annotations

from procs.provisioner import PoolWaker


class Pools:
    def __init__(self, pools: dict[str, str]) -> None:
        self.pools = pools
        self.reads = 0

    def load(self) -> dict[str, str]:
        self.reads += 1
        return dict(self.pools)


def test_a_known_pools_tasks_wake_its_provider_without_reading_the_pools_again():
    pools, woken = Pools({"proj/a": "aws"}), []
    waker = PoolWaker(pools.load, woken.append, {"aws", "gcp"})
    waker("proj/a")
    assert woken == ["aws"] and pools.reads == 1


def test_a_pool_made_after_the_start_is_read_once_and_its_provider_woken():
    pools, woken = Pools({"proj/a": "aws"}), []
    waker = PoolWaker(pools.load, woken.append, {"aws", "gcp"})
    pools.pools["proj/new"] = "gcp"
    waker("proj/new")
    waker("proj/new")
    assert woken == ["gcp", "gcp"] and pools.reads == 2


def test_a_pool_of_another_process_or_none_wakes_nothing():
    pools, woken = Pools({"proj/a": "azure"}), []
    waker = PoolWaker(pools.load, woken.append, {"aws"})
    waker("proj/a")
    waker("proj/unknown")
    assert woken == []
