"""The runtime's observer port (:mod:`eos.runtime.observer`) implemented with
prometheus-client on one worker's own registry.

Invariants:
- Every method is cheap and never raises: a failure is logged and dropped.
- A task's series exist from :meth:`PrometheusObserver.task` until its observer's
  :meth:`~PrometheusTaskObserver.close`; the KIP-618 size gauges and the last-commit
  timestamp appear with the first committed transaction.
- When a task is started again on this worker before the old observer is closed,
  the new observer owns the series: the old one still counts but sets no gauges,
  and closing it removes nothing. Calls on a closed observer are ignored (so they
  cannot bring series back); an observer holds its series' children from the start,
  so one superseded by an observer that was closed since counts into series that are
  no longer exported, and brings nothing back either.
- ``eos_worker_rebalances_total`` has a series for every known protocol and cause
  from the start, at 0, so that ``increase()`` sees the first rebalance of a kind
  (once the 0 was scraped); the cluster gauges hold the last completed rebalance's
  values.
- Lock order: the worker observer's lock, then a task observer's; series are
  created and removed only under the worker observer's lock.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import platform
import threading
import time
from collections.abc import Callable, Mapping
from typing import ParamSpec

import aiokafka
from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from eos.runtime.observer import (
    AbortReason,
    FailureOutcome,
    NullTaskObserver,
    ProducerStats,
    Rebalanced,
    TaskObserver,
)
from eos.state import TASK_STATES, State
from metrics.definitions import (
    ABORT_REASONS,
    FAILURE_STAGES,
    PROTOCOLS,
    REBALANCE_CAUSES,
    TaskMetrics,
    WorkerMetrics,
)

__all__ = ["PrometheusObserver", "PrometheusTaskObserver"]

_log = logging.getLogger(__name__)
_P = ParamSpec("_P")
Clock = Callable[[], float]


def _never_raises(fn: Callable[_P, None]) -> Callable[_P, None]:
    @functools.wraps(fn)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            _log.exception("metrics: %s failed", fn.__qualname__)

    return guarded


class PrometheusTaskObserver:
    """Reports one task (``connector``, ``task``) into :class:`TaskMetrics`."""

    def __init__(
        self,
        metrics: TaskMetrics,
        connector: str,
        task_id: int,
        *,
        clock: Clock,
        release: Callable[[PrometheusTaskObserver], None],
        fenced_on_worker: Counter,
    ) -> None:
        self._m = metrics
        self._fenced_on_worker = fenced_on_worker
        self._labels = labels = (connector, str(task_id))
        self._clock = clock
        self._release = release
        self._lock = threading.Lock()
        self._closed = False
        self._superseded = False
        self._started = clock()
        self._last_commit: float | None = None
        self._committed = 0
        self._committed_records = 0
        self._min = 0
        self._max = 0
        self._states = [s.value for s in TASK_STATES]
        self._events: set[str] = set()
        self._values: set[str] = set()
        self._create_series()
        # The labelled children, looked up once: a lookup costs more than the update
        # (the hot path runs per poll, per send and per commit of every task).
        c = labels
        self._polled = metrics.records_polled.labels(*c)
        self._poll_duration = metrics.poll_duration.labels(*c)
        self._written = metrics.records_written.labels(*c)
        self._written_bytes = metrics.written_bytes.labels(*c)
        self._txn_committed = metrics.transactions_committed.labels(*c)
        self._txn_records = metrics.transaction_records.labels(*c)
        self._commit_duration = metrics.commit_duration.labels(*c)
        self._open_duration = metrics.transaction_open_duration.labels(*c)
        self._commit_gauges: tuple[Gauge, Gauge, Gauge, Gauge] | None = None
        """min, max, avg size and last commit time: created by the first commit."""
        self._producer: tuple[str, Callable[[], ProducerStats]] | None = None
        """The running producer's client and its figures (read at scrape time)."""

    @property
    def labels(self) -> tuple[str, str]:
        """``(connector, task)`` as they appear in the series."""
        return self._labels

    def supersede(self) -> None:
        """A newer observer of the same task took over the series: from now on this
        one only counts (a zombie's late fencing still shows), it sets no gauges and
        removes nothing when closed."""
        with self._lock:
            self._superseded = True

    def _create_series(self) -> None:
        m, labels = self._m, self._labels
        for counter in (
            m.transactions_committed,
            m.records_aborted,
            m.records_polled,
            m.records_written,
            m.records_dropped,
            m.records_skipped,
            m.records_dead_lettered,
            m.written_bytes,
            m.offset_commit_failures,
            m.producer_fenced,
        ):
            counter.labels(*labels)
        for reason in ABORT_REASONS:
            m.transactions_aborted.labels(*labels, reason)
        for stage in FAILURE_STAGES:
            m.records_failed.labels(*labels, stage)
        for histogram in (
            m.transaction_records,
            m.commit_duration,
            m.transaction_open_duration,
            m.poll_duration,
        ):
            histogram.labels(*labels)
        for state in self._states:
            m.state.labels(*labels, state).set(0)
        m.last_commit_age.labels(*labels).set_function(self._last_commit_age)

    def _create_commit_gauges(self) -> tuple[Gauge, Gauge, Gauge, Gauge]:
        m, labels = self._m, self._labels
        return (
            m.transaction_size_min.labels(*labels),
            m.transaction_size_max.labels(*labels),
            m.transaction_size_avg.labels(*labels),
            m.last_commit_timestamp.labels(*labels),
        )

    def _last_commit_age(self) -> float:
        since = self._started if self._last_commit is None else self._last_commit
        return max(0.0, self._clock() - since)

    @_never_raises
    def state_changed(self, state: State) -> None:
        with self._lock:
            if self._closed or self._superseded:
                return
            for known in self._states:
                self._m.state.labels(*self._labels, known).set(1 if known == state.value else 0)

    @_never_raises
    def poll_completed(self, records: int, seconds: float) -> None:
        if self._closed:
            return
        self._polled.inc(records)
        self._poll_duration.observe(seconds)

    @_never_raises
    def records_written(self, records: int, nbytes: int) -> None:
        if self._closed:
            return
        self._written.inc(records)
        self._written_bytes.inc(nbytes)

    @_never_raises
    def records_dropped(self, records: int) -> None:
        if self._closed:
            return
        self._m.records_dropped.labels(*self._labels).inc(records)

    @_never_raises
    def record_failed(self, stage: str, outcome: FailureOutcome) -> None:
        if self._closed:
            return
        m, labels = self._m, self._labels
        m.records_failed.labels(*labels, stage.lower()).inc()
        if outcome != "failed":
            m.records_skipped.labels(*labels).inc()
        if outcome == "dead_lettered":
            m.records_dead_lettered.labels(*labels).inc()

    @_never_raises
    def transaction_committed(
        self, records: int, commit_seconds: float, open_seconds: float
    ) -> None:
        with self._lock:
            if self._closed:
                return
            first = self._committed == 0
            self._committed += 1
            self._committed_records += records
            self._min = records if first else min(self._min, records)
            self._max = records if first else max(self._max, records)
            self._last_commit = self._clock()
            if not self._superseded:
                gauges = self._commit_gauges
                if gauges is None:
                    gauges = self._commit_gauges = self._create_commit_gauges()
                size_min, size_max, size_avg, last_commit = gauges
                size_min.set(self._min)
                size_max.set(self._max)
                size_avg.set(self._committed_records / self._committed)
                last_commit.set(self._last_commit)
        self._txn_committed.inc()
        self._txn_records.observe(records)
        self._commit_duration.observe(commit_seconds)
        self._open_duration.observe(open_seconds)

    @_never_raises
    def transaction_aborted(self, records: int, reason: AbortReason) -> None:
        if self._closed:
            return
        self._m.transactions_aborted.labels(*self._labels, reason).inc()
        self._m.records_aborted.labels(*self._labels).inc(records)

    @_never_raises
    def offset_commit_failed(self) -> None:
        if self._closed:
            return
        self._m.offset_commit_failures.labels(*self._labels).inc()

    @_never_raises
    def producer_fenced(self) -> None:
        if self._closed:
            return
        self._m.producer_fenced.labels(*self._labels).inc()
        self._fenced_on_worker.inc()

    @_never_raises
    def producer_started(self, client: str, stats: Callable[[], ProducerStats]) -> None:
        if not self._closed:
            self._producer = (client, stats)

    @_never_raises
    def producer_closed(self) -> None:
        self._producer = None

    def producer_stats(self) -> tuple[str, ProducerStats] | None:
        """The running producer's client and figures, unless closed or superseded."""
        producer = self._producer
        if producer is None or self._closed or self._superseded:
            return None
        client, stats = producer
        return client, stats()

    @_never_raises
    def task_event(self, event: str, amount: int) -> None:
        with self._lock:
            if self._closed:
                return
            self._events.add(event)
        self._m.events.labels(*self._labels, event).inc(amount)

    @_never_raises
    def task_value(self, name: str, value: float) -> None:
        with self._lock:
            if self._closed:
                return
            self._values.add(name)
        self._m.values.labels(*self._labels, name).set(value)

    @_never_raises
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._release(self)

    def remove_series(self) -> None:
        """Called by the worker observer, under its lock, when this one owns them."""
        m, labels = self._m, self._labels
        for metric in (
            m.transaction_size_min,
            m.transaction_size_max,
            m.transaction_size_avg,
            m.transaction_records,
            m.transactions_committed,
            m.records_aborted,
            m.commit_duration,
            m.transaction_open_duration,
            m.records_polled,
            m.records_written,
            m.records_dropped,
            m.records_skipped,
            m.records_dead_lettered,
            m.written_bytes,
            m.poll_duration,
            m.offset_commit_failures,
            m.producer_fenced,
            m.last_commit_age,
            m.last_commit_timestamp,
        ):
            metric.remove(*labels)
        for reason in ABORT_REASONS:
            m.transactions_aborted.remove(*labels, reason)
        for stage in FAILURE_STAGES:
            m.records_failed.remove(*labels, stage)
        for state in self._states:
            m.state.remove(*labels, state)
        for event in self._events:
            m.events.remove(*labels, event)
        for name in self._values:
            m.values.remove(*labels, name)


