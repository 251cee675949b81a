"""report.png: the demo run at a glance (matplotlib, no screen needed).

One panel per pool: capacity by state (requested, running, stopping) stacked, pending and
claimed tasks as lines. Below them, per cloud: how long tasks waited and workers took to
register, and what one scan cost. Legends sit outside the panels, never over what they plot:
the pools' one legend (every pool panel draws the same series) at the foot, the clouds'
beside their panel.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from wmsim.clouds import CLOUDS
from wmsim.hand_made import COLOUR as HAND_MADE_COLOUR
from wmsim.hand_made import KIND as HAND_MADE

STATE_COLOURS = {"requested": "#f2b134", "running": "#4a9c5d", "stopping": "#b0b0b0"}


def colour(cloud: str) -> str | None:
    if cloud == HAND_MADE:
        return HAND_MADE_COLOUR
    return CLOUDS[cloud].colour if cloud in CLOUDS else None


def write_png(report: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure = draw(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)


def draw(report: dict[str, Any]) -> Any:
    """The report's figure (a matplotlib Figure; the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pools = list(report["timeline"]["pools"])
    columns = 2
    pool_rows = max(1, math.ceil(len(pools) / columns))
    # Constrained layout makes room for the legends outside the panels.
    market = report.get("market")
    rows = pool_rows + 1 + (1 if market else 0)
    figure, axes = plt.subplots(
        rows,
        columns,
        figsize=(13, 3.4 * rows),
        squeeze=False,
        layout="constrained",
    )
    times = report["timeline"]["t_s"]
    for index, pool in enumerate(pools):
        _pool_panel(axes[index // columns][index % columns], pool, report, times)
    for index in range(len(pools), pool_rows * columns):
        axes[index // columns][index % columns].axis("off")
    if pools:
        handles, labels = axes[0][0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8)
    _latency_panel(axes[pool_rows][0], report)
    _scan_panel(axes[pool_rows][1], report)
    if market:
        _launches_panel(axes[pool_rows + 1][0], market)
        _cost_panel(axes[pool_rows + 1][1], market)
    run = report["run"]
    verdict = "healthy" if report["healthy"] else "UNHEALTHY: " + "; ".join(report["problems"])
    figure.suptitle(
        f"wm demo: {run['tasks_completed']}/{run['tasks_submitted']} tasks, "
        f"{run['workers_launched']} workers, peak capacity / demand "
        f"{_fmt(run['peak_capacity_over_demand'])}, {run['leaked_vms']} VMs leaked"
        + (
            f", {run['preemptions']} pre-empted ({run['replacements']} replaced, p95 "
            f"{_fmt(run['replace_p95_s'])} s)"
            if run["preemptions"]
            else ""
        )
        + f" ({verdict})",
        fontsize=12,
    )
    return figure


def _launches_panel(ax: Any, market: dict[str, Any]) -> None:
    """--market: launches per launch config over time, each dry spell shaded."""
    launches = market["launches"]
    step = launches["bucket_s"]
    for pool, configs in launches["pools"].items():
        for config, counts in configs.items():
            ax.step([i * step for i in range(len(counts))], counts, where="post",
                    label=f"{pool}/{config}")  # fmt: skip
    for start, end in sorted({(s["dry_at_s"], s["dry_until_s"]) for s in market["dry_spells"]}):
        ax.axvspan(start, end, color="grey", alpha=0.15)
    ax.set_title(f"launches per {step:g} s (shaded: a zone dry)", fontsize=10)
    ax.set_xlabel("seconds")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _cost_panel(ax: Any, market: dict[str, Any]) -> None:
    """--market: what the clouds billed, per launch config."""
    cost = market["cost"]
    configs = cost["by_launch_config"]
    ax.barh(list(configs), list(configs.values()))
    ax.tick_params(axis="y", labelsize=7)
    per_hour = cost["per_task_hour"]
    ax.set_title(
        # A bare $ would start matplotlib's mathtext: escaped.
        f"billed \\${cost['total']:.2f} in market {market['scenario']}"
        + (f", \\${per_hour:.4f} per task-hour" if per_hour is not None else ""),
        fontsize=10,
    )
    ax.set_xlabel("$")


def _pool_panel(ax: Any, pool: str, report: dict[str, Any], times: list[float]) -> None:
    series = report["timeline"]["pools"][pool]
    states = list(STATE_COLOURS)
    ax.stackplot(
        times,
        *(series[s] for s in states),
        labels=[f"{s} capacity" for s in states],
        colors=[STATE_COLOURS[s] for s in states],
        alpha=0.8,
    )
    ax.plot(times, series["pending"], color="#c0392b", linewidth=1.5, label="pending tasks")
    ax.plot(times, series["claimed"], color="#2c3e50", linewidth=1, label="running tasks")
    cloud = report["pool_clouds"][pool]
    slowest = report["pools"][pool]["slowest_stage"]
    title = f"{pool} ({cloud})"
    if slowest:
        title += f"\nslowest stage: {slowest['label']}, p95 {_fmt(slowest['p95_s'])} s"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("seconds")
    ax.margins(x=0)


def _latency_panel(ax: Any, report: dict[str, Any]) -> None:
    measures = [
        ("task_wait_p50_s", "task wait p50"),
        ("task_wait_p95_s", "task wait p95"),
        ("registration_p50_s", "registration p50"),
        ("registration_p95_s", "registration p95"),
    ]
    clouds = list(report["clouds"])
    width = 0.8 / len(clouds)
    for offset, cloud in enumerate(clouds):
        values = [report["clouds"][cloud][key] or 0 for key, _ in measures]
        xs = [i + offset * width for i in range(len(measures))]
        ax.bar(xs, values, width, label=cloud, color=colour(cloud))
    ax.set_xticks([i + width * (len(clouds) - 1) / 2 for i in range(len(measures))])
    ax.set_xticklabels([label for _, label in measures], fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title("waiting: task submitted to claimed, launch to registered", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _scan_panel(ax: Any, report: dict[str, Any]) -> None:
    ax.axis("off")
    rows = [
        [
            cloud,
            str(figures["scans"]),
            _fmt(figures["scan_api_calls"]),
            _fmt(figures["scan_duration_p95_s"]),
            str(figures["cloud_api_calls"]),
            _fmt(figures["peak_capacity_over_demand"]),
        ]
        for cloud, figures in report["clouds"].items()
    ]
    table = ax.table(
        cellText=rows,
        colLabels=[
            "cloud",
            "scans",
            "API calls / scan",
            "scan p95 (s)",
            "API calls",
            "peak cap / demand",
        ],
        loc="center",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.auto_set_column_width(col=list(range(len(rows[0]) if rows else 0)))
    table.scale(1, 1.6)
    ax.set_title("scans and cloud API calls", fontsize=10)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
