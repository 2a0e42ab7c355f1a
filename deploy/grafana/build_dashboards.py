"""Writes the Grafana dashboards under deploy/grafana/dashboards/ (checked in), built with
Grafana's own SDK (grafana-foundation-sdk: typed builders of Grafana 11's dashboard model).

    python deploy/grafana/build_dashboards.py          # rewrite the JSON files
    python deploy/grafana/build_dashboards.py --check  # exit 1 if they are stale

Every panel queries the Prometheus data source chosen by the ``datasource`` variable.
The integration test evaluates every ``expr`` here against a real Prometheus, so keep
them plain PromQL plus Grafana's ``$__rate_interval``, ``$connector`` and ``$task``;
:func:`target` narrows every selector to the chosen cluster's workers (``$instance``).

A panel is a call of :func:`timeseries`, :func:`stat`, :func:`table` or :func:`heatmap`
with a title, a description and its queries, placed with ``lay.add(panel, width,
height)`` after the ``lay.row(...)`` it belongs to, e.g.::

    lay.add(
        timeseries(
            "Records / s",
            "Records polled and written.",
            targets(
                (f"sum(rate(eos_task_records_polled_total[{RI}]))", "polled"),
                (f"sum(rate(eos_task_records_written_total[{RI}]))", "written"),
            ),
            "rps",
        ),
        12,
        8,
    )

The SDK's builders take anything else a panel can have (overrides, thresholds, ...).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import heatmap as heatmap_panel
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.builders import stat as stat_panel
from grafana_foundation_sdk.builders import table as table_panel
from grafana_foundation_sdk.builders import timeseries as timeseries_panel
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import heatmap as heatmap_model
from grafana_foundation_sdk.models import prometheus as prometheus_model

OUT = Path(__file__).resolve().parent / "dashboards"
DS = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
RI = "$__rate_interval"

Panel = timeseries_panel.Panel | stat_panel.Panel | table_panel.Panel | heatmap_panel.Panel
Query = prometheus.Dataquery


class Layout:
    """Places panels left to right in a 24-column grid, a row header above each group,
    and numbers them."""

    def __init__(self) -> None:
        self.items: list[Panel | dash.Row] = []
        self.x = 0
        self.y = 0
        self.row_h = 0

    def add(self, panel: Panel, w: int, h: int) -> None:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self._place(panel, w, h)
        self.x += w
        self.row_h = max(self.row_h, h)

    def row(self, title: str) -> None:
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self._place(dash.Row(title).collapsed(False), 24, 1)
        self.x, self.y, self.row_h = 0, self.y + 1, 0

    def _place(self, item: Panel | dash.Row, w: int, h: int) -> None:
        item.id(len(self.items) + 1).grid_pos(model.GridPos(h=h, w=w, x=self.x, y=self.y))
        self.items.append(item)


#: A metric the workers export (eos's own, and the process and Python collectors'),
#: with its label matchers if it has any.
_SERIES = re.compile(r"\b((?:eos|process|python)_[A-Za-z0-9_]*)(\{[^}]*\})?")
CLUSTER_SCOPE = 'instance=~"$instance"'
"""What every query selects: the workers of the chosen cluster (``$instance`` is the hidden
variable listing them, from ``$namespace`` and ``$cluster``)."""


def scoped(expr: str) -> str:
    """``expr`` with every selector of a worker metric narrowed to the chosen cluster's
    workers, so one Prometheus scraping several clusters shows one."""

    def narrow(found: re.Match[str]) -> str:
        name, matchers = found[1], found[2]
        if matchers is None:
            return f"{name}{{{CLUSTER_SCOPE}}}"
        inner = matchers[1:-1].strip()
        return f"{name}{{{CLUSTER_SCOPE}{', ' + inner if inner else ''}}}"

    return _SERIES.sub(narrow, expr)


def target(expr: str, legend: str = "", ref: int = 0) -> Query:
    return (
        Query()
        .ref_id(chr(ord("A") + ref))
        .datasource(DS)
        .expr(scoped(expr))
        .legend_format(legend or "__auto")
        .range()
    )


def targets(*pairs: tuple[str, str]) -> list[Query]:
    return [target(expr, legend, i) for i, (expr, legend) in enumerate(pairs)]


def timeseries(
    title: str, description: str, queries: list[Query], unit: str = "short", *, stack: bool = False
) -> timeseries_panel.Panel:
    stacking = common.StackingMode.NORMAL if stack else common.StackingMode.NONE
    return (
        timeseries_panel.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .targets(list(queries))
        .unit(unit)
        .min(0)
        .draw_style(common.GraphDrawStyle.LINE)
        .line_width(1)
        .fill_opacity(20 if stack else 10)
        .show_points(common.VisibilityMode.NEVER)
        .span_nulls(False)
        .stacking(common_builders.StackingConfig().mode(stacking).group("A"))
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(
            common_builders.VizTooltipOptions()
            .mode(common.TooltipDisplayMode.MULTI)
            .sort(common.SortOrder.DESCENDING)
        )
    )


def stat(
    title: str,
    description: str,
    expr: str,
    unit: str = "none",
    red_at: float | None = None,
    *,
    legend: str = "",
    text_mode: str = "auto",
) -> stat_panel.Panel:
    """One number per series; ``text_mode="name"`` shows the legend instead (e.g. which
    instance), ``"value_and_name"`` both."""
    steps = [model.Threshold(value=None, color="green")]
    if red_at is not None:
        steps.append(model.Threshold(value=red_at, color="red"))
    return (
        stat_panel.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .with_target(target(expr, legend).instant())
        .unit(unit)
        .thresholds(dash.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(steps))
        .color_scheme(dash.FieldColor().mode(model.FieldColorModeId.THRESHOLDS))
        .reduce_options(
            common_builders.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)
        )
        .color_mode(common.BigValueColorMode.BACKGROUND)
        .graph_mode(common.BigValueGraphMode.AREA)
        .text_mode(common.BigValueTextMode(text_mode))
    )


def table(title: str, description: str, expr: str) -> table_panel.Panel:
    hidden = {"excludeByName": {"Time": True, "Value": True}}
    return (
        table_panel.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .with_target(target(expr).instant().format(prometheus_model.PromQueryFormat.TABLE))
        .show_header(True)
        .with_transformation(model.DataTransformerConfig(id_val="organize", options=hidden))
    )


def heatmap(title: str, description: str, expr: str) -> heatmap_panel.Panel:
    return (
        heatmap_panel.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .with_target(target(expr, "{{le}}").format(prometheus_model.PromQueryFormat.HEATMAP))
        .calculate(False)
        .y_axis(heatmap_panel.YAxisConfig().axis_placement(common.AxisPlacement.LEFT).unit("short"))
        .cell_gap(1)
        .color(
            heatmap_panel.HeatmapColorOptions()
            .mode(heatmap_model.HeatmapColorMode.SCHEME)
            .scheme("Oranges")
            .steps(64)
        )
        .mode(common.TooltipDisplayMode.SINGLE)
        .hide_y_histogram()
    )


def quantiles(metric: str, by: str = "", selector: str = "") -> list[tuple[str, str]]:
    group = f"{by}, le" if by else "le"
    prefix = f"{{{{{by}}}}} " if by else ""
    return [
        (
            f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{selector}[{RI}])))",
            f"{prefix}p{round(q * 100)}",
        )
        for q in (0.5, 0.99)
    ]


def query_variable(
    name: str, query: str, *, multi: bool, include_all: bool, hidden: bool = False
) -> dash.QueryVariable:
    variable = (
        dash.QueryVariable(name)
        .label(name)
        .datasource(DS)
        .query({"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"})
        .hide(model.VariableHide.HIDE_VARIABLE if hidden else model.VariableHide.DONT_HIDE)
        .regex("")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.NUMERICAL_ASC)
        .multi(multi)
        .include_all(include_all)
    )
    return variable.all_value(".*") if include_all and not hidden else variable


def cluster_variables() -> list[dash.QueryVariable]:
    """``$namespace`` and ``$cluster`` (a group.id, from ``eos_worker_info``) to choose,
    and the hidden ``$instance``: that cluster's workers, which every query selects. Its
    "All" is the list of those workers (no ``.*``), so it never reaches another cluster."""
    return [
        query_variable(
            "namespace", "label_values(eos_worker_info, namespace)", multi=False, include_all=True
        ),
        query_variable(
            "cluster",
            'label_values(eos_worker_info{namespace=~"$namespace"}, group)',
            multi=False,
            include_all=False,
        ),
        query_variable(
            "instance",
            'label_values(eos_worker_info{namespace=~"$namespace", group="$cluster"}, instance)',
            multi=True,
            include_all=True,
            hidden=True,
        ),
    ]


def dashboard(
    uid: str,
    title: str,
    description: str,
    layout: Layout,
    variables: list[dash.QueryVariable],
) -> dash.Dashboard:
    board = (
        dash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["eos", "kafka"])
        .timezone("browser")
        .editable()
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-1h", "now")
        .version(1)
        .link(
            dash.DashboardLink("eos dashboards")
            .type(model.DashboardLinkType.DASHBOARDS)
            .tags(["eos"])
            .as_dropdown(True)
            .include_vars(False)
            .keep_time(True)
        )
        .with_variable(
            dash.DatasourceVariable("datasource")
            .label("Data source")
            .type("prometheus")
            .hide(model.VariableHide.DONT_HIDE)
            .regex("")
        )
    )
    for variable in variables:
        board.with_variable(variable)
    for item in layout.items:
        if isinstance(item, dash.Row):
            board.with_row(item)
        else:
            board.with_panel(item)
    return board


#: Workers of the newest generation: a worker expelled from the group (a zombie)
#: still reports its old generation, leadership and member count.
NEWEST = "on (job, instance) (eos_worker_generation == scalar(max(eos_worker_generation)))"


def cluster_row(lay: Layout) -> None:
    """Members, leader, rebalances (by cause, duration), assignment per worker,
    revocations and scheduled rebalances."""
    lay.row("Cluster")
    lay.add(
        stat(
            "Members",
            "Members of the group in its newest generation. Fewer than Workers: a scraped "
            "worker is not in the group (starting, expelled, or another group.id).",
            f"max(eos_worker_group_members and {NEWEST}) or vector(0)",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Leader",
            "The instance that leads the group's newest generation (it writes the config "
            "topic, computes assignments and runs fencing rounds).",
            f"max by (instance) ((eos_worker_leader == 1) and {NEWEST})",
            legend="{{instance}}",
            text_mode="name",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Leader changes (1h)",
            "Times another member became leader in the last hour, as the worker that saw "
            "the most changes counts them.",
            "max(increase(eos_worker_leader_changes_total[1h])) or vector(0)",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Rebalances (1h)",
            "Rebalances in the last hour by protocol, as the worker that took part in the "
            "most counts them (every member counts a group rebalance once).",
            "max by (protocol) "
            "(sum by (job, instance, protocol) (increase(eos_worker_rebalances_total[1h])))",
            legend="{{protocol}}",
            text_mode="value_and_name",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Revoked tasks (1h)",
            "Tasks revoked from workers in the last hour (cooperative: tasks that moved).",
            "sum(increase(eos_worker_revoked_tasks_total[1h])) or vector(0)",
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Scheduled rebalance",
            "Delay of the later rebalance the leader scheduled in the newest generation: a "
            "lost member's work held back (scheduled.rebalance.max.delay.ms) or a failover "
            "settle time. 0: none.",
            f"max(eos_worker_scheduled_rebalance_delay_seconds and {NEWEST}) or vector(0)",
            "s",
        ),
        4,
        4,
    )
    lay.add(
        timeseries(
            "Rebalances / min by cause",
            "Rebalances per minute, stacked by why each worker rejoined: start, requested "
            "(a config change, handed-over work, a scheduled rebalance), rebalance (another "
            "member's), lost (expelled: session timeout). Every member counts each group "
            "rebalance, so one rebalance of three workers adds 3.",
            targets(
                (f"60 * sum by (cause) (rate(eos_worker_rebalances_total[{RI}]))", "{{cause}}"),
            ),
            "opm",
            stack=True,
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Time in rebalance",
            "p50 and p99 of the time from a worker's decision to rejoin until its "
            "assignment arrived (eager: all its work is stopped meanwhile).",
            targets(*quantiles("eos_worker_rebalance_duration_seconds")),
            "s",
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Generation and leader",
            "Group generation per worker; the leader's line is marked.",
            targets(
                ("max by (instance) (eos_worker_generation)", "generation {{instance}}"),
                (
                    "eos_worker_generation and on (job, instance) (eos_worker_leader == 1)",
                    "leader {{instance}}",
                ),
            ),
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Members and workers",
            "Members of the group's newest generation, and workers scraped.",
            targets(
                (f"max(eos_worker_group_members and {NEWEST})", "members"),
                ("count(eos_worker_generation)", "workers scraped"),
            ),
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Tasks per worker",
            "Tasks assigned to each worker by the last rebalance, stacked: the top is "
            "every assigned task of the cluster (it dips between the two rounds of a "
            "cooperative rebalance, while revoked tasks wait for their new worker).",
            targets(("sum by (instance) (eos_worker_assigned_tasks)", "{{instance}}")),
            stack=True,
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Connectors per worker",
            "Connectors assigned to each worker by the last rebalance, stacked.",
            targets(("sum by (instance) (eos_worker_assigned_connectors)", "{{instance}}")),
            stack=True,
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Revoked work",
            "Tasks and connectors revoked from each worker by rebalances (cooperative: "
            "work that moved; eager revokes by stopping everything and is not counted).",
            targets(
                (
                    f"sum by (instance) (increase(eos_worker_revoked_tasks_total[{RI}]))",
                    "tasks {{instance}}",
                ),
                (
                    f"sum by (instance) (increase(eos_worker_revoked_connectors_total[{RI}]))",
                    "connectors {{instance}}",
                ),
            ),
        ),
        6,
        8,
    )
    scheduled = timeseries(
        "Scheduled rebalances",
        "Delay of the later rebalance the leader scheduled (a lost member's work held "
        "back, a failover settle time; seconds, left axis), and rebalances that "
        "scheduled one (right axis).",
        targets(
            ("max(eos_worker_scheduled_rebalance_delay_seconds)", "scheduled delay"),
            (
                f"max(increase(eos_worker_scheduled_rebalances_total[{RI}]))",
                "rebalances that scheduled one",
            ),
        ),
        "s",
    )
    scheduled.override_by_query(
        "B",
        [
            model.DynamicConfigValue(id_val="unit", value="short"),
            model.DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
        ],
    )
    lay.add(scheduled, 6, 8)


def overview() -> dash.Dashboard:
    on_workers = "and on (job, instance) eos_worker_generation"
    lay = Layout()
    lay.row("Tasks")
    lay.add(
        stat(
            "Running tasks",
            "Tasks in state RUNNING.",
            'sum(eos_task_state{state="RUNNING"}) or vector(0)',
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Failed tasks",
            "Tasks in state FAILED; see the connector's status.",
            'sum(eos_task_state{state="FAILED"}) or vector(0)',
            red_at=1,
        ),
        4,
        4,
    )
    lay.add(stat("Workers", "Workers scraped.", "count(eos_worker_generation) or vector(0)"), 4, 4)
    lay.add(
        stat("Generation", "Group generation of the last rebalance.", "max(eos_worker_generation)"),
        4,
        4,
    )
    lay.add(
        stat(
            "Producers fenced (1h)",
            "Task producers fenced by newer instances in the last hour.",
            "sum(increase(eos_worker_producers_fenced_total[1h])) or vector(0)",
            red_at=1,
        ),
        4,
        4,
    )
    lay.add(
        stat(
            "Fencing failures (1h)",
            "Failed zombie-fencing rounds in the last hour.",
            "sum(increase(eos_worker_fencing_round_failures_total[1h])) or vector(0)",
            red_at=1,
        ),
        4,
        4,
    )
    lay.add(
        timeseries(
            "Tasks by state",
            "Tasks per state, over all workers.",
            targets(("sum by (state) (eos_task_state)", "{{state}}")),
            stack=True,
        ),
        12,
        6,
    )
    lay.add(
        timeseries(
            "Automatic restarts in a row",
            "Each failed connector or task restarted automatically: its restarts in a row "
            "(as its status shows them); 0 once it has run as long as its last backoff.",
            targets(
                ("max by (connector, task) (eos_task_auto_restarting)", "{{connector}}/{{task}}"),
                (
                    "max by (connector) (eos_worker_connector_auto_restarting)",
                    "{{connector}} (connector)",
                ),
            ),
        ),
        12,
        6,
    )
    lay.row("Throughput and transactions")
    lay.add(
        timeseries(
            "Records / s",
            "Records polled from sources, handed to producers, and committed in transactions.",
            targets(
                (f"sum(rate(eos_task_records_polled_total[{RI}]))", "polled"),
                (f"sum(rate(eos_task_records_written_total[{RI}]))", "written"),
                (f"sum(rate(eos_task_transaction_records_sum[{RI}]))", "committed"),
            ),
            "rps",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Bytes written / s",
            "Key and value bytes handed to producers, per connector.",
            targets(
                (f"sum by (connector) (rate(eos_task_written_bytes_total[{RI}]))", "{{connector}}"),
            ),
            "Bps",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Transactions / s",
            "Committed transactions, and aborted ones by reason.",
            targets(
                (f"sum(rate(eos_task_transactions_committed_total[{RI}]))", "committed"),
                (
                    f"sum by (reason) (rate(eos_task_transactions_aborted_total[{RI}]))",
                    "aborted ({{reason}})",
                ),
            ),
            "ops",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Abort ratio",
            "Aborted / (aborted + committed) transactions, per connector, every reason.",
            targets(
                (
                    f"sum by (connector) (rate(eos_task_transactions_aborted_total[{RI}])) / "
                    f"(sum by (connector) (rate(eos_task_transactions_aborted_total[{RI}])) + "
                    f"sum by (connector) (rate(eos_task_transactions_committed_total[{RI}])))",
                    "{{connector}}",
                ),
            ),
            "percentunit",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Commit latency",
            "Time a transaction commit takes, p50 and p99 over all tasks.",
            targets(
                *quantiles("eos_task_commit_duration_seconds"),
            ),
            "s",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Transaction open time p99",
            "How long transactions stay open, per connector "
            "(keep it well below transaction.timeout.ms).",
            targets(
                *quantiles("eos_task_transaction_open_duration_seconds", "connector")[1:],
            ),
            "s",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Records per transaction",
            "Average records per committed transaction, per connector.",
            targets(
                (
                    f"sum by (connector) (rate(eos_task_transaction_records_sum[{RI}])) / "
                    f"sum by (connector) (rate(eos_task_transaction_records_count[{RI}]))",
                    "{{connector}}",
                ),
            ),
        ),
        8,
        8,
    )
    cluster_row(lay)
    lay.row("Fencing and workers")
    lay.add(
        timeseries(
            "Fencing rounds",
            "Zombie-fencing rounds run by the leader, and failures, per connector.",
            targets(
                (
                    f"sum by (connector) (increase(eos_worker_fencing_rounds_total[{RI}]))",
                    "rounds {{connector}}",
                ),
                (
                    f"sum by (connector) (increase(eos_worker_fencing_round_failures_total[{RI}]))",
                    "failures {{connector}}",
                ),
            ),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Fencing round duration",
            "p50 and p99 of fencing rounds.",
            targets(
                *quantiles("eos_worker_fencing_round_duration_seconds"),
            ),
            "s",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Producers fenced",
            "Task producers fenced by newer instances, per connector.",
            targets(
                (
                    f"sum by (connector) (increase(eos_worker_producers_fenced_total[{RI}]))",
                    "{{connector}}",
                ),
            ),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Task count records",
            "Task count records the leader wrote, per connector.",
            targets(
                (
                    f"sum by (connector) "
                    f"(increase(eos_worker_task_count_records_written_total[{RI}]))",
                    "{{connector}}",
                ),
            ),
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Config read lag and offset mirror backlog",
            "Config records not yet applied; offsets not yet mirrored to the global offsets topic.",
            targets(
                (
                    "max by (instance) (eos_worker_config_read_lag_records)",
                    "config lag {{instance}}",
                ),
                (
                    "max by (instance) (eos_worker_offset_mirror_pending_offsets)",
                    "mirror backlog {{instance}}",
                ),
            ),
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Blocking-call pool",
            "Threads busy with blocking calls (Spark reads) and calls waiting.",
            targets(
                ("sum by (instance) (eos_worker_thread_pool_busy_threads)", "busy {{instance}}"),
                ("sum by (instance) (eos_worker_thread_pool_queued_calls)", "queued {{instance}}"),
            ),
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "Process CPU and memory",
            "CPU seconds per second and resident memory of each worker process.",
            targets(
                (f"rate(process_cpu_seconds_total[{RI}]) {on_workers}", "cpu {{instance}}"),
                (f"process_resident_memory_bytes {on_workers} / 2^30", "RSS GiB {{instance}}"),
            ),
        ),
        6,
        8,
    )
    lso_row(lay)
    return dashboard(
        "eos-overview",
        "eos / cluster overview",
        "Throughput, transactions, latency, task states, the cluster's members, rebalances "
        "and assignment, and fencing of an eos cluster.",
        lay,
        cluster_variables(),
    )


def lso_row(lay: Layout) -> None:
    """Open transactions holding read_committed consumers back (docs/transactions.md)."""
    lay.row("Open transactions on output partitions")
    lay.add(
        timeseries(
            "Last stable offset stuck",
            "Per output partition: how long its last stable offset has been behind the high "
            "watermark without moving (a transaction left open; alert EosLastStableOffsetStuck "
            "past 5 minutes), and by how many records. `eos transactions find-hanging` names it.",
            targets(
                (
                    "max by (topic, partition) (eos_worker_output_lso_stuck_seconds)",
                    "stuck {{topic}}-{{partition}}",
                ),
                (
                    "max by (topic, partition) (eos_worker_output_lso_lag_records)",
                    "records behind {{topic}}-{{partition}}",
                ),
            ),
        ),
        24,
        8,
    )


def drilldown() -> dash.Dashboard:
    sel = '{connector=~"$connector", task=~"$task"}'
    con = '{connector=~"$connector"}'
    lay = Layout()
    lay.row("State")
    lay.add(
        table(
            "Task state",
            "Current state of each selected task.",
            f"max by (instance, connector, task, state) (eos_task_state{sel}) == 1",
        ),
        12,
        6,
    )
    lay.add(
        timeseries(
            "Seconds since last commit",
            "Per task; since the task started if it has not committed yet.",
            targets(
                (f"max by (task) (eos_task_last_commit_age_seconds{sel})", "task {{task}}"),
            ),
            "s",
        ),
        12,
        6,
    )
    lay.row("Transactions")
    lay.add(
        timeseries(
            "Transaction size (KIP-618)",
            "transaction-size-min/max/avg: records per committed transaction "
            "over the task's lifetime on its worker.",
            targets(
                (f"max by (task) (eos_task_transaction_size_min{sel})", "min task {{task}}"),
                (f"max by (task) (eos_task_transaction_size_avg{sel})", "avg task {{task}}"),
                (f"max by (task) (eos_task_transaction_size_max{sel})", "max task {{task}}"),
            ),
        ),
        12,
        8,
    )
    lay.add(
        heatmap(
            "Records per transaction",
            "Distribution of records per committed transaction.",
            f"sum by (le) (increase(eos_task_transaction_records_bucket{sel}[{RI}]))",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Transactions / s",
            "Committed, and aborted by reason, per task.",
            targets(
                (
                    f"sum by (task) (rate(eos_task_transactions_committed_total{sel}[{RI}]))",
                    "committed task {{task}}",
                ),
                (
                    f"sum by (task, reason) (rate(eos_task_transactions_aborted_total{sel}[{RI}]))",
                    "aborted ({{reason}}) task {{task}}",
                ),
            ),
            "ops",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Commit latency",
            "p50 and p99 of commits, per task.",
            targets(
                *quantiles("eos_task_commit_duration_seconds", "task", sel),
            ),
            "s",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Transaction open time",
            "p50 and p99 of how long transactions stay open, per task.",
            targets(
                *quantiles("eos_task_transaction_open_duration_seconds", "task", sel),
            ),
            "s",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Poll latency",
            "p50 and p99 of the task's poll, per task.",
            targets(
                *quantiles("eos_task_poll_duration_seconds", "task", sel),
            ),
            "s",
        ),
        12,
        8,
    )
    lay.row("Records")
    lay.add(
        timeseries(
            "Records / s",
            "Polled, written, dropped, and in aborted transactions, per task.",
            targets(
                (
                    f"sum by (task) (rate(eos_task_records_polled_total{sel}[{RI}]))",
                    "polled task {{task}}",
                ),
                (
                    f"sum by (task) (rate(eos_task_records_written_total{sel}[{RI}]))",
                    "written task {{task}}",
                ),
                (
                    f"sum by (task) (rate(eos_task_records_dropped_total{sel}[{RI}]))",
                    "dropped task {{task}}",
                ),
                (
                    f"sum by (task) (rate(eos_task_records_aborted_total{sel}[{RI}]))",
                    "aborted task {{task}}",
                ),
            ),
            "rps",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Bytes written / s",
            "Key and value bytes handed to the producer, per task.",
            targets(
                (f"sum by (task) (rate(eos_task_written_bytes_total{sel}[{RI}]))", "task {{task}}"),
            ),
            "Bps",
        ),
        12,
        8,
    )
    lay.row("Failures and fencing")
    lay.add(
        timeseries(
            "Offset commit failures and fenced producers",
            "Per task.",
            targets(
                (
                    f"sum by (task) (increase(eos_task_offset_commit_failures_total{sel}[{RI}]))",
                    "offset commit failures task {{task}}",
                ),
                (
                    f"sum by (task) (increase(eos_task_producer_fenced_total{sel}[{RI}]))",
                    "fenced task {{task}}",
                ),
            ),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Fencing rounds for the connector",
            "Rounds, failures and task count records written by the leader, "
            "and round duration p99.",
            targets(
                (f"sum(increase(eos_worker_fencing_rounds_total{con}[{RI}]))", "rounds"),
                (f"sum(increase(eos_worker_fencing_round_failures_total{con}[{RI}]))", "failures"),
                (
                    f"sum(increase(eos_worker_task_count_records_written_total{con}[{RI}]))",
                    "task count records",
                ),
                (
                    f"histogram_quantile(0.99, sum by (le) "
                    f"(rate(eos_worker_fencing_round_duration_seconds_bucket{con}[{RI}])))",
                    "duration p99 (s)",
                ),
            ),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Failed, skipped and dead-lettered records",
            "Records a transform or converter failed on, by stage; those errors.tolerance=all "
            "skipped; and those written to the dead-letter topic (docs/transforms.md, "
            '"Errors and dead letters"), per task.',
            targets(
                (
                    f"sum by (task, stage) (increase(eos_task_records_failed_total{sel}[{RI}]))",
                    "failed ({{stage}}) task {{task}}",
                ),
                (
                    f"sum by (task) (increase(eos_task_records_skipped_total{sel}[{RI}]))",
                    "skipped task {{task}}",
                ),
                (
                    f"sum by (task) (increase(eos_task_records_dead_lettered_total{sel}[{RI}]))",
                    "dead-lettered task {{task}}",
                ),
            ),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Connector events",
            "Events the connector's tasks count themselves, by event and task (SparkSource: "
            "changed_files, files found changed after they were read and not read again).",
            targets(
                (
                    f"sum by (event, task) (increase(eos_task_events_total{sel}[{RI}]))",
                    "{{event}} task {{task}}",
                ),
            ),
        ),
        12,
        8,
    )
    variables = [
        *cluster_variables(),
        query_variable(
            "connector",
            'label_values(eos_task_state{instance=~"$instance"}, connector)',
            multi=False,
            include_all=False,
        ),
        query_variable(
            "task",
            'label_values(eos_task_state{instance=~"$instance", connector=~"$connector"}, task)',
            multi=True,
            include_all=True,
        ),
    ]
    return dashboard(
        "eos-connector",
        "eos / connector",
        "One connector's tasks: state, KIP-618 transaction sizes, transactions, latencies, "
        "records, failures.",
        lay,
        variables,
    )


DASHBOARDS = {"eos-overview.json": overview, "eos-connector.json": drilldown}


def render() -> dict[str, str]:
    return {
        name: json.dumps(build().build(), cls=JSONEncoder, indent=2) + "\n"
        for name, build in DASHBOARDS.items()
    }


def main(argv: list[str]) -> int:
    stale = []
    for name, text in render().items():
        path = OUT / name
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"stale: {', '.join(stale)}; run python deploy/grafana/build_dashboards.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
