"""Failover, fencing and rebalance of an eos cluster: real ``eos worker`` processes of
one group.id on one local broker, several rounds per configuration (configurations
alternate within a round), one Markdown table per part:

  failover   3 workers; a worker running 4 exactly-once VerifiableSource tasks is
             SIGKILLed; seconds from the kill until each of its tasks has committed a
             transaction on another worker (the survivors' ``/metrics``, polled every
             100 ms: eos_task_transactions_committed_total rises, and
             eos_task_last_commit_timestamp_seconds says when), for the
             failover assignor (priorities 3/2/1, 4 tasks) and the cooperative one
             (scheduled.rebalance.max.delay.ms=0, 12 tasks = 4 per worker), with
             session timeouts of 6 s and 10 s (heartbeat a third of it). The victim is
             never the group's leader. Target: each task within session timeout + 2 s.
  fencing    a 100-task connector (1 record/s per task) on 1 or 3 workers; its task
             count changes (100 → 101, then back, …) so the leader fences the previous
             generation's transactional ids: the round's seconds from the leader's
             ``fencing round done`` log line (target ≤ 1 s), and the wall time from
             the config PUT until every task of the new generation is RUNNING.
  rebalance  3 workers, 60 tasks; a 4th worker joins, then leaves cleanly (SIGTERM);
             for each protocol (sessioned = incremental cooperative, eager) with the
             sticky assignor: the task-seconds tasks spent not RUNNING (the status
             topic's records, timestamped by the workers that wrote them) and the
             task-seconds without output (gaps of 2 s or more in the create times of
             the committed records, read_committed; a task writes 10 records/s).

Timestamps come from the workers themselves where possible (status records' create
times, log lines), so the bench's own polling adds no error there. Usage:

    python bench/failover.py [--bootstrap HOST:PORT] [--rounds N] [--quick]
                             [--parts failover,fencing,rebalance] [--keep-logs]

Without --bootstrap it starts one local Kafka (eos dev-kafka) for the whole run.
The machine's load average is printed next to each table: the numbers are only as
good as the CPU the workers got.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
from aiokafka import TopicPartition
from anyio.abc import TaskStatus
from worker_run import bench_broker, bench_process

from eos.kafka import ClientConfig, make_consumer
from eos.kafka.admin import ensure_topic
from eos.storage.status_log import StatusRecord, decode_status_record
from tests.integration.worker_harness import Cluster, WorkerProcess

CONNECTOR = "vs"
POLL_S = 0.1
STATUS_PARTITIONS = 3


def loadavg() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f} (1/5/15 min, {os.cpu_count()} CPUs)"


def connector(topic: str, tasks: int, throughput: float, interval_ms: int) -> dict[str, str]:
    return {
        "name": CONNECTOR,
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": "0",
        "throughput": str(throughput),
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": str(interval_ms),
    }


# --------------------------------------------------------------------------- cluster


class BenchCluster:
    """A :class:`Cluster` of fresh internal topics in its own directory, with async
    helpers; :meth:`close` stops every process it started (SIGTERM, then SIGKILL)."""

    def __init__(
        self,
        root: Path,
        bootstrap: str,
        prefix: str,
        workers: int,
        *,
        each: Sequence[Mapping[str, str]] = (),
        **extra: str,
    ) -> None:
        self.group = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.directory = root / self.group
        self.client = ClientConfig({"bootstrap.servers": bootstrap})
        self.cluster = Cluster(self.directory, bootstrap, self.group, workers, each=each, **extra)
        self.topic = f"{self.group}-out"
        self.status_topic = f"{self.group}-status"
        self._gone: list[WorkerProcess] = []

    @property
    def workers(self) -> list[WorkerProcess]:
        return self.cluster.workers

    def worker_id(self, worker: WorkerProcess) -> str:
        return self.cluster.worker_id(worker)

    def gone(self, worker: WorkerProcess) -> None:
        """``worker`` is stopped on purpose (its exit is no error)."""
        self._gone.append(worker)

    def check_alive(self) -> None:
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is not None and w not in self._gone:
                raise RuntimeError(
                    f"worker {w.rest_url} exited with {w.proc.returncode}\n{self.tails()}"
                )

    async def _get(self, http: httpx.AsyncClient, url: str) -> Any:
        try:
            response = await http.get(url)
        except httpx.HTTPError:
            return None
        return response.json() if response.status_code == 200 else None

    async def leader(self, timeout: float = 120) -> WorkerProcess:
        """The live worker that says it leads, once every live worker agrees."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=5) as http:
            while time.monotonic() < deadline:
                self.check_alive()
                live = self.cluster.live()
                views = await gather(self._get(http, f"{w.rest_url}/") for w in live)
                urls = {(v or {}).get("cluster", {}).get("leader_url") for v in views}
                if live and all(views) and len(urls) == 1 and None not in urls:
                    return next(w for w in self.workers if w.rest_url in urls)
                await anyio.sleep(0.2)
        raise TimeoutError(f"no leader agreed on within {timeout}s\n{self.tails()}")

    async def put(self, config: Mapping[str, str]) -> None:
        self.check_alive()
        await anyio.to_thread.run_sync(self.cluster.put_connector, config, 90)

    async def placement(self, tasks: int, timeout: float = 180) -> dict[int, str]:
        """Task id → worker id, once all ``tasks`` tasks are RUNNING on live workers."""
        deadline = time.monotonic() + timeout
        body: Any = None
        async with httpx.AsyncClient(timeout=10) as http:
            while time.monotonic() < deadline:
                self.check_alive()
                live = self.cluster.live()
                ids = {self.worker_id(w) for w in live}
                for w in live:
                    body = await self._get(http, f"{w.rest_url}/connectors/{CONNECTOR}/status")
                    if body is not None:
                        break
                if body is not None:
                    states = {t["id"]: (t["state"], t["worker_id"]) for t in body["tasks"]}
                    if len(states) == tasks and all(
                        s == "RUNNING" and w in ids for s, w in states.values()
                    ):
                        return {t: w for t, (_, w) in states.items()}
                await anyio.sleep(0.2)
        raise TimeoutError(f"{tasks} tasks not RUNNING within {timeout}s: {body}\n{self.tails()}")

    async def wait_placement(
        self, tasks: int, good: Callable[[dict[int, str]], bool], what: str, timeout: float = 180
    ) -> dict[int, str]:
        """The placement once every task RUNS and ``good`` accepts it."""
        deadline = time.monotonic() + timeout
        placement: dict[int, str] = {}
        while time.monotonic() < deadline:
            placement = await self.placement(tasks, max(deadline - time.monotonic(), 1))
            if good(placement):
                return placement
            await anyio.sleep(0.3)
        raise TimeoutError(f"{what}: not reached in {timeout:.0f}s: {placement}\n{self.tails()}")

    async def generation(self, worker: WorkerProcess) -> int:
        async with httpx.AsyncClient(timeout=10) as http:
            body = (await http.get(f"{worker.rest_url}/")).json()
        return int(body["cluster"]["generation"])

    def tails(self) -> str:
        return self.cluster.tails(15)

    def close(self, keep: bool) -> None:
        stop_processes(self.workers, grace=0)
        if not keep:
            shutil.rmtree(self.directory, ignore_errors=True)