class PrometheusObserver:
    """A worker's :class:`~eos.runtime.observer.WorkerObserver` on its own registry.

    ``registry`` defaults to a new :class:`CollectorRegistry` (never the global
    default one). With ``process_metrics`` the process, platform and GC collectors
    (``process_*``, ``python_*``) are registered on it too; pass ``False`` when
    they are already there.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        process_metrics: bool = True,
        clock: Clock = time.time,
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        self._clock = clock
        self._task_metrics = TaskMetrics.create(self.registry)
        self._m = WorkerMetrics.create(self.registry)
        self._owners: dict[tuple[str, str], PrometheusTaskObserver] = {}
        self._lso_series: set[tuple[str, str]] = set()
        self._file_series: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._connector_states: Callable[[], Mapping[str, State]] = dict
        self.registry.register(_ConnectorStatus(lambda: self._connector_states()))
        self.registry.register(_ProducerClients(self._producers))
        Info(
            "eos_build", "The eos release and what it runs on (always 1).", registry=self.registry
        ).info(
            {
                "version": importlib.metadata.version("eos"),
                "python": platform.python_version(),
                "aiokafka": aiokafka.__version__,
            }
        )
        for protocol in PROTOCOLS:  # from 0, so that increase() sees the first rebalance
            for cause in REBALANCE_CAUSES:
                self._m.rebalances.labels(protocol, cause)
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            if GC_COLLECTOR is not None:
                GCCollector(registry=self.registry)

    def task(self, connector: str, task_id: int) -> TaskObserver:
        try:
            with self._lock:
                observer = PrometheusTaskObserver(
                    self._task_metrics,
                    connector,
                    task_id,
                    clock=self._clock,
                    release=self._release,
                    fenced_on_worker=self._m.producers_fenced.labels(connector),
                )
                previous = self._owners.get(observer.labels)
                if previous is not None:
                    previous.supersede()
                self._owners[observer.labels] = observer
            return observer
        except Exception:
            _log.exception("metrics: task observer for %s/%s failed", connector, task_id)
            return NullTaskObserver()

    def _producers(self) -> list[tuple[tuple[str, str], str, ProducerStats]]:
        """Each task's running producer: (connector, task), client, figures."""
        with self._lock:
            owners = list(self._owners.values())
        found = []
        for observer in owners:
            stats = observer.producer_stats()
            if stats is not None:
                found.append((observer.labels, *stats))
        return found

    def _release(self, observer: PrometheusTaskObserver) -> None:
        """Forget a closed ``observer`` and remove its series if it still owns them."""
        with self._lock:
            if self._owners.get(observer.labels) is observer:
                del self._owners[observer.labels]
                observer.remove_series()

    @_never_raises
    def rebalance_completed(self, rebalanced: Rebalanced) -> None:
        """Gauges take the round's values (the scheduled delay goes back to 0 after a
        round that scheduled none); counters add it. Gauges first: a bad count (a
        counter cannot go down) must not leave them stale."""
        m, r = self._m, rebalanced
        m.generation.set(r.generation)
        m.leader.set(1 if r.leader else 0)
        m.members.set(r.members)
        m.assigned_connectors.set(r.connectors)
        m.assigned_tasks.set(r.tasks)
        m.scheduled_rebalance_delay.set(r.delay_ms / 1000)
        m.rebalances.labels(r.protocol, r.cause).inc()
        m.rebalance_duration.observe(r.seconds)
        if r.leader_changed:
            m.leader_changes.inc()
        m.revoked_connectors.inc(r.revoked_connectors)
        m.revoked_tasks.inc(r.revoked_tasks)
        if r.delay_ms > 0:
            m.scheduled_rebalances.inc()

    @_never_raises
    def fencing_round(self, connector: str, seconds: float, ok: bool) -> None:
        self._m.fencing_rounds.labels(connector).inc()
        failures = self._m.fencing_round_failures.labels(connector)
        if not ok:
            failures.inc()
        self._m.fencing_round_duration.labels(connector).observe(seconds)

    @_never_raises
    def task_count_record_written(self, connector: str) -> None:
        self._m.task_count_records.labels(connector).inc()

    @_never_raises
    def config_read_lag(self, records: int) -> None:
        self._m.config_read_lag.set(records)

    @_never_raises
    def offset_mirror_backlog(self, offsets: int) -> None:
        self._m.offset_mirror_pending.set(offsets)

    @_never_raises
    def thread_pool(self, busy: int, queued: int) -> None:
        self._m.thread_pool_busy.set(busy)
        self._m.thread_pool_queued.set(queued)

    def _auto_restart_series(self, connector: str, task: int | None) -> tuple[Counter, Gauge]:
        """The restart counter and in-a-row gauge of a connector (task None) or task
        (created, the counter at 0, on first use)."""
        if task is None:
            m = self._m
            return (
                m.connector_auto_restarts.labels(connector),
                m.connector_auto_restarting.labels(connector),
            )
        t, labels = self._task_metrics, (connector, str(task))
        return t.auto_restarts.labels(*labels), t.auto_restarting.labels(*labels)

    @_never_raises
    def auto_restarted(self, connector: str, task: int | None, in_a_row: int) -> None:
        counter, gauge = self._auto_restart_series(connector, task)
        counter.inc()
        gauge.set(in_a_row)

    @_never_raises
    def auto_restarts_in_a_row(self, connector: str, task: int | None, in_a_row: int) -> None:
        self._auto_restart_series(connector, task)[1].set(in_a_row)

    @_never_raises
    def auto_restart_forgotten(self, connector: str, task: int | None) -> None:
        if task is None:
            self._m.connector_auto_restarts.remove(connector)
            self._m.connector_auto_restarting.remove(connector)
            return
        labels = (connector, str(task))
        self._task_metrics.auto_restarts.remove(*labels)
        self._task_metrics.auto_restarting.remove(*labels)

    @_never_raises
    def worker_info(self, group: str, worker: str, exactly_once: str) -> None:
        Info(
            "eos_worker",
            "Who this worker is (always 1): its group (the cluster, as dashboards' $cluster "
            "and the Connect-compatible rules select it), id and exactly-once mode.",
            registry=self.registry,
        ).info({"group": group, "worker": worker, "exactly_once_source_support": exactly_once})

    @_never_raises
    def connector_states(self, states: Callable[[], Mapping[str, State]]) -> None:
        self._connector_states = states

    @_never_raises
    def connector_files(self, outcomes: Mapping[str, tuple[str, str]]) -> None:
        seen = {(file, connector, outcome) for file, (connector, outcome) in outcomes.items()}
        for labels in self._file_series - seen:
            self._m.declared_files.remove(*labels)
        for labels in seen:
            self._m.declared_files.labels(*labels).set(1)
        self._file_series = seen

    @_never_raises
    def last_stable_offsets(self, partitions: Mapping[tuple[str, int], tuple[int, float]]) -> None:
        seen = {(topic, str(partition)) for topic, partition in partitions}
        for labels in self._lso_series - seen:
            self._m.lso_lag.remove(*labels)
            self._m.lso_stuck.remove(*labels)
        for (topic, partition), (lag, stuck) in partitions.items():
            self._m.lso_lag.labels(topic, str(partition)).set(lag)
            self._m.lso_stuck.labels(topic, str(partition)).set(stuck)
        self._lso_series = seen


