"""The demo's figures: percentiles, over-provisioning, per cloud, and what makes a run unhealthy."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from wm.model import Task, WorkerRecord, WorkerState
from wm.workers.stages import percentile
from wmsim.demo.report import PoolSample, RunFacts, Sample, ScanSample, build, peak_ratio

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([3.0], 95, 3.0),
        ([1, 2, 3, 4], 50, 2),
        ([1, 2, 3, 4], 95, 4),
        (list(range(1, 101)), 95, 95),
    ],
)
def test_nearest_rank_percentiles(values, q, expected):
    assert percentile(values, q) == expected


def sample(t_s: float, **pools: tuple[int, int, int, int, int]) -> Sample:
    return Sample(t_s, {p: PoolSample(*v) for p, v in pools.items()}, {})


@pytest.mark.parametrize(
    ("samples", "pools", "expected"),
    [
        # Capacity follows demand exactly: 1.0.
        ([sample(0, a=(10, 0, 0, 0, 0)), sample(1, a=(0, 10, 0, 10, 0))], ["a"], 1.0),
        # Twice the workers the tasks needed: 2.0.
        ([sample(0, a=(5, 0, 10, 0, 0))], ["a"], 2.0),
        # Pools peaking at different times: each pool's peak counts once (not their sum at
        # one moment), so idle workers waiting to time out are not over-provisioning.
        (
            [
                sample(0, a=(4, 0, 4, 0, 0), b=(0, 0, 0, 0, 0)),
                sample(1, a=(0, 0, 0, 4, 0), b=(4, 0, 4, 0, 0)),
            ],
            ["a", "b"],
            1.0,
        ),
        # Stopping capacity is not capacity; no demand: no figure.
        ([sample(0, a=(0, 0, 0, 0, 3))], ["a"], None),
        # Only the pools asked about.
        ([sample(0, a=(2, 0, 2, 0, 0), b=(1, 0, 9, 0, 0))], ["a"], 1.0),
    ],
)
def test_peak_capacity_over_demand(samples, pools, expected):
    assert peak_ratio(samples, pools) == expected


def task(task_id: int, pool: str, wait_s: float | None, state: str = "completed") -> Task:
    claimed = T0 + timedelta(seconds=wait_s) if wait_s is not None else None
    return Task(task_id, pool, state, 5.0, T0, claimed_at=claimed)


def worker(worker_id: str, pool: str, registered_after_s: float | None) -> WorkerRecord:
    registered = T0 + timedelta(seconds=registered_after_s) if registered_after_s else None
    return WorkerRecord(
        worker_id=worker_id,
        pool_id=pool,
        worker_group="r",
        provider_id="p",
        state=WorkerState.STOPPED,
        capacity=1,
        launch_config_id="lc",
        created=T0,
        last_modified=T0,
        idempotency_token="t",
        registered_at=registered,
    )


def facts(**changes) -> RunFacts:
    base = dict(
        pool_clouds={"ec2": "aws", "win": "azure"},
        samples=[
            Sample(
                0,
                {"ec2": PoolSample(2, 0, 2, 0, 0), "win": PoolSample(1, 0, 1, 0, 0)},
                {"aws": 10, "azure": 30, "gcp": 0},
            )
        ],
        tasks=[task(1, "ec2", 2.0), task(2, "ec2", 4.0), task(3, "win", 10.0)],
        workers=[worker("w1", "ec2", 6.0), worker("w2", "win", 20.0)],
        scans=[ScanSample("aws", "aws-1", "r", 2, 0.1), ScanSample("azure", "az", "r", 5, 1.5)],
        leaked_vms={},
        live_rows={},
        crashed={},
        submitted={"ec2": 2, "win": 1},
    )
    return RunFacts(**(base | changes))


def test_a_clean_run_is_healthy_with_figures_for_the_run_and_each_cloud():
    report = build(facts())

    assert report["healthy"] and report["problems"] == []
    run, aws, azure = report["run"], report["clouds"]["aws"], report["clouds"]["azure"]
    assert (run["tasks_submitted"], run["tasks_completed"]) == (3, 3)
    assert (aws["task_wait_p50_s"], aws["task_wait_p95_s"]) == (2.0, 4.0)
    assert azure["registration_p95_s"] == 20.0
    assert (aws["scan_api_calls"], azure["scan_duration_p95_s"]) == (2.0, 1.5)
    assert (run["cloud_api_calls"], aws["cloud_api_calls"]) == (40, 10)
    assert report["clouds"]["gcp"]["tasks_submitted"] == 0
    assert report["clouds"]["gcp"]["task_wait_p95_s"] is None


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (
            {"tasks": [task(1, "ec2", 2.0), task(2, "ec2", None, "pending")]},
            "tasks did not complete",
        ),
        ({"crashed": {"scanner-azure": "azure"}}, "processes crashed: scanner-azure"),
        ({"leaked_vms": {"aws": 2}}, "2 VMs were left"),
        ({"live_rows": {"azure": 1}}, "1 workers were not stopped"),
    ],
)
def test_what_makes_a_run_unhealthy_is_said_in_words(changes, problem):
    report = build(facts(**changes))
    assert not report["healthy"]
    assert any(problem in p for p in report["problems"]), report["problems"]


def test_a_crash_counts_for_its_cloud_and_for_the_run():
    report = build(facts(crashed={"scanner-azure": "azure", "web": ""}))
    assert report["run"]["crashed_processes"] == 2
    assert report["clouds"]["azure"]["crashed_processes"] == 2  # its scanner, and the web
    assert report["clouds"]["aws"]["crashed_processes"] == 1


def test_pre_emptions_count_with_the_time_until_their_tasks_ran_again():
    lost = replace(worker("w1", "ec2", 5.0), preempted_at=T0 + timedelta(seconds=30))
    requeued = replace(
        task(1, "ec2", 40.0), requeued_at=T0 + timedelta(seconds=30)
    )  # back to pending at 30 s, claimed again at 40 s
    replacement = replace(worker("w2", "ec2", 38.0), created=T0 + timedelta(seconds=31))
    later = replace(worker("w3", "ec2", 90.0), created=T0 + timedelta(seconds=80))
    lost_win = replace(worker("w4", "win", 5.0), preempted_at=T0 + timedelta(seconds=40))
    never_ran = replace(task(3, "win", None, "pending"), requeued_at=T0 + timedelta(seconds=40))

    report = build(
        facts(
            workers=[lost, replacement, later, lost_win],
            tasks=[requeued, task(2, "ec2", 4.0), never_ran],
        )
    )

    aws, azure, run = report["clouds"]["aws"], report["clouds"]["azure"], report["run"]
    assert (aws["preemptions"], aws["preempted_tasks"], aws["replacements"]) == (1, 1, 1)
    assert aws["replace_p95_s"] == 10.0
    assert (azure["preemptions"], azure["preempted_tasks"], azure["replace_p95_s"]) == (1, 1, None)
    assert (run["preemptions"], run["replacements"]) == (2, 1)


def test_each_pool_shows_its_slowest_stage():
    slow = replace(
        worker("w1", "win", 50.0), accepted_at=T0 + timedelta(seconds=1)
    )  # registered 50 s after launch, accepted after 1 s: the boot is the slow part

    report = build(facts(workers=[slow]))

    assert report["pools"]["win"]["slowest_stage"]["stage"] == "accepted_to_running"
    assert report["pools"]["ec2"]["slowest_stage"] is None
    assert report["stages"]["azure"]["accepted_to_running"]["p95_s"] == 49.0


def test_a_static_pools_machines_are_reported_with_their_tasks():
    # Scenario: a static pool beside the clouds, two machines made with createWorker; one ran
    # two tasks, the other one; both were retired (stopped) at the end.
    mac1 = replace(worker("wm-id-1", "mac", 0.5), tc_worker_id="mac-01")
    mac2 = replace(worker("wm-id-2", "mac", 0.7), tc_worker_id="mac-02")
    ran = [
        replace(task(10 + n, "mac", 1.0), claimed_by=name)
        for n, name in enumerate(["wm-id-1", "wm-id-1", "wm-id-2"])
    ]
    base = facts()

    report = build(
        facts(
            pool_clouds={**base.pool_clouds, "mac": "static"},
            workers=[*base.workers, mac1, mac2],
            tasks=[*base.tasks, *ran],
            submitted={**base.submitted, "mac": 3},
            # Four slots of running machines for one pending task.
            samples=[
                Sample(
                    0,
                    {**base.samples[0].pools, "mac": PoolSample(1, 0, 0, 4, 0)},
                    base.samples[0].api_calls,
                )
            ],
        )
    )

    # Outcome: the machines, by their Taskcluster names, with their tasks; figures for the
    # static pools apart from the clouds' columns; the run counts their tasks too.
    assert report["healthy"], report["problems"]
    assert [
        (m["workerId"], m["registered"], m["tasks_completed"])
        for m in report["hand_made"]["machines"]
    ] == [("mac-01", True, 2), ("mac-02", True, 1)]
    hand_made = report["hand_made"]["figures"]
    assert (hand_made["tasks_completed"], hand_made["registration_p95_s"]) == (3, 0.7)
    assert (hand_made["cloud_api_calls"], hand_made["leaked_vms"]) == (0, 0)
    assert "static" not in report["clouds"]
    assert report["run"]["tasks_completed"] == 6
    # Nothing was launched for the rack: over-provisioning is the clouds' alone.
    assert (
        report["run"]["peak_capacity_over_demand"]
        == build(base)["run"]["peak_capacity_over_demand"]
    )
    assert hand_made["peak_capacity_over_demand"] is None
    assert report["pool_clouds"]["mac"] == "static"


def test_a_hand_made_machine_that_never_registered_makes_the_run_unhealthy():
    silent = replace(worker("wm-id-1", "mac", None), tc_worker_id="mac-01")
    base = facts()

    report = build(
        facts(pool_clouds={**base.pool_clouds, "mac": "static"}, workers=[*base.workers, silent])
    )

    assert "hand-made machines never registered: mac-01" in report["problems"]


def test_a_static_pools_machines_waiting_for_work_is_not_its_slowest_stage():
    # Scenario: a rack machine registers at once and waits 90 s for its first task (nobody
    # launched it for one); its delete decision takes 3 s to be carried out.
    mac = replace(
        worker("wm-id-1", "mac", 0.5),
        first_claimed_at=T0 + timedelta(seconds=90),
        stopping_at=T0 + timedelta(seconds=100),
        delete_called_at=T0 + timedelta(seconds=103),
    )
    ec2 = replace(mac, worker_id="w1", pool_id="ec2")  # the same times on a cloud pool
    base = facts()

    report = build(facts(pool_clouds={**base.pool_clouds, "mac": "static"}, workers=[mac, ec2]))

    assert report["pools"]["mac"]["slowest_stage"]["stage"] == "decided_to_delete"
    assert report["pools"]["ec2"]["slowest_stage"]["stage"] == "registered_to_claim"


def test_report_png_legends_sit_outside_every_panel_they_could_hide(tmp_path):
    import matplotlib.pyplot as plt

    from wmsim.demo.plot import draw, write_png

    report = build(facts())
    figure = draw(report)
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes)]
        boxes = [legend.get_window_extent(renderer) for legend in legends if legend]
        panels = [ax.get_window_extent(renderer) for ax in figure.axes if ax.axison]
        panels.append(figure._suptitle.get_window_extent(renderer))  # the run's verdict
        assert boxes and panels
        for box in boxes:
            assert not any(box.overlaps(panel) for panel in panels), box
    finally:
        plt.close(figure)
    write_png(report, tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 0