def stop_processes(workers: Iterable[WorkerProcess], grace: float) -> None:
    """SIGTERM every live worker at once, SIGKILL what has not exited after ``grace``
    seconds (0: SIGKILL at once; a measured cluster need not shut down cleanly)."""
    procs = [w.proc for w in workers if w.proc is not None and w.proc.poll() is None]
    for proc in procs:
        proc.send_signal(signal.SIGCONT)
        if grace <= 0:
            proc.kill()
        else:
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------- observation


@dataclass
class StatusEvent:
    at: float
    """Unix time the worker wrote the record (its create time)."""
    task: int
    state: str
    worker: str
    generation: int


class StatusWatch:
    """Every task status record of the cluster's status topic, as it is written."""

    def __init__(self, client: ClientConfig, topic: str) -> None:
        self.client, self.topic = client, topic
        self.events: list[StatusEvent] = []
        self.changed = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        consumer = make_consumer(
            self.client, enable_auto_commit=False, fetch_max_wait_ms=50, group_id=None
        )
        await consumer.start()
        try:
            parts = [TopicPartition(self.topic, p) for p in range(STATUS_PARTITIONS)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            task_status.started()
            while True:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    for r in records:
                        record = decode_status_record(r.key, r.value)
                        if not isinstance(record, StatusRecord):  # e.g. a topic record
                            continue
                        if record.task is None or record.status is None:
                            continue
                        if record.name != CONNECTOR:
                            continue
                        s = record.status
                        self.events.append(
                            StatusEvent(
                                r.timestamp / 1000, record.task, s.state.value, s.worker_id,
                                s.generation,
                            )
                        )  # fmt: skip
                if batches:
                    self.changed.set()
                    self.changed = anyio.Event()
        finally:
            with anyio.CancelScope(shield=True):
                await consumer.stop()

    def latest(self, until: float | None = None) -> dict[int, StatusEvent]:
        """Each task's status as a reader applies them (a record of another worker
        from an older generation does not replace a newer one)."""
        table: dict[int, StatusEvent] = {}
        for e in self.events:
            if until is not None and e.at > until:
                break
            if applies(e, table.get(e.task)):
                table[e.task] = e
        return table


def applies(e: StatusEvent, current: StatusEvent | None) -> bool:
    """Whether a reader replaces ``current`` by ``e``: a record of another worker from
    an older generation does not (as the status topic's readers apply them)."""
    return current is None or e.worker == current.worker or e.generation >= current.generation


class OutputWatch:
    """The create times of the committed records (read_committed) of each task: the
    gaps in them are the time a task produced nothing that was committed."""

    def __init__(self, client: ClientConfig, topic: str, partitions: int) -> None:
        self.client, self.topic, self.partitions = client, topic, partitions
        self.last: dict[int, float] = {}
        self.gaps: list[tuple[int, float, float]] = []
        """(task, from, to): consecutive committed records more than 0.3 s apart."""

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        consumer = make_consumer(
            self.client, enable_auto_commit=False, group_id=None,
            isolation_level="read_committed", fetch_max_wait_ms=100,
        )  # fmt: skip
        await consumer.start()
        try:
            parts = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(parts)
            await consumer.seek_to_end(*parts)
            for p in parts:
                await consumer.position(p)
            task_status.started()
            while True:
                batches = await consumer.getmany(timeout_ms=200, max_records=5000)
                for records in batches.values():
                    for r in records:
                        key = (r.key or b"").decode().strip('"')
                        task = int(key.partition("-")[0])
                        at = r.timestamp / 1000
                        before = self.last.get(task)
                        if before is not None and at - before > 0.3:
                            self.gaps.append((task, before, at))
                        self.last[task] = at
        finally:
            with anyio.CancelScope(shield=True):
                await consumer.stop()


async def committed(http: httpx.AsyncClient, url: str) -> dict[int, tuple[float, float]]:
    """Task id → (transactions committed, Unix time of the last commit) on the worker at
    ``url`` (empty if it does not answer)."""
    try:
        response = await http.get(f"{url}/metrics")
    except httpx.HTTPError:
        return {}
    counts: dict[int, float] = {}
    last: dict[int, float] = {}
    for line in response.text.splitlines():
        for name, into in (
            ("eos_task_transactions_committed_total{", counts),
            ("eos_task_last_commit_timestamp_seconds{", last),
        ):
            if line.startswith(name) and f'connector="{CONNECTOR}"' in line:
                labels, _, value = line.rpartition(" ")
                if m := re.search(r'task="(\d+)"', labels):
                    into[int(m.group(1))] = float(value)
    return {t: (n, last.get(t, 0.0)) for t, n in counts.items()}


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z)\s+\[(\w+)\s*\]\s+(.*)$")