class _ConnectorStatus:
    """``eos_connector_status{connector,state}``: for each connector this worker reports,
    1 for its state and 0 for the others (as Strimzi's JMX exporter rules publish Connect's
    connector status), read at scrape time."""

    def __init__(self, states: Callable[[], Mapping[str, State]]) -> None:
        self._states = states

    def collect(self) -> list[Metric]:
        family = GaugeMetricFamily(
            CONNECTOR_STATUS,
            "1 for the state of each connector this worker reports (its last status written "
            "here), 0 for the other known states.",
            labels=("connector", "state"),
        )
        try:
            states = dict(self._states())
        except Exception:  # a scrape never fails for this family: it is left empty
            _log.exception("metrics: connector states failed")
            states = {}
        for connector, current in sorted(states.items()):
            for state in TASK_STATES:
                family.add_metric((connector, state.value), 1 if state is current else 0)
        return [family]

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(CONNECTOR_STATUS, "", labels=("connector", "state"))]


CONNECTOR_STATUS = "eos_connector_status"


_PRODUCER_LABELS = ("connector", "task", "client")


class _ProducerClients:
    """The task producers' client metrics (Java's ``producer-metrics``: record-send,
    record-error, request-latency, batch-size, buffer), read from each running producer
    at scrape time: aiokafka's counted by eos, librdkafka's from its statistics."""

    def __init__(self, producers: Callable[[], list[tuple[tuple[str, str], str, ProducerStats]]]):
        self._producers = producers

    def _families(
        self,
    ) -> tuple[
        CounterMetricFamily,
        CounterMetricFamily,
        SummaryMetricFamily,
        SummaryMetricFamily,
        GaugeMetricFamily,
    ]:
        labels = _PRODUCER_LABELS
        return (
            CounterMetricFamily(
                "eos_task_producer_records_sent",
                "Records the task's producer sent in Produce requests (a retried batch "
                "counts again), as Java's record-send-total; since the producer started.",
                labels=labels,
            ),
            CounterMetricFamily(
                "eos_task_producer_record_errors",
                "Records whose send failed, as Java's record-error-total.",
                labels=labels,
            ),
            SummaryMetricFamily(
                "eos_task_producer_request_latency_seconds",
                "Round trips of the producer's requests (aiokafka: Produce requests; "
                "librdkafka: every request, its brokers' rtt), as Java's request-latency.",
                labels=labels,
                unit="seconds",
            ),
            SummaryMetricFamily(
                "eos_task_producer_batch_size_bytes",
                "Bytes per record batch sent, as Java's batch-size.",
                labels=labels,
                unit="bytes",
            ),
            GaugeMetricFamily(
                "eos_task_producer_buffered_bytes",
                "Record bytes queued in the producer, not sent yet (Java: buffer-total-bytes "
                "less buffer-available-bytes).",
                labels=labels,
                unit="bytes",
            ),
        )

    def collect(self) -> list[Metric]:
        sent, errors, latency, batches, buffered = families = self._families()
        try:
            producers = self._producers()
        except Exception:  # a scrape never fails for these families: they are left empty
            _log.exception("metrics: producer figures failed")
            producers = []
        for (connector, task), client, stats in producers:
            labels = [connector, task, client]
            sent.add_metric(labels, stats.records_sent)
            errors.add_metric(labels, stats.record_errors)
            latency.add_metric(labels, stats.requests, stats.request_seconds)
            batches.add_metric(labels, stats.batches, stats.batch_bytes)
            buffered.add_metric(labels, stats.buffered_bytes)
        return list(families)

    def describe(self) -> list[Metric]:
        return list(self._families())
