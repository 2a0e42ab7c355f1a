"""PrometheusObserver: values after scripted sequences, task state, series removal."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from eos.runtime.observer import ProducerStats, TaskObserver, WorkerObserver, rebalanced
from eos.state import TASK_STATES, State
from metrics import PrometheusObserver

STATES = [s.value for s in TASK_STATES]


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def total(registry: CollectorRegistry, name: str) -> float:
    """The sum of a metric's samples over all its labels."""
    return sum(s.value for family in registry.collect() for s in family.samples if s.name == name)


def task_labels(connector: str = "orders", task: str = "0") -> dict[str, str]:
    return {"connector": connector, "task": task}


def series_of(registry: CollectorRegistry, **labels: str) -> list[str]:
    """Names of the samples whose labels include ``labels``."""
    return [
        s.name
        for family in registry.collect()
        for s in family.samples
        if all(s.labels.get(k) == v for k, v in labels.items())
    ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def observer(clock: FakeClock) -> PrometheusObserver:
    return PrometheusObserver(process_metrics=False, clock=clock)


def test_implements_the_runtime_port(observer: PrometheusObserver) -> None:
    worker: WorkerObserver = observer
    task: TaskObserver = worker.task("orders", 0)
    assert task is not None


def test_transaction_size_min_max_avg_after_scripted_commits_and_aborts(
    observer: PrometheusObserver,
) -> None:
    task = observer.task("orders", 0)
    reg, labels = observer.registry, task_labels()
    for records in (5, 3):
        task.transaction_committed(records, 0.01, 0.1)
    task.transaction_aborted(100, "connector")  # aborted: not a committed size
    task.transaction_aborted(1, "error")
    for records in (9, 1, 12):
        task.transaction_committed(records, 0.02, 0.2)
    task.transaction_aborted(50, "shutdown")
    task.transaction_aborted(7, "error")

    assert value(reg, "eos_task_transaction_size_min", **labels) == 1
    assert value(reg, "eos_task_transaction_size_max", **labels) == 12
    assert value(reg, "eos_task_transaction_size_avg", **labels) == 30 / 5
    assert value(reg, "eos_task_transactions_committed_total", **labels) == 5
    aborted = {
        reason: value(reg, "eos_task_transactions_aborted_total", **labels, reason=reason)
        for reason in ("connector", "error", "shutdown")
    }
    assert aborted == {"connector": 1, "error": 2, "shutdown": 1}
    assert value(reg, "eos_task_records_aborted_total", **labels) == 158
    assert value(reg, "eos_task_transaction_records_count", **labels) == 5
    assert value(reg, "eos_task_transaction_records_sum", **labels) == 30
    assert value(reg, "eos_task_transaction_records_bucket", **labels, le="5.0") == 3
    assert value(reg, "eos_task_commit_duration_seconds_count", **labels) == 5
    assert value(reg, "eos_task_commit_duration_seconds_sum", **labels) == pytest.approx(0.08)
    assert value(reg, "eos_task_transaction_open_duration_seconds_sum", **labels) == (
        pytest.approx(0.8)
    )


def test_average_is_exact_for_fractions(observer: PrometheusObserver) -> None:
    task = observer.task("orders", 0)
    task.transaction_committed(1, 0.0, 0.0)
    task.transaction_committed(2, 0.0, 0.0)
    assert value(observer.registry, "eos_task_transaction_size_avg", **task_labels()) == 1.5
    task.transaction_committed(0, 0.0, 0.0)  # an empty transaction (offsets only)
    assert value(observer.registry, "eos_task_transaction_size_min", **task_labels()) == 0
    assert value(observer.registry, "eos_task_transaction_size_avg", **task_labels()) == 1.0


def test_sizes_absent_before_the_first_commit(observer: PrometheusObserver) -> None:
    task = observer.task("orders", 0)
    task.transaction_aborted(4, "error")
    for name in ("min", "max", "avg"):
        assert (
            value(observer.registry, f"eos_task_transaction_size_{name}", **task_labels()) is None
        )
    assert value(observer.registry, "eos_task_transactions_committed_total", **task_labels()) == 0


def test_tasks_are_kept_apart(observer: PrometheusObserver) -> None:
    a, b = observer.task("orders", 0), observer.task("orders", 1)
    a.transaction_committed(10, 0.0, 0.0)
    b.transaction_committed(2, 0.0, 0.0)
    b.transaction_committed(4, 0.0, 0.0)
    reg = observer.registry
    assert value(reg, "eos_task_transaction_size_max", **task_labels()) == 10
    assert value(reg, "eos_task_transaction_size_avg", **task_labels(task="1")) == 3


def test_records_bytes_polls_failures_and_fencing(observer: PrometheusObserver) -> None:
    task = observer.task("clicks", 2)
    labels, reg = task_labels("clicks", "2"), observer.registry
    task.poll_completed(10, 0.5)
    task.poll_completed(0, 0.25)
    task.records_written(10, 1_234)
    task.offset_commit_failed()
    task.producer_fenced()
    task.producer_fenced()
    assert value(reg, "eos_task_records_polled_total", **labels) == 10
    assert value(reg, "eos_task_poll_duration_seconds_count", **labels) == 2
    assert value(reg, "eos_task_poll_duration_seconds_sum", **labels) == 0.75
    assert value(reg, "eos_task_records_written_total", **labels) == 10
    assert value(reg, "eos_task_written_bytes_total", **labels) == 1_234
    assert value(reg, "eos_task_offset_commit_failures_total", **labels) == 1
    assert value(reg, "eos_task_producer_fenced_total", **labels) == 2
    assert value(reg, "eos_worker_producers_fenced_total", connector="clicks") == 2
    assert value(reg, "eos_task_records_dropped_total", **labels) == 0


def test_state_gauge_has_one_series_per_state(observer: PrometheusObserver) -> None:
    task = observer.task("orders", 0)

    def states() -> dict[str, float | None]:
        return {
            s: value(observer.registry, "eos_task_state", **task_labels(), state=s) for s in STATES
        }

    assert states() == dict.fromkeys(STATES, 0)
    task.state_changed(State.RUNNING)
    assert states() == {s: float(s == "RUNNING") for s in STATES}
    task.state_changed(State.FAILED)
    assert states() == {s: float(s == "FAILED") for s in STATES}


def test_connector_status_is_read_at_scrape_time_one_series_per_state(
    observer: PrometheusObserver,
) -> None:
    reg = observer.registry
    owned: dict[str, State] = {"orders": State.RUNNING}
    observer.connector_states(lambda: owned)

    def states(connector: str) -> dict[str, float | None]:
        return {s: value(reg, "eos_connector_status", connector=connector, state=s) for s in STATES}

    assert states("orders") == {s: float(s == "RUNNING") for s in STATES}
    owned["orders"] = State.PAUSED
    owned["users"] = State.FAILED
    assert states("orders") == {s: float(s == "PAUSED") for s in STATES}
    assert states("users") == {s: float(s == "FAILED") for s in STATES}
    del owned["orders"]  # moved to another worker, or deleted: its series go
    assert states("orders") == dict.fromkeys(STATES)

    def broken() -> dict[str, State]:
        raise RuntimeError("status table changed size")

    observer.connector_states(broken)  # a scrape still answers, without the family's rows
    assert value(reg, "eos_connector_status", connector="users", state="FAILED") is None
    assert reg.get_sample_value("eos_build_info", {**build_labels()}) == 1


def build_labels() -> dict[str, str]:
    import importlib.metadata
    import platform

    import aiokafka

    return {
        "version": importlib.metadata.version("eos"),
        "python": platform.python_version(),
        "aiokafka": aiokafka.__version__,
    }


def test_last_commit_age_is_computed_at_scrape_time(
    observer: PrometheusObserver, clock: FakeClock
) -> None:
    task = observer.task("orders", 0)
    reg, labels = observer.registry, task_labels()
    clock.now += 7
    assert value(reg, "eos_task_last_commit_age_seconds", **labels) == 7  # since start
    assert value(reg, "eos_task_last_commit_timestamp_seconds", **labels) is None
    task.transaction_committed(1, 0.0, 0.0)
    assert value(reg, "eos_task_last_commit_timestamp_seconds", **labels) == clock.now
    clock.now += 42.5
    assert value(reg, "eos_task_last_commit_age_seconds", **labels) == 42.5
    task.transaction_aborted(1, "error")
    clock.now += 1
    assert value(reg, "eos_task_last_commit_age_seconds", **labels) == 43.5


def test_close_removes_the_tasks_series_only(observer: PrometheusObserver) -> None:
    gone, kept = observer.task("orders", 0), observer.task("orders", 1)
    for task in (gone, kept):
        task.state_changed(State.RUNNING)
        task.transaction_committed(3, 0.0, 0.0)
        task.transaction_aborted(1, "error")
    before = series_of(observer.registry, task="1")
    gone.close()
    assert series_of(observer.registry, connector="orders", task="0") == []
    assert series_of(observer.registry, task="1") == before
    gone.transaction_committed(5, 0.0, 0.0)  # ignored after close: no series come back
    gone.state_changed(State.STOPPED)
    gone.close()
    assert series_of(observer.registry, connector="orders", task="0") == []
    assert value(observer.registry, "eos_worker_producers_fenced_total", connector="orders") == 0


def test_connector_events_counted_per_event_and_removed_on_close(
    observer: PrometheusObserver,
) -> None:
    task = observer.task("orders", 0)
    task.task_event("changed_files", 1)
    task.task_event("changed_files", 2)
    task.task_event("skipped_rows", 5)
    events = "eos_task_events_total"
    assert value(observer.registry, events, **task_labels(), event="changed_files") == 3
    assert value(observer.registry, events, **task_labels(), event="skipped_rows") == 5
    task.task_value("slot_lag_bytes", 4096)
    task.task_value("slot_lag_bytes", 0)
    assert value(observer.registry, "eos_task_value", **task_labels(), gauge="slot_lag_bytes") == 0
    task.close()
    assert series_of(observer.registry, connector="orders", task="0") == []


def test_a_restarted_task_keeps_its_series_when_the_old_observer_closes(
    observer: PrometheusObserver,
) -> None:
    old = observer.task("orders", 0)
    old.transaction_committed(100, 0.0, 0.0)
    new = observer.task("orders", 0)
    new.transaction_committed(2, 0.0, 0.0)
    reg, labels = observer.registry, task_labels()
    old.state_changed(State.FAILED)  # superseded: sets no gauges...
    old.transaction_committed(500, 0.0, 0.0)
    old.producer_fenced()  # ...but still counts
    assert value(reg, "eos_task_state", **labels, state="FAILED") == 0
    assert value(reg, "eos_task_producer_fenced_total", **labels) == 1
    old.close()
    assert value(reg, "eos_task_transaction_size_max", **labels) == 2  # the new task's lifetime
    assert value(reg, "eos_task_transactions_committed_total", **labels) == 3
    new.close()
    assert {n.rsplit("_", 1)[0] for n in series_of(reg, connector="orders")} == {
        "eos_worker_producers_fenced"
    }


def test_worker_metrics(observer: PrometheusObserver) -> None:
    reg = observer.registry
    observer.rebalance_completed(rebalanced(4, True))
    observer.rebalance_completed(rebalanced(5, False))
    observer.fencing_round("orders", 0.5, True)
    observer.fencing_round("orders", 1.5, False)
    observer.fencing_round("clicks", 0.1, True)
    observer.task_count_record_written("orders")
    observer.config_read_lag(3)
    observer.offset_mirror_backlog(17)
    observer.thread_pool(2, 5)
    assert total(reg, "eos_worker_rebalances_total") == 2
    assert value(reg, "eos_worker_generation") == 5
    assert value(reg, "eos_worker_leader") == 0
    assert value(reg, "eos_worker_fencing_rounds_total", connector="orders") == 2
    assert value(reg, "eos_worker_fencing_round_failures_total", connector="orders") == 1
    assert value(reg, "eos_worker_fencing_round_failures_total", connector="clicks") == 0
    assert value(reg, "eos_worker_fencing_round_duration_seconds_sum", connector="orders") == 2
    assert value(reg, "eos_worker_task_count_records_written_total", connector="orders") == 1
    assert value(reg, "eos_worker_config_read_lag_records") == 3
    assert value(reg, "eos_worker_offset_mirror_pending_offsets") == 17
    assert value(reg, "eos_worker_thread_pool_busy_threads") == 2
    assert value(reg, "eos_worker_thread_pool_queued_calls") == 5
    observer.rebalance_completed(rebalanced(6, True))
    assert value(reg, "eos_worker_leader") == 1


def test_cluster_metrics_after_scripted_rebalances(observer: PrometheusObserver) -> None:
    """A worker starts alone, a second one joins (cooperative: round 1 revokes, round
    2 hands out), the leader is lost and this worker takes over while the lost
    member's work is held back, then an eager group expels this worker."""
    reg = observer.registry
    rounds = [
        rebalanced(1, True, cause="start", seconds=0.25, members=1, connectors=2, tasks=6),
        rebalanced(
            2, True, cause="rebalance", seconds=0.5, members=2, connectors=1, tasks=3,
            revoked_connectors=1, revoked_tasks=3,
        ),
        rebalanced(3, True, cause="requested", seconds=0.1, members=2, connectors=1, tasks=3),
        rebalanced(
            4, False, leader_changed=True, cause="rebalance", seconds=3.0, members=3,
            connectors=0, tasks=2, revoked_connectors=1, revoked_tasks=1,
        ),
        rebalanced(
            5, True, leader_changed=True, cause="rebalance", seconds=12.0, members=2,
            connectors=1, tasks=2, delay_ms=30_000,
        ),
    ]  # fmt: skip
    for r in rounds:
        observer.rebalance_completed(r)

    def rebalances(protocol: str, cause: str) -> float | None:
        return value(reg, "eos_worker_rebalances_total", protocol=protocol, cause=cause)

    assert rebalances("cooperative", "start") == 1
    assert rebalances("cooperative", "rebalance") == 3
    assert rebalances("cooperative", "requested") == 1
    assert rebalances("cooperative", "lost") == 0
    assert rebalances("eager", "start") == 0
    assert value(reg, "eos_worker_rebalance_duration_seconds_count") == 5
    assert value(reg, "eos_worker_rebalance_duration_seconds_sum") == pytest.approx(15.85)
    assert value(reg, "eos_worker_rebalance_duration_seconds_bucket", le="0.25") == 2
    assert value(reg, "eos_worker_rebalance_duration_seconds_bucket", le="2.5") == 3
    assert value(reg, "eos_worker_rebalance_duration_seconds_bucket", le="10.0") == 4
    assert value(reg, "eos_worker_generation") == 5
    assert value(reg, "eos_worker_leader") == 1
    assert value(reg, "eos_worker_leader_changes_total") == 2
    assert value(reg, "eos_worker_group_members") == 2
    assert value(reg, "eos_worker_assigned_connectors") == 1
    assert value(reg, "eos_worker_assigned_tasks") == 2
    assert value(reg, "eos_worker_revoked_connectors_total") == 2
    assert value(reg, "eos_worker_revoked_tasks_total") == 4
    assert value(reg, "eos_worker_scheduled_rebalance_delay_seconds") == 30
    assert value(reg, "eos_worker_scheduled_rebalances_total") == 1

    observer.rebalance_completed(
        rebalanced(6, False, leader_changed=True, protocol="eager", cause="lost", seconds=0.05,
                   members=3, connectors=0, tasks=1)
    )  # fmt: skip
    assert rebalances("eager", "lost") == 1
    assert total(reg, "eos_worker_rebalances_total") == 6
    assert value(reg, "eos_worker_leader") == 0
    assert value(reg, "eos_worker_leader_changes_total") == 3
    assert value(reg, "eos_worker_group_members") == 3
    assert value(reg, "eos_worker_assigned_connectors") == 0
    assert value(reg, "eos_worker_assigned_tasks") == 1
    assert value(reg, "eos_worker_scheduled_rebalance_delay_seconds") == 0  # none scheduled now
    assert value(reg, "eos_worker_scheduled_rebalances_total") == 1


def test_rebalance_series_exist_from_zero_before_the_first_rebalance(
    observer: PrometheusObserver,
) -> None:
    reg = observer.registry
    for protocol in ("eager", "cooperative"):
        for cause in ("start", "requested", "rebalance", "lost"):
            labels = {"protocol": protocol, "cause": cause}
            assert value(reg, "eos_worker_rebalances_total", **labels) == 0, labels
    for name in (
        "eos_worker_leader_changes_total",
        "eos_worker_revoked_connectors_total",
        "eos_worker_revoked_tasks_total",
        "eos_worker_scheduled_rebalances_total",
        "eos_worker_rebalance_duration_seconds_count",
        "eos_worker_group_members",
        "eos_worker_assigned_tasks",
        "eos_worker_scheduled_rebalance_delay_seconds",
    ):
        assert value(reg, name) == 0, name


def test_a_bad_rebalance_report_still_sets_the_gauges(
    observer: PrometheusObserver, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="metrics.observer"):
        observer.rebalance_completed(rebalanced(3, True, members=2, tasks=4, revoked_tasks=-1))
    assert "rebalance_completed failed" in caplog.text
    assert value(observer.registry, "eos_worker_generation") == 3
    assert value(observer.registry, "eos_worker_assigned_tasks") == 4
    assert total(observer.registry, "eos_worker_rebalances_total") == 1


def test_methods_never_raise(
    observer: PrometheusObserver, caplog: pytest.LogCaptureFixture
) -> None:
    task = observer.task("orders", 0)
    with caplog.at_level(logging.ERROR, logger="metrics.observer"):
        task.records_written(-1, 10)  # a counter cannot go down
        task.poll_completed(-5, 0.1)
        observer.fencing_round("orders", float("nan"), False)
    assert "records_written failed" in caplog.text
    assert value(observer.registry, "eos_task_records_written_total", **task_labels()) == 0


def test_one_registry_per_worker_and_never_the_global_one() -> None:
    before = set(REGISTRY._names_to_collectors)
    a, b = PrometheusObserver(), PrometheusObserver()
    a.task("orders", 0).transaction_committed(1, 0.0, 0.0)
    assert a.registry is not b.registry
    assert value(b.registry, "eos_task_transactions_committed_total", **task_labels()) is None
    assert set(REGISTRY._names_to_collectors) == before
    names = {f.name for f in a.registry.collect()}
    assert {"process_cpu_seconds", "python_info", "python_gc_objects_collected"} <= names


def test_registry_can_be_passed_in() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, process_metrics=False)
    assert observer.registry is registry
    assert total(registry, "eos_worker_rebalances_total") == 0


