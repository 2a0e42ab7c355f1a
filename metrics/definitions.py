"""Every metric eos exports, created on one worker's own registry.

Naming follows Prometheus conventions: the ``eos_`` prefix, base units (seconds,
bytes), ``_total`` on counters, the unit as a suffix. Task metrics carry the labels
``connector`` and ``task``; worker metrics about a connector carry ``connector``;
rebalances carry ``protocol`` and ``cause``; output partitions ``topic`` and ``partition``.
No label takes unbounded values: connector names, task ids and the topics tasks write are
bounded by the cluster's configuration, ``state``,
``reason``, ``protocol`` and ``cause`` by the runtime's enumerations.
docs/monitoring.md has the table; a unit test keeps the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TASK_LABELS = ("connector", "task")
ABORT_REASONS = ("connector", "error", "shutdown")
#: Where a record failed (Kafka Connect's stage names, lower case).
FAILURE_STAGES = ("transformation", "header_converter", "key_converter", "value_converter")
#: The rebalance protocols and the causes of a rejoin (:class:`eos.runtime.observer.Rebalanced`).
PROTOCOLS = ("eager", "cooperative")
REBALANCE_CAUSES = ("start", "requested", "rebalance", "lost")

#: Records per committed transaction.
SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000, 100_000)
#: Commits, polls, fencing rounds: 1 ms to 1 min.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
)  # fmt: skip
#: How long a transaction stays open: 10 ms up to the producer's transaction timeout and past it.
OPEN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
#: Time in a rebalance: 10 ms (a cooperative round on loopback) up to past the
#: default rebalance.timeout.ms (60 s), which bounds how long the group waits.
REBALANCE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300)


def unit(name: str) -> str:
    """The base unit a metric name ends with (OpenMetrics ``# UNIT``), or ``""``."""
    stem = name.removesuffix("_total")
    return next((u for u in ("seconds", "bytes") if stem.endswith(f"_{u}")), "")


@dataclass(frozen=True)
class TaskMetrics:
    """Per-task metrics (labels ``connector``, ``task``)."""

    transaction_size_min: Gauge
    transaction_size_max: Gauge
    transaction_size_avg: Gauge
    transaction_records: Histogram
    transactions_committed: Counter
    transactions_aborted: Counter
    records_aborted: Counter
    commit_duration: Histogram
    transaction_open_duration: Histogram
    records_polled: Counter
    records_written: Counter
    records_dropped: Counter
    records_failed: Counter
    records_skipped: Counter
    records_dead_lettered: Counter
    written_bytes: Counter
    poll_duration: Histogram
    offset_commit_failures: Counter
    producer_fenced: Counter
    state: Gauge
    last_commit_age: Gauge
    last_commit_timestamp: Gauge
    events: Counter
    values: Gauge
    auto_restarts: Counter
    auto_restarting: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry) -> TaskMetrics:
        def gauge(name: str, doc: str, *extra: str) -> Gauge:
            labels = (*TASK_LABELS, *extra)
            return Gauge(name, doc, labels, registry=registry, unit=unit(name))

        def counter(name: str, doc: str, *extra: str) -> Counter:
            labels = (*TASK_LABELS, *extra)
            return Counter(name, doc, labels, registry=registry, unit=unit(name))

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(
                name, doc, TASK_LABELS, registry=registry, buckets=buckets, unit=unit(name)
            )

        return cls(
            transaction_size_min=gauge(
                "eos_task_transaction_size_min",
                "Fewest records in one committed transaction of this task (KIP-618 "
                "transaction-size-min), over the task's lifetime on this worker.",
            ),
            transaction_size_max=gauge(
                "eos_task_transaction_size_max",
                "Most records in one committed transaction (KIP-618 transaction-size-max).",
            ),
            transaction_size_avg=gauge(
                "eos_task_transaction_size_avg",
                "Average records per committed transaction (KIP-618 transaction-size-avg).",
            ),
            transaction_records=histogram(
                "eos_task_transaction_records",
                "Records per committed transaction.",
                SIZE_BUCKETS,
            ),
            transactions_committed=counter(
                "eos_task_transactions_committed_total",
                "Transactions committed (at-least-once: offset flushes).",
            ),
            transactions_aborted=counter(
                "eos_task_transactions_aborted_total",
                "Transactions aborted, by reason: connector (the task asked), error, shutdown.",
                "reason",
            ),
            records_aborted=counter(
                "eos_task_records_aborted_total", "Records in aborted transactions."
            ),
            commit_duration=histogram(
                "eos_task_commit_duration_seconds",
                "Time the commit of a transaction (or offset flush) took.",
                LATENCY_BUCKETS,
            ),
            transaction_open_duration=histogram(
                "eos_task_transaction_open_duration_seconds",
                "How long a transaction was open before it committed.",
                OPEN_BUCKETS,
            ),
            records_polled=counter(
                "eos_task_records_polled_total", "Records returned by the task's poll."
            ),
            records_written=counter(
                "eos_task_records_written_total", "Records handed to the producer."
            ),
            records_dropped=counter(
                "eos_task_records_dropped_total",
                "Polled records the framework did not write (a transform dropped them).",
            ),
            records_failed=counter(
                "eos_task_records_failed_total",
                "Records a transform or converter failed on, by stage (transformation, "
                "header_converter, key_converter, value_converter): each failed the task or, "
                "with "
                "errors.tolerance=all, was skipped.",
                "stage",
            ),
            records_skipped=counter(
                "eos_task_records_skipped_total",
                "Failed records errors.tolerance=all skipped (not written to their topic; "
                "their offsets commit), dead-lettered or not.",
            ),
            records_dead_lettered=counter(
                "eos_task_records_dead_lettered_total",
                "Skipped records written to the dead-letter topic "
                "(errors.deadletterqueue.topic.name), in the transaction of the output.",
            ),
            written_bytes=counter(
                "eos_task_written_bytes_total",
                "Key and value bytes of the records handed to the producer.",
            ),
            poll_duration=histogram(
                "eos_task_poll_duration_seconds",
                "Time one call to the task's poll took.",
                LATENCY_BUCKETS,
            ),
            offset_commit_failures=counter(
                "eos_task_offset_commit_failures_total",
                "Failed attempts to commit the task's source offsets.",
            ),
            producer_fenced=counter(
                "eos_task_producer_fenced_total",
                "Times the task's transactional producer was fenced by a newer instance.",
            ),
            state=gauge(
                "eos_task_state",
                "1 for the task's current state, 0 for the other known states.",
                "state",
            ),
            last_commit_age=gauge(
                "eos_task_last_commit_age_seconds",
                "Seconds since the task's last committed transaction (since the task "
                "started on this worker if it has not committed yet), computed at scrape time.",
            ),
            last_commit_timestamp=gauge(
                "eos_task_last_commit_timestamp_seconds",
                "Unix time of the task's last committed transaction (absent before the first).",
            ),
            events=counter(
                "eos_task_events_total",
                "Events the connector's task counted itself, by event (e.g. SparkSource "
                "changed_files: files found changed after they were read).",
                "event",
            ),
            values=gauge(
                "eos_task_value",
                "Values the connector's task set itself, by name (e.g. PostgresCdcSource "
                "slot_lag_bytes: WAL its replication slot holds beyond what Kafka has).",
                "gauge",
            ),
            auto_restarts=counter(
                "eos_task_auto_restarts_total",
                "Automatic restarts of the failed task on this worker (the series lives "
                "while the task is assigned here, across its restarts).",
            ),
            auto_restarting=gauge(
                "eos_task_auto_restarting",
                "Automatic restarts of the task in a row, as its status shows them: 0 once "
                "it has run as long as its last backoff without failing.",
            ),
        )