def log_lines(worker: WorkerProcess, since: float, text: str) -> list[tuple[float, str]]:
    """(unix time, line) of the lines of ``worker``'s log after ``since`` containing
    ``text``."""
    if not worker.log.exists():
        return []
    found = []
    for line in worker.log.read_text(errors="replace").splitlines():
        if text not in line:
            continue
        m = LOG_TIME.match(line)
        if m is None:
            continue
        at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        if at >= since:
            found.append((at, m.group(3)))
    return found


def first_log(workers: Iterable[WorkerProcess], since: float, text: str) -> float | None:
    times = [at for w in workers for at, _ in log_lines(w, since, text)]
    return min(times) if times else None


# ------------------------------------------------------------------------- failover


@dataclass(frozen=True)
class FailoverConfig:
    name: str
    assignor: str
    tasks: int


FAILOVER_CONFIGS = (
    FailoverConfig("failover (priority 3/2/1)", "failover", 4),
    FailoverConfig("cooperative, delay 0", "cooperative", 12),
)


@dataclass
class FailoverResult:
    config: str
    session_s: int
    committed: list[float]
    """Per task of the victim: seconds from the kill to its first commit elsewhere."""
    running: list[float]
    """… to its RUNNING status written by another worker."""
    assigned: float | None
    """… to the leader's assignment without the victim (its log)."""


class VictimLeads(Exception):
    """The worker to kill became the leader (then the trial is run again)."""