def test_producer_figures_are_read_at_scrape_time_while_the_producer_runs(
    observer: PrometheusObserver,
) -> None:
    reg = observer.registry
    figures = ProducerStats(
        records_sent=120, record_errors=2, requests=4, request_seconds=0.5,
        batches=6, batch_bytes=6000, buffered_bytes=300,
    )  # fmt: skip
    labels = {"connector": "c", "task": "0", "client": "librdkafka"}
    first = observer.task("c", 0)
    assert value(reg, "eos_task_producer_records_sent_total", **labels) is None  # no producer
    first.producer_started("librdkafka", lambda: figures)
    assert value(reg, "eos_task_producer_records_sent_total", **labels) == 120
    assert value(reg, "eos_task_producer_record_errors_total", **labels) == 2
    assert value(reg, "eos_task_producer_request_latency_seconds_count", **labels) == 4
    assert value(reg, "eos_task_producer_request_latency_seconds_sum", **labels) == 0.5
    assert value(reg, "eos_task_producer_batch_size_bytes_sum", **labels) == 6000
    assert value(reg, "eos_task_producer_buffered_bytes", **labels) == 300
    figures = ProducerStats(records_sent=130)  # read again at the next scrape
    assert value(reg, "eos_task_producer_records_sent_total", **labels) == 130
    first.producer_closed()
    assert value(reg, "eos_task_producer_records_sent_total", **labels) is None
    first.producer_started("librdkafka", lambda: figures)
    second = observer.task("c", 0)  # the task started again here: the old one is a zombie
    assert value(reg, "eos_task_producer_records_sent_total", **labels) is None
    second.producer_started("aiokafka", ProducerStats)
    assert (
        value(reg, "eos_task_producer_records_sent_total", **{**labels, "client": "aiokafka"}) == 0
    )

    def broken() -> ProducerStats:
        raise RuntimeError("the producer is gone")

    second.producer_started("aiokafka", broken)  # the scrape still answers
    assert value(reg, "eos_task_state", connector="c", task="0", state="UNASSIGNED") == 0
