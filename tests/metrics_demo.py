"""A scripted workload that reports through :class:`metrics.PrometheusObserver` like a
small cluster would, and (run as a script) a PNG of a dashboard panel rendered from
what a real Prometheus scraped of it.

    .venv/bin/python -m tests.metrics_demo [--seconds 120] [--out docs/dashboard-panel.png]
    .venv/bin/python -m tests.metrics_demo --worker 127.0.0.1:9092   # from a real worker

The script serves the workload's registry with :func:`services.http.serve_metrics`,
starts Prometheus (tests/prometheus_server.py) scraping it every second, waits,
then evaluates the overview dashboard's "Transactions / s" panel with
``/api/v1/query_range`` and draws it with matplotlib.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from eos.runtime.observer import TaskObserver, rebalanced
from eos.state import State
from metrics import PrometheusObserver
from services.http import serve_metrics
from tests.prometheus_server import REPO, PrometheusServer, start_prometheus

DASHBOARDS = REPO / "deploy" / "grafana" / "dashboards"
#: What each Grafana variable becomes when a dashboard's queries are evaluated here.
VARIABLES = {
    "$__rate_interval": "30s",
    "$__interval": "5s",
    "$__range": "5m",
    "$connector": "orders",
    "$task": ".*",
    "$namespace": ".*",
    "$cluster": "demo",
    "$instance": ".*",
}
TASKS = (("orders", 0), ("orders", 1), ("clicks", 0), ("payments", 0))
#: One cycle of the rebalances the scripted worker completes, one every 5 s, as this
#: worker of a cooperative group of up to three sees them (``rebalanced`` details).
CLUSTER_STORY: tuple[dict[str, object], ...] = (
    # a member returns: round 1 revokes what moves to it, round 2 hands it out
    {"cause": "rebalance", "seconds": 0.3, "members": 3, "connectors": 1, "tasks": 1,
     "revoked_connectors": 1, "revoked_tasks": 2},
    {"cause": "requested", "seconds": 0.04, "members": 3, "connectors": 1, "tasks": 1},
    # a member is lost: the leader holds its work back and schedules a rebalance
    {"cause": "rebalance", "seconds": 0.2, "members": 2, "connectors": 1, "tasks": 1,
     "delay_ms": 20_000},
    {"cause": "requested", "seconds": 0.05, "members": 2, "connectors": 2, "tasks": 2},
    # this worker misses its session timeout: expelled, it rejoins; another member leads
    {"cause": "lost", "seconds": 7.5, "members": 2, "connectors": 1, "tasks": 2,
     "leader": False, "leader_changed": True},
    # the other member leaves: this worker leads again and takes everything
    {"cause": "rebalance", "seconds": 1.2, "members": 1, "connectors": 3, "tasks": 4,
     "leader_changed": True},
)  # fmt: skip


@dataclass
class ScriptedWorkload:
    """Deterministic traffic: ``step()`` is one tick of every task and of the worker.

    ``orders`` commits on most ticks (more or fewer in waves) and sometimes aborts
    (connector, error; many errors during an "incident" from tick 700 to 1000) and
    skips a record a transform failed on every 7 ticks (dead-lettered every other time);
    ``clicks`` commits every other tick and its producer gets fenced once;
    ``payments`` runs a while, then FAILS, and is restarted automatically three
    times (failing again each time); the ``clicks`` connector is restarted once. The
    worker rebalances every 5 s through :data:`CLUSTER_STORY` (members join, leave and
    return, cooperative handovers, work held back, this worker expelled once a cycle
    and the leadership moving), leads, fences (one round of ``clicks`` fails), and
    reports lag, backlog and pool use.
    """

    observer: PrometheusObserver
    seed: int = 7
    group: str = "demo"
    """The worker's cluster (``eos_worker_info``, the dashboards' ``$cluster``)."""
    tick: int = 0
    tasks: dict[tuple[str, int], TaskObserver] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self.observer.worker_info(self.group, f"worker-{self.seed}", "enabled")
        self.observer.rebalance_completed(
            rebalanced(1, True, cause="start", seconds=0.8, members=1, connectors=3, tasks=4)
        )
        for connector in sorted({c for c, _ in TASKS}):
            self.observer.fencing_round(connector, 0.05, True)
            self.observer.task_count_record_written(connector)
        for key in TASKS:
            self.tasks[key] = self.observer.task(*key)
            self.tasks[key].state_changed(State.RUNNING)
            self.committed[key] = 0

    def step(self) -> None:
        self.tick += 1
        t, rng = self.tick, self._rng
        load = 1.0 + 0.6 * math.sin(t / 40)
        busy = 0.6 + 0.35 * math.sin(2 * math.pi * t / 900)  # commit probability, orders
        incident = 700 <= t < 1000  # error aborts spike (70 s to 100 s at 10 ticks/s)
        for (connector, task_id), task in self.tasks.items():
            if (connector, task_id) == ("payments", 0) and t >= 60:
                if t == 60:
                    task.transaction_aborted(3, "error")
                    task.state_changed(State.FAILED)
                if t in (60, 80, 140):  # restarted automatically; it fails again each time
                    self.observer.auto_restarted("payments", 0, (60, 80, 140).index(t) + 1)
                continue
            records = max(1, int(rng.gauss(40 * load, 10)))
            task.poll_completed(records, rng.uniform(0.001, 0.02))
            task.records_written(records, records * rng.randint(80, 120))
            if connector == "orders" and t % 7 == task_id:  # a poison record, tolerated
                task.record_failed("TRANSFORMATION", "dead_lettered" if t % 2 else "skipped")
            if connector == "clicks" and t % 2:
                continue
            if connector == "orders":
                if t % 9 == task_id:
                    task.transaction_aborted(records, "connector")
                    continue
                if t % 13 == task_id or (incident and rng.random() < 0.3):
                    task.transaction_aborted(records, "error")
                    continue
                if t > 20 and rng.random() > busy:
                    continue
            task.transaction_committed(
                records, rng.lognormvariate(math.log(0.008), 0.5), rng.uniform(0.05, 0.5)
            )
            self.committed[(connector, task_id)] += 1
            if t % 50 == 25:
                task.offset_commit_failed()
            if t % 40 == 10:
                task.task_event("changed_files", 1)
        self._worker_step(t, rng)

    def _worker_step(self, t: int, rng: random.Random) -> None:
        if t == 100:  # the clicks connector fails once, is restarted, and heals
            self.observer.auto_restarted("clicks", None, 1)
        if t == 200:
            self.observer.auto_restarts_in_a_row("clicks", None, 0)
        if t == 30:
            self.tasks[("clicks", 0)].producer_fenced()
            self.tasks[("clicks", 0)].transaction_aborted(0, "shutdown")
        if t % 50 == 0:
            generation = 1 + t // 50
            details = dict(CLUSTER_STORY[generation % len(CLUSTER_STORY)])
            leader = bool(details.pop("leader", True))
            self.observer.rebalance_completed(rebalanced(generation, leader, **details))
        if t % 5 == 0:
            self.observer.fencing_round("clicks", rng.uniform(0.02, 0.3), t != 40)
            self.observer.fencing_round("orders", rng.uniform(0.02, 0.3), True)
            self.observer.task_count_record_written("orders")
        self.observer.config_read_lag(rng.randint(0, 3))
        self.observer.offset_mirror_backlog(10 + t // 4)
        self.observer.thread_pool(rng.randint(0, 4), rng.randint(0, 2))
        # orders-0 is held back by a transaction left open from tick 100 (10 s) to tick 400
        stuck = (t - 100) / 10 if 100 <= t < 400 else 0.0
        self.observer.last_stable_offsets(
            {("orders", 0): (120 + t // 10 if stuck else 0, stuck), ("orders", 1): (3, 0.0)}
        )

    async def run(self, interval: float = 0.1) -> None:
        """Step every ``interval`` seconds until cancelled."""
        while True:
            self.step()
            await anyio.sleep(interval)


def dashboard_queries(path: Path) -> list[tuple[str, str, str]]:
    """``(panel title, legend, expr)`` of every query of every panel of a dashboard file."""
    found = []
    for panel in json.loads(path.read_text())["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], target.get("legendFormat", ""), target["expr"]))
    return found


def variable_query(variable: dict[str, Any]) -> str:
    """The query of a dashboard's query variable (Grafana's ``{"query": ..., "refId": ...}``
    or the older plain string)."""
    query = variable["query"]
    return str(query["query"] if isinstance(query, dict) else query)


def substitute(expr: str, variables: dict[str, str] = VARIABLES) -> str:
    """A dashboard query as Grafana would send it (longest variable names first)."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace(name, variables[name])
    return expr