async def failover_trial(
    root: Path, bootstrap: str, config: FailoverConfig, session_s: int, keep: bool
) -> FailoverResult:
    session_ms = session_s * 1000
    each = (
        [{"worker.priority": p} for p in ("3", "2", "1")] if config.assignor == "failover" else []
    )
    bench = BenchCluster(
        root, bootstrap, "bench-fo", 3, each=each,
        session_timeout_ms=str(session_ms), heartbeat_interval_ms=str(session_ms // 3),
        connect_protocol="sessioned", assignor=config.assignor,
        scheduled_rebalance_max_delay_ms="0", failover_settle_ms="0",
    )  # fmt: skip
    first, *others = bench.workers
    try:
        await ensure_topic(bench.client, bench.topic, partitions=3)
        if config.assignor == "failover":
            # The priority-3 worker starts once another one is about to join the group
            # (the first to join leads), so that it is not the leader.
            for w in others:
                w.start()
            with anyio.fail_after(60):
                while first_log(others, 0, "group coordinator found") is None:
                    bench.check_alive()
                    await anyio.sleep(0.05)
            first.start()
        else:
            for w in bench.workers:
                w.start()
        leader = await bench.leader()
        await bench.put(connector(bench.topic, config.tasks, 50, 200))
        if config.assignor == "failover":
            target = bench.worker_id(first)
            await bench.wait_placement(
                config.tasks, lambda p: set(p.values()) == {target}, "all tasks on priority 3"
            )
            victim = first
        else:
            placement = await bench.wait_placement(
                config.tasks,
                lambda p: sorted(Counter(p.values()).values()) == [4, 4, 4],
                "4 tasks per worker",
            )
            victim = next(
                w for w in bench.workers
                if w is not leader and bench.worker_id(w) in placement.values()
            )  # fmt: skip
        if victim is leader:
            raise VictimLeads
        victim_id = bench.worker_id(victim)
        placement = await bench.placement(config.tasks)
        tasks = sorted(t for t, w in placement.items() if w == victim_id)
        assert len(tasks) == 4, placement
        survivors = [w for w in bench.workers if w is not victim]
        watch = StatusWatch(bench.client, bench.status_topic)
        async with httpx.AsyncClient(timeout=5) as http, anyio.create_task_group() as tg:
            await tg.start(watch.run)
            # Every task of the victim commits there before the kill.
            with anyio.fail_after(60):
                while True:
                    scrape = await committed(http, victim.rest_url)
                    if all(scrape.get(t, (0.0, 0.0))[0] > 0 for t in tasks):
                        break
                    await anyio.sleep(POLL_S)
            baseline: dict[int, float] = {}
            for w in survivors:
                for t, (n, _) in (await committed(http, w.rest_url)).items():
                    baseline[t] = max(baseline.get(t, 0.0), n)

            assert victim.proc is not None
            killed_wall = time.time()
            bench.gone(victim)
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            moved: dict[int, float] = {}
            with anyio.move_on_after(session_s + 60):
                while len(moved) < len(tasks):
                    asked = time.time()
                    scrapes = await gather(committed(http, w.rest_url) for w in survivors)
                    for scrape in scrapes:
                        for t in tasks:
                            n, last = scrape.get(t, (0.0, 0.0))
                            if t in moved or n <= baseline.get(t, 0.0):
                                continue
                            # The first commit's own time if it is the only one so far,
                            # else (rare) the scrape's start: a bound from above.
                            only = n == baseline.get(t, 0.0) + 1 and last > 0
                            moved[t] = (last if only else asked) - killed_wall
                    await anyio.sleep(POLL_S)
            tg.cancel_scope.cancel()
        if len(moved) < len(tasks):
            raise TimeoutError(f"tasks {sorted(set(tasks) - set(moved))} never moved\n"
                               f"{bench.tails()}")  # fmt: skip
        running: dict[int, float] = {}
        for e in watch.events:
            elsewhere = e.worker != victim_id and e.at >= killed_wall
            if e.task in tasks and e.task not in running and e.state == "RUNNING" and elsewhere:
                running[e.task] = e.at - killed_wall
        assigned = first_log(survivors, killed_wall, "assignment computed")
        return FailoverResult(
            config.name,
            session_s,
            sorted(moved.values()),
            sorted(running.values()),
            None if assigned is None else assigned - killed_wall,
        )
    finally:
        bench.close(keep)


async def gather(coros: Iterable[Any]) -> list[Any]:
    results: list[Any] = []
    items = list(coros)
    slots: list[Any] = [None] * len(items)

    async def one(i: int, coro: Any) -> None:
        slots[i] = await coro

    async with anyio.create_task_group() as tg:
        for i, coro in enumerate(items):
            tg.start_soon(one, i, coro)
    results.extend(slots)
    return results


def failover_table(results: list[FailoverResult]) -> str:
    lines = [
        "| configuration | session / heartbeat | rounds | all 4 committed elsewhere: "
        "min / median / max s | per task (all rounds) min / median / max s | "
        "new assignment, median s | all 4 RUNNING elsewhere, median s | "
        "≤ session + 2 s |",
        "|---|---|---:|---|---|---:|---:|---|",
    ]
    keys = dict.fromkeys((r.config, r.session_s) for r in results)
    for name, session_s in keys:
        rows = [r for r in results if (r.config, r.session_s) == (name, session_s)]
        worst = [max(r.committed) for r in rows]
        per_task = [s for r in rows for s in r.committed]
        running = [max(r.running) for r in rows if r.running]
        assigned = [r.assigned for r in rows if r.assigned is not None]
        target = session_s + 2
        met = sum(w <= target for w in worst)
        verdict = "met" if met == len(worst) else f"missed in {len(worst) - met}/{len(worst)}"
        if met < len(worst):
            verdict += f" (worst +{max(worst) - target:.1f} s)"
        lines.append(
            f"| {name} | {session_s} s / {session_s / 3:.1f} s | {len(rows)} | {spread(worst)} | "
            f"{spread(per_task)} | {med(assigned)} | {med(running)} | {verdict} |"
        )
    return "\n".join(lines)


def spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def med(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


# -------------------------------------------------------------------------- fencing


@dataclass
class FencingResult:
    workers: int
    before: int
    after: int
    fenced: int
    round_s: float
    """The leader's own measure (``fencing round done`` seconds)."""
    put_to_stopped: float
    """From the PUT to the last task of the old generation stopped (its status)."""
    put_to_round: float
    """From the PUT to the leader's ``fencing round started``."""
    put_to_running: float
    """From the PUT to the last task of the new generation RUNNING."""


class FencingCluster:
    """A running cluster with the 100-task connector, for repeated count changes."""

    def __init__(self, root: Path, bootstrap: str, workers: int) -> None:
        self.bench = BenchCluster(
            root, bootstrap, f"bench-fence{workers}", workers,
            session_timeout_ms="10000", heartbeat_interval_ms="3000",
            connect_protocol="sessioned", assignor="sticky",
            task_shutdown_graceful_timeout_ms="5000", rebalance_timeout_ms="60000",
        )  # fmt: skip
        self.count = 100
        self.watch = StatusWatch(self.bench.client, self.bench.status_topic)

    async def start(self) -> None:
        await ensure_topic(self.bench.client, self.bench.topic, partitions=3)
        for w in self.bench.workers:
            w.start()
        await self.bench.leader()
        await self.bench.put(self.config())
        await self.bench.placement(self.count, 300)

    def config(self) -> dict[str, str]:
        return connector(self.bench.topic, self.count, 1, 5000)

    async def change(self) -> FencingResult:
        bench = self.bench
        leader = await bench.leader()
        generation = await bench.generation(leader)
        before = self.count
        self.count = 101 if before == 100 else 100
        put_wall = time.time()
        async with httpx.AsyncClient(timeout=60) as http:
            response = await http.put(
                f"{leader.rest_url}/connectors/{CONNECTOR}/config", json=self.config()
            )
        response.raise_for_status()
        latest: dict[int, StatusEvent] = {}
        with anyio.move_on_after(240):
            while True:
                latest = self.watch.latest()
                # Written after the PUT: every task restarts on a count change. (Not
                # "in a later group generation": a follower may start the new task
                # generation before it rejoins.)
                fresh = [
                    e for t in range(self.count)
                    if (e := latest.get(t)) is not None
                    and e.state == "RUNNING" and e.at >= put_wall
                ]  # fmt: skip
                if len(fresh) == self.count:
                    running_at = max(e.at for e in fresh)
                    break
                await self.watch.changed.wait()
        if len(fresh) < self.count:
            stale = Counter(
                (e.state, e.generation) if e else None
                for t in range(self.count) if (e := latest.get(t)) not in fresh
            )  # fmt: skip
            raise TimeoutError(
                f"{before} → {self.count} tasks: {self.count - len(fresh)} not RUNNING again "
                f"within 240 s (group generation {generation} at the PUT), (state, generation): "
                f"{dict(stale)}\n{bench.tails()}"
            )
        with anyio.fail_after(30):
            while True:
                if done := log_lines(leader, put_wall, "fencing round done"):
                    break
                await anyio.sleep(0.1)
        started = log_lines(leader, put_wall, "fencing round started")
        line = done[0][1]
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        stops = [
            e.at for e in self.watch.events
            if e.at >= put_wall and e.task < before and e.state != "RUNNING"
        ]  # fmt: skip
        return FencingResult(
            len(bench.workers),
            before,
            self.count,
            int(fields["fenced"]),
            float(fields["seconds"]),
            max(stops, default=float("nan")) - put_wall,
            started[0][0] - put_wall if started else float("nan"),
            running_at - put_wall,
        )


def fencing_table(results: list[FencingResult]) -> str:
    lines = [
        "| workers | rounds | fenced ids | round (leader's log) min / median / max s | "
        "PUT → old tasks stopped, median s | PUT → round started, median s | "
        "PUT → all new tasks RUNNING min / median / max s | round ≤ 1 s |",
        "|---:|---:|---|---|---:|---:|---|---|",
    ]
    for workers in dict.fromkeys(r.workers for r in results):
        rows = [r for r in results if r.workers == workers]
        rounds = [r.round_s for r in rows]
        fenced = sorted({r.fenced for r in rows})
        met = sum(s <= 1 for s in rounds)
        verdict = "met" if met == len(rows) else f"missed in {len(rows) - met}/{len(rows)}"
        if met < len(rows):
            verdict += f" (worst +{max(rounds) - 1:.2f} s)"
        lines.append(
            f"| {workers} | {len(rows)} | {', '.join(map(str, fenced))} | {spread(rounds)} | "
            f"{med([r.put_to_stopped for r in rows])} | {med([r.put_to_round for r in rows])} | "
            f"{spread([r.put_to_running for r in rows])} | {verdict} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------ rebalance


@dataclass(frozen=True)
class RebalanceConfig:
    name: str
    protocol: str
    assignor: str


REBALANCE_CONFIGS = (
    RebalanceConfig("cooperative (sessioned, sticky)", "sessioned", "sticky"),
    RebalanceConfig("eager (eager, sticky)", "eager", "sticky"),
)
REBALANCE_TASKS = 60
RECORD_INTERVAL_S = 0.1  # throughput 10 records/s per task
QUIET_GAP_S = 2.0
"""Output gaps at least this long count as a stop; a running task's gaps (commits,
a busy machine) stay below it — the table shows the longest before the trigger."""


@dataclass
class RebalanceResult:
    config: str
    trigger: str
    stopped_sum: float
    """Task-seconds not RUNNING between the trigger and the settled assignment."""
    stopped_max: float
    stopped_tasks: int
    quiet_sum: float
    """Task-seconds in gaps of committed output of at least :data:`QUIET_GAP_S`."""
    quiet_max: float
    normal_gap: float
    """The longest gap of any task in the seconds before the trigger."""
    settle_s: float
    """From the first status record after the trigger to the last one."""


def not_running(
    events: Sequence[StatusEvent], tasks: int, start: float, end: float
) -> dict[int, float]:
    """Per task, seconds in [start, end] whose latest applied status was not RUNNING."""
    table: dict[int, StatusEvent] = {}
    since: dict[int, float] = {}
    stopped = dict.fromkeys(range(tasks), 0.0)
    for e in events:
        if not applies(e, table.get(e.task)):
            continue
        table[e.task] = e
        at = min(max(e.at, start), end)
        if e.state != "RUNNING":
            since.setdefault(e.task, at)
        elif e.task in since:
            stopped[e.task] += at - since.pop(e.task)
    for task, at in since.items():
        stopped[task] += end - at
    return stopped


async def rebalance_trials(
    root: Path, bootstrap: str, config: RebalanceConfig, keep: bool
) -> list[RebalanceResult]:
    """One cluster: 60 tasks on 3 workers; a 4th joins, then it leaves cleanly."""
    bench = BenchCluster(
        root, bootstrap, "bench-rb", 3,
        session_timeout_ms="10000", heartbeat_interval_ms="3000",
        connect_protocol=config.protocol, assignor=config.assignor,
        rebalance_timeout_ms="60000",
    )  # fmt: skip
    results = []
    try:
        await ensure_topic(bench.client, bench.topic, partitions=6)
        for w in bench.workers:
            w.start()
        await bench.leader()
        await bench.put(connector(bench.topic, REBALANCE_TASKS, 1 / RECORD_INTERVAL_S, 1000))
        await bench.wait_placement(
            REBALANCE_TASKS, lambda p: sorted(Counter(p.values()).values()) == [20, 20, 20],
            "20 tasks per worker", 300,
        )  # fmt: skip
        status = StatusWatch(bench.client, bench.status_topic)
        output = OutputWatch(bench.client, bench.topic, 6)
        async with anyio.create_task_group() as tg:
            await tg.start(status.run)
            await tg.start(output.run)
            watched = time.time()
            await anyio.sleep(5)  # every task has output before the trigger
            joiner = bench.cluster.add({})
            joiner_id = bench.worker_id(joiner)
            for trigger in ("4th joins", "4th leaves (SIGTERM)"):
                since = len(status.events)
                start = time.time()
                if trigger == "4th joins":
                    joiner.start()

                    def settled(p: dict[int, str]) -> bool:
                        return Counter(p.values())[joiner_id] == REBALANCE_TASKS // 4

                else:
                    assert joiner.proc is not None
                    bench.gone(joiner)
                    joiner.proc.terminate()

                    def settled(p: dict[int, str]) -> bool:
                        return joiner_id not in p.values()

                await bench.wait_placement(REBALANCE_TASKS, settled, trigger, 180)
                # Settled: no status record for 3 s.
                with anyio.fail_after(120):
                    while True:
                        count = len(status.events)
                        await anyio.sleep(3)
                        if len(status.events) == count:
                            break
                end = time.time()
                events = status.events[since:]
                before = status.events[:since]
                first = min((e.at for e in events), default=start)
                last = max((e.at for e in events), default=start)
                stopped = not_running([*before, *events], REBALANCE_TASKS, start, end)
                quiet = dict.fromkeys(range(REBALANCE_TASKS), 0.0)
                for task, a, b in output.gaps:
                    overlap = min(b, end) - max(a, start)
                    if overlap > 0 and b - a >= QUIET_GAP_S:
                        quiet[task] += overlap
                normal = max(
                    (b - a for _, a, b in output.gaps if a >= watched and b <= start), default=0.0
                )
                watched = end
                results.append(
                    RebalanceResult(
                        config.name, trigger,
                        sum(stopped.values()), max(stopped.values()),
                        sum(1 for s in stopped.values() if s > 0),
                        sum(quiet.values()), max(quiet.values()), normal, last - first,
                    )
                )  # fmt: skip
                if keep:  # the raw observations, next to the workers' logs
                    dump = {
                        "trigger": trigger, "start": start, "end": end,
                        "stopped": stopped, "quiet": quiet,
                        "status": [e.__dict__ for e in events],
                        "gaps": [g for g in output.gaps if g[2] >= start and g[1] <= end],
                    }  # fmt: skip
                    name = trigger.split()[1]
                    (bench.directory / f"{name}.json").write_text(json.dumps(dump, indent=1))
                if trigger == "4th leaves (SIGTERM)":
                    assert joiner.proc is not None
                    joiner.proc.wait(timeout=30)
                await anyio.sleep(2)
            tg.cancel_scope.cancel()
        return results
    finally:
        bench.close(keep)


def rebalance_table(results: list[RebalanceResult]) -> str:
    lines = [
        "| protocol | trigger | rounds | task-s not RUNNING: sum, median (min-max) | "
        "max per task, median s | tasks stopped, median | task-s in output gaps ≥ 2 s: "
        "sum, median (min-max) | max per task, median s | longest gap before the "
        "trigger, median s | status changes span, median s |",
        "|---|---|---:|---|---:|---:|---|---:|---:|---:|",
    ]
    for key in dict.fromkeys((r.config, r.trigger) for r in results):
        rows = [r for r in results if (r.config, r.trigger) == key]
        sums = [r.stopped_sum for r in rows]
        quiet = [r.quiet_sum for r in rows]
        gaps = [r.normal_gap for r in rows]
        normal = med(gaps) if statistics.median(gaps) > 0 else "< 0.3"  # shorter ones: unseen
        lines.append(
            f"| {key[0]} | {key[1]} | {len(rows)} | {med(sums)} ({min(sums):.1f}-{max(sums):.1f}) "
            f"| {med([r.stopped_max for r in rows])} | "
            f"{statistics.median([r.stopped_tasks for r in rows]):.0f} | "
            f"{med(quiet)} ({min(quiet):.1f}-{max(quiet):.1f}) | "
            f"{med([r.quiet_max for r in rows])} | {normal} | "
            f"{med([r.settle_s for r in rows])} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


@dataclass
class Report:
    tables: list[tuple[str, str, str, str]] = field(default_factory=list)
    """(title, table, load before, load after)."""

    def add(self, title: str, table: str, load_before: str) -> None:
        self.tables.append((title, table, load_before, loadavg()))
        print(f"\n### {title}\n\n{table}\n\nload average: before {load_before}, "
              f"after {loadavg()}\n", flush=True)  # fmt: skip


async def run_failover(
    root: Path, bootstrap: str, rounds: int, sessions: Sequence[int], keep: bool, report: Report
) -> None:
    load = loadavg()
    results = []
    for r in range(rounds):
        for session_s in sessions:
            for config in FAILOVER_CONFIGS:
                started = time.monotonic()
                for _ in range(3):
                    try:
                        result = await failover_trial(root, bootstrap, config, session_s, keep)
                        break
                    except VictimLeads:
                        print("  (the priority-3 worker became the leader: again)", flush=True)
                else:
                    raise RuntimeError("the priority-3 worker led three times")
                results.append(result)
                print(
                    f"  failover round {r + 1}: {config.name}, session {session_s} s: "
                    f"{', '.join(f'{s:.2f}' for s in result.committed)} s "
                    f"(assignment {result.assigned and round(result.assigned, 2)} s, "
                    f"RUNNING {', '.join(f'{s:.2f}' for s in result.running)} s; "
                    f"trial {time.monotonic() - started:.0f} s)",
                    flush=True,
                )
    report.add("Failover: SIGKILL a worker running 4 exactly-once tasks",
               failover_table(results), load)  # fmt: skip


async def run_fencing(
    root: Path, bootstrap: str, rounds: int, sizes: Sequence[int], keep: bool, report: Report
) -> None:
    load = loadavg()
    results = []
    for workers in sizes:
        cluster = FencingCluster(root, bootstrap, workers)
        try:
            started = time.monotonic()
            async with anyio.create_task_group() as tg:
                await cluster.start()
                await tg.start(cluster.watch.run)
                print(f"  fencing: 100 tasks RUNNING on {workers} worker(s) after "
                      f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
                for r in range(rounds):
                    result = await cluster.change()
                    results.append(result)
                    print(
                        f"  fencing round {r + 1}, {workers} worker(s): {result.before} → "
                        f"{result.after} tasks, fenced {result.fenced} in {result.round_s:.3f} s; "
                        f"all RUNNING {result.put_to_running:.2f} s after the PUT",
                        flush=True,
                    )
                    await anyio.sleep(2)
                tg.cancel_scope.cancel()
        finally:
            cluster.bench.close(keep)
    report.add("Fencing round of a 100-task connector (task count change)",
               fencing_table(results), load)  # fmt: skip


async def run_rebalance(
    root: Path, bootstrap: str, rounds: int, keep: bool, report: Report
) -> None:
    load = loadavg()
    results = []
    for r in range(rounds):
        for config in REBALANCE_CONFIGS:
            trial = await rebalance_trials(root, bootstrap, config, keep)
            results += trial
            for t in trial:
                print(
                    f"  rebalance round {r + 1}: {config.name}, {t.trigger}: "
                    f"{t.stopped_sum:.1f} task-s not RUNNING ({t.stopped_tasks} tasks, max "
                    f"{t.stopped_max:.2f} s), {t.quiet_sum:.1f} task-s without output",
                    flush=True,
                )
    report.add(
        f"Rebalance: 3 workers, {REBALANCE_TASKS} tasks, a 4th joins then leaves",
        rebalance_table(results), load,
    )  # fmt: skip


async def measure(args: argparse.Namespace, bootstrap: str, root: Path) -> Report:
    report = Report()
    parts = args.parts.split(",")
    quick, rounds, keep = args.quick, args.rounds, args.keep_logs
    if "failover" in parts:
        sessions = (6,) if quick else (6, 10)
        await run_failover(root, bootstrap, rounds or (1 if quick else 3), sessions, keep, report)
    if "fencing" in parts:
        sizes = (1,) if quick else (1, 3)
        await run_fencing(root, bootstrap, rounds or (1 if quick else 2), sizes, keep, report)
    if "rebalance" in parts:
        await run_rebalance(root, bootstrap, rounds or 1, keep, report)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument(
        "--rounds", type=int, default=0, help="rounds of every part (default: 3, 2 and 1)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="one round; failover at 6 s only, fencing on 1 worker"
    )
    parser.add_argument("--parts", default="failover,fencing,rebalance")
    parser.add_argument("--keep-logs", action="store_true", help="keep the workers' logs")
    args = parser.parse_args()
    bench_process()
    root = Path(tempfile.mkdtemp(prefix="eos-bench-failover-"))
    started = time.monotonic()
    try:
        with bench_broker(args.bootstrap, heap="512m") as (bootstrap, _):
            report = anyio.run(measure, args, bootstrap, root)
    finally:
        if args.keep_logs:
            print(f"worker logs: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n## eos cluster bench ({time.monotonic() - started:.0f} s)\n")
    for title, table, before, after in report.tables:
        print(f"### {title}\n\n{table}\n\nload average: before {before}, after {after}\n")


if __name__ == "__main__":
    main()