@dataclass(frozen=True)
class WorkerMetrics:
    """Per-worker metrics (no labels, ``connector``, or ``protocol`` and ``cause``)."""

    rebalances: Counter
    rebalance_duration: Histogram
    generation: Gauge
    leader: Gauge
    leader_changes: Counter
    members: Gauge
    assigned_connectors: Gauge
    assigned_tasks: Gauge
    revoked_connectors: Counter
    revoked_tasks: Counter
    scheduled_rebalance_delay: Gauge
    scheduled_rebalances: Counter
    fencing_rounds: Counter
    fencing_round_failures: Counter
    fencing_round_duration: Histogram
    producers_fenced: Counter
    task_count_records: Counter
    config_read_lag: Gauge
    offset_mirror_pending: Gauge
    thread_pool_busy: Gauge
    thread_pool_queued: Gauge
    connector_auto_restarts: Counter
    connector_auto_restarting: Gauge
    lso_lag: Gauge
    lso_stuck: Gauge
    declared_files: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry) -> WorkerMetrics:
        def by_connector(name: str, doc: str) -> Counter:
            return Counter(name, doc, ("connector",), registry=registry)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, registry=registry, unit=unit(name))

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, registry=registry)

        return cls(
            rebalances=Counter(
                "eos_worker_rebalances_total",
                "Completed rebalances this worker took part in, by protocol (eager, "
                "cooperative) and by why it rejoined: start, requested (by this worker: a "
                "config change, handed-over work, a scheduled rebalance), rebalance (another "
                "member's), lost (expelled from the group).",
                ("protocol", "cause"),
                registry=registry,
            ),
            rebalance_duration=Histogram(
                "eos_worker_rebalance_duration_seconds",
                "Time from the decision to rejoin until the assignment arrived.",
                registry=registry,
                buckets=REBALANCE_BUCKETS,
                unit="seconds",
            ),
            generation=gauge(
                "eos_worker_generation", "Group generation of the last completed rebalance."
            ),
            leader=gauge("eos_worker_leader", "1 if this worker is the group's leader."),
            leader_changes=counter(
                "eos_worker_leader_changes_total",
                "Rebalances after which another member led the group than in the "
                "previous generation this worker saw.",
            ),
            members=gauge(
                "eos_worker_group_members", "Members of the group in the last completed rebalance."
            ),
            assigned_connectors=gauge(
                "eos_worker_assigned_connectors",
                "Connectors assigned to this worker by the last completed rebalance.",
            ),
            assigned_tasks=gauge(
                "eos_worker_assigned_tasks",
                "Tasks assigned to this worker by the last completed rebalance.",
            ),
            revoked_connectors=counter(
                "eos_worker_revoked_connectors_total",
                "Connectors revoked from this worker by cooperative rebalances (moved elsewhere; "
                "under eager, and when lost, a worker drops all its work before it rejoins).",
            ),
            revoked_tasks=counter(
                "eos_worker_revoked_tasks_total",
                "Tasks revoked from this worker by cooperative rebalances (moved elsewhere; "
                "under eager, and when lost, a worker drops all its work before it rejoins).",
            ),
            scheduled_rebalance_delay=gauge(
                "eos_worker_scheduled_rebalance_delay_seconds",
                "Delay of the later rebalance the leader scheduled in the last completed "
                "one (work of a lost member held back, a failover settle time); 0 if none.",
            ),
            scheduled_rebalances=counter(
                "eos_worker_scheduled_rebalances_total",
                "Completed rebalances after which the leader scheduled a later one (work "
                "held back for a lost member, a failover settle time).",
            ),
            fencing_rounds=by_connector(
                "eos_worker_fencing_rounds_total",
                "Zombie fencing rounds this worker ran as leader, failed or not.",
            ),
            fencing_round_failures=by_connector(
                "eos_worker_fencing_round_failures_total", "Fencing rounds that failed."
            ),
            fencing_round_duration=Histogram(
                "eos_worker_fencing_round_duration_seconds",
                "Time a fencing round took.",
                ("connector",),
                registry=registry,
                buckets=LATENCY_BUCKETS,
                unit="seconds",
            ),
            producers_fenced=by_connector(
                "eos_worker_producers_fenced_total",
                "Task producers on this worker that were fenced (kept after the task is gone).",
            ),
            task_count_records=by_connector(
                "eos_worker_task_count_records_written_total",
                "Task count records the leader wrote to the config topic.",
            ),
            config_read_lag=Gauge(
                "eos_worker_config_read_lag_records",
                "Config topic records not yet applied when last checked.",
                registry=registry,
            ),
            offset_mirror_pending=Gauge(
                "eos_worker_offset_mirror_pending_offsets",
                "Committed offsets not yet copied to the global offsets topic.",
                registry=registry,
            ),
            thread_pool_busy=Gauge(
                "eos_worker_thread_pool_busy_threads",
                "Threads of the blocking-call pool (Spark reads) in use.",
                registry=registry,
            ),
            thread_pool_queued=Gauge(
                "eos_worker_thread_pool_queued_calls",
                "Blocking calls waiting for a thread.",
                registry=registry,
            ),
            connector_auto_restarts=by_connector(
                "eos_worker_connector_auto_restarts_total",
                "Automatic restarts of the failed connector (its instance, not its tasks) "
                "on this worker.",
            ),
            connector_auto_restarting=Gauge(
                "eos_worker_connector_auto_restarting",
                "Automatic restarts of the connector in a row, as its status shows them.",
                ("connector",),
                registry=registry,
            ),
            lso_lag=Gauge(
                "eos_worker_output_lso_lag_records",
                "Records an output partition's last stable offset is behind its high "
                "watermark (held back by open transactions), per topic and partition the "
                "worker's tasks write.",
                ("topic", "partition"),
                registry=registry,
            ),
            lso_stuck=Gauge(
                "eos_worker_output_lso_stuck_seconds",
                "How long the output partition's last stable offset has been behind its high "
                "watermark without moving (0 when it is not behind): a transaction left open.",
                ("topic", "partition"),
                registry=registry,
                unit="seconds",
            ),
            declared_files=Gauge(
                "eos_worker_connector_file_outcome",
                "1 for each file of connectors.dir with the outcome of the leader's last "
                "reconcile (created, updated, state, unchanged, not applied, unreadable); "
                "exported by the leader only.",
                ("file", "connector", "outcome"),
                registry=registry,
            ),
        )