def _legend(template: str, labels: dict[str, str]) -> str:
    for key, value in labels.items():
        template = template.replace("{{" + key + "}}", value)
    return template


async def panel_series(
    prom: PrometheusServer, title: str, start: float, end: float, step: float = 2.0
) -> list[tuple[str, list[tuple[float, float]]]]:
    """Each series of an overview panel as (legend, [(t, value)])."""
    series = []
    for panel_title, legend, expr in dashboard_queries(DASHBOARDS / "eos-overview.json"):
        if panel_title != title:
            continue
        for result in await prom.query_range(substitute(expr), start, end, step):
            points = [(float(t), float(v)) for t, v in result["values"]]
            series.append((_legend(legend, result["metric"]), points))
    return series


def render(series: list[tuple[str, list[tuple[float, float]]]], title: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=110)
    fig.patch.set_facecolor("#181b1f")
    ax.set_facecolor("#181b1f")
    t0 = min(t for _, points in series for t, _ in points)
    for legend, points in series:
        xs = [t - t0 for t, _ in points]
        ax.plot(xs, [v for _, v in points], linewidth=1.4, label=legend)
        ax.fill_between(xs, [v for _, v in points], alpha=0.08)
    ax.set_title(f"eos / cluster overview — {title}", color="#d8d9da", loc="left", fontsize=11)
    ax.set_xlabel("seconds", color="#9fa7b3")
    ax.tick_params(colors="#9fa7b3")
    ax.grid(color="#2c3235", linewidth=0.6)
    for spine in ax.spines.values():
        spine.set_color("#2c3235")
    ax.legend(
        facecolor="#181b1f",
        edgecolor="#2c3235",
        labelcolor="#d8d9da",
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    ax.set_ylim(bottom=0)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, facecolor=fig.get_facecolor())
    plt.close(fig)


@contextlib.asynccontextmanager
async def scraped_workload() -> AsyncIterator[PrometheusServer]:
    """The scripted workload running, served by :func:`services.http.serve_metrics` and
    scraped every second by a real Prometheus (alert rules loaded), once it is up."""
    observer = PrometheusObserver()
    workload = ScriptedWorkload(observer)
    with tempfile.TemporaryDirectory() as workdir:
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_metrics, observer.registry, "127.0.0.1", 0)
            prom = await anyio.to_thread.run_sync(
                lambda: start_prometheus([f"127.0.0.1:{port}"], Path(workdir))
            )
            try:
                tg.start_soon(workload.run)
                await prom.targets_up()
                yield prom
            finally:
                prom.stop()
                tg.cancel_scope.cancel()


async def _main(seconds: float, out: Path, title: str) -> None:
    async with scraped_workload() as prom:
        start = time.time()
        await anyio.sleep(seconds)
        series = await panel_series(prom, title, start + 30, time.time())
    render(series, title, out)
    print(f"wrote {out} ({len(series)} series, {seconds:.0f}s of data)")


def demo_connectors(run: str) -> list[dict[str, str]]:
    """Two VerifiableSource connectors: one commits per poll, one aborts now and then."""
    common = {"connector.class": "VerifiableSource", "records.per.partition": "0"}
    return [
        {**common, "name": "orders", "topic": f"orders-{run}", "tasks.max": "2",
         "throughput": "1500", "batch.size": "200"},
        {**common, "name": "clicks", "topic": f"clicks-{run}", "tasks.max": "1",
         "throughput": "1000", "transaction.boundary": "connector",
         "commit.every.records": "300", "abort.every.transactions": "4"},
    ]  # fmt: skip


async def _main_worker(bootstrap: str, seconds: float, out: Path, title: str) -> None:
    """The same panel, from a real eos worker scraped by a real Prometheus."""
    from functools import partial

    from eos.config.worker import WorkerConfig
    from services.dev_kafka import free_ports
    from services.worker_service import run_worker

    run = f"demo-{int(time.time())}"
    (port,) = free_ports(1)
    settings = WorkerConfig.from_properties(
        {
            "bootstrap.servers": bootstrap,
            "group.id": run,
            "config.storage.topic": f"{run}-configs",
            "offset.storage.topic": f"{run}-offsets",
            "status.storage.topic": f"{run}-status",
            "listeners": f"http://127.0.0.1:{port}",
        }
    )
    with tempfile.TemporaryDirectory() as workdir:
        async with anyio.create_task_group() as tg:
            worker = await tg.start(partial(run_worker, settings, demo_connectors(run)))
            prom = await anyio.to_thread.run_sync(
                lambda: start_prometheus([f"127.0.0.1:{port}"], Path(workdir))
            )
            try:
                await prom.targets_up()
                start = time.time()
                await anyio.sleep(seconds)
                series = await panel_series(prom, title, start + 30, time.time())
            finally:
                prom.stop()
                worker.stop()
    render(series, title, out)
    print(f"wrote {out} ({len(series)} series, {seconds:.0f}s of a real worker)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard-panel.png")
    parser.add_argument("--panel", default="Transactions / s")
    parser.add_argument("--worker", metavar="BOOTSTRAP", help="scrape a real worker on this Kafka")
    args = parser.parse_args()
    if args.worker:
        anyio.run(_main_worker, args.worker, args.seconds, args.out, args.panel)
    else:
        anyio.run(_main, args.seconds, args.out, args.panel)


if __name__ == "__main__":
    main()
