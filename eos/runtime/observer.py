"""The port through which the runtime reports what happens, for metrics.

The runtime calls these methods; :mod:`metrics` implements them with
prometheus-client, so :mod:`eos` never imports prometheus. Every method must be
cheap and must not raise. :class:`NullObserver` does nothing (tests, embedding).

Task states are Kafka Connect's: UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED,
RESTARTING. Abort reasons: ``connector`` (the task asked), ``error`` (a failure
aborted the open transaction), ``shutdown`` (a stop could not commit). Records that fail
to transform or convert are reported with their stage and outcome (``errors.*``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from eos.state import State

AbortReason = Literal["connector", "error", "shutdown"]
FailureOutcome = Literal["failed", "skipped", "dead_lettered"]
"""What became of a record that failed to transform or convert: it failed the task, it
was skipped (``errors.tolerance=all``), or skipped and written to the dead-letter topic."""


@dataclass(frozen=True)
class ProducerStats:
    """A task producer's client figures, as the Java producer's metrics measure them
    (``producer-metrics``): totals since the producer started, and what waits now.

    ``records_sent``, ``batches`` and ``batch_bytes`` count what went out in Produce
    requests (a retried batch counts again, as Java's record-send-total does);
    ``record_errors`` the records whose send failed; ``requests`` and
    ``request_seconds`` the Produce requests answered and their round trips;
    ``buffered_bytes`` the record bytes queued in the client, not sent yet."""

    records_sent: int = 0
    record_errors: int = 0
    requests: int = 0
    request_seconds: float = 0.0
    batches: int = 0
    batch_bytes: int = 0
    buffered_bytes: int = 0


class TaskObserver(Protocol):
    def state_changed(self, state: State) -> None: ...

    def poll_completed(self, records: int, seconds: float) -> None:
        """A call to the task's poll returned ``records`` records after ``seconds``."""

    def records_written(self, records: int, nbytes: int) -> None:
        """Records (and their key+value bytes) handed to the producer."""

    def records_dropped(self, records: int) -> None:
        """Records a transform dropped (their offsets still commit)."""

    def record_failed(self, stage: str, outcome: FailureOutcome) -> None:
        """A record failed at ``stage`` (``TRANSFORMATION``, ``HEADER_CONVERTER``,
        ``KEY_CONVERTER``, ``VALUE_CONVERTER``), with ``outcome``."""

    def transaction_committed(
        self, records: int, commit_seconds: float, open_seconds: float
    ) -> None:
        """A transaction (or, at-least-once, an offset flush) committed ``records`` records;
        the commit call took ``commit_seconds``; the transaction was open ``open_seconds``."""

    def transaction_aborted(self, records: int, reason: AbortReason) -> None: ...

    def offset_commit_failed(self) -> None: ...

    def producer_fenced(self) -> None: ...

    def producer_started(self, client: str, stats: Callable[[], ProducerStats]) -> None:
        """The task's producer (``client``: aiokafka or librdkafka) started; ``stats`` reads
        its figures (from the scrape's thread) until :meth:`producer_closed`."""

    def producer_closed(self) -> None:
        """The task's producer is closed: its figures are gone."""

    def task_event(self, event: str, amount: int) -> None:
        """The connector's task counted an event of its own (``context.count``)."""

    def task_value(self, name: str, value: float) -> None:
        """The connector's task set a value of its own (``context.gauge``)."""

    def close(self) -> None:
        """The task is gone from this worker (its series may be removed)."""


@dataclass(frozen=True)
class Rebalanced:
    """A rebalance this worker completed, as it saw it."""

    generation: int
    leader: bool
    """This worker leads the new generation."""
    leader_changed: bool
    """The leader is another member than in the previous generation this worker saw."""
    protocol: str
    """How the generation rebalances: ``eager`` or ``cooperative``."""
    cause: str
    """Why this worker rejoined: ``start``, ``requested`` (config change, handed-over
    work, a scheduled delay), ``rebalance`` (another member's), ``lost`` (expelled)."""
    seconds: float
    """From the decision to rejoin until the assignment arrived."""
    members: int
    connectors: int
    """Connectors assigned to this worker after this round."""
    tasks: int
    """Tasks assigned to this worker after this round."""
    revoked_connectors: int
    revoked_tasks: int
    delay_ms: int
    """A later rebalance the leader scheduled (work held for a lost member, a settle
    time); 0 if none."""


class WorkerObserver(Protocol):
    def task(self, connector: str, task_id: int) -> TaskObserver: ...

    def rebalance_completed(self, rebalanced: Rebalanced) -> None: ...

    def fencing_round(self, connector: str, seconds: float, ok: bool) -> None: ...

    def task_count_record_written(self, connector: str) -> None: ...

    def config_read_lag(self, records: int) -> None:
        """Records of the config topic not yet applied when last checked."""

    def offset_mirror_backlog(self, offsets: int) -> None: ...

    def thread_pool(self, busy: int, queued: int) -> None:
        """Blocking-call pool (Spark reads): threads in use and calls waiting."""

    def auto_restarted(self, connector: str, task: int | None, in_a_row: int) -> None:
        """The failed connector (``task`` None) or task was restarted automatically, the
        ``in_a_row``-th time in a row."""

    def auto_restarts_in_a_row(self, connector: str, task: int | None, in_a_row: int) -> None:
        """The connector's or task's automatic restarts in a row (0: it runs well again)."""

    def auto_restart_forgotten(self, connector: str, task: int | None) -> None:
        """The connector or task no longer runs here (its series may be removed)."""

    def last_stable_offsets(self, partitions: Mapping[tuple[str, int], tuple[int, float]]) -> None:
        """Per output partition of this worker's tasks: (records its last stable offset is
        behind its high watermark, seconds it has stayed behind without moving). A partition
        left out is no longer watched."""

    def connector_files(self, outcomes: Mapping[str, tuple[str, str]]) -> None:
        """The leader's last reconcile of ``connectors.dir``: file name → (its connector,
        or "" if it does not parse; its outcome). A file left out is gone (and every file
        when this worker stops leading)."""

    def worker_info(self, group: str, worker: str, exactly_once: str) -> None:
        """Who this worker is: its group (the cluster), its id and its
        ``exactly.once.source.support`` (said once, at start)."""

    def connector_states(self, states: Callable[[], Mapping[str, State]]) -> None:
        """Where the states of the connectors this worker reports come from (their last
        status written by this worker, as ``GET /connectors/<name>/status`` shows it): the
        exporter calls ``states`` at each scrape, from another thread."""


def rebalanced(generation: int, leader: bool, **details: object) -> Rebalanced:
    """A :class:`Rebalanced` with neutral details (tests, demos)."""
    fields: dict[str, object] = {
        "leader_changed": False, "protocol": "cooperative", "cause": "start", "seconds": 0.0,
        "members": 1, "connectors": 0, "tasks": 0, "revoked_connectors": 0,
        "revoked_tasks": 0, "delay_ms": 0,
    }  # fmt: skip
    fields.update(details)
    return Rebalanced(generation, leader, **fields)  # type: ignore[arg-type]


class NullTaskObserver:
    def state_changed(self, state: State) -> None:
        pass

    def poll_completed(self, records: int, seconds: float) -> None:
        pass

    def records_written(self, records: int, nbytes: int) -> None:
        pass

    def records_dropped(self, records: int) -> None:
        pass

    def record_failed(self, stage: str, outcome: FailureOutcome) -> None:
        pass

    def transaction_committed(
        self, records: int, commit_seconds: float, open_seconds: float
    ) -> None:
        pass

    def transaction_aborted(self, records: int, reason: AbortReason) -> None:
        pass

    def offset_commit_failed(self) -> None:
        pass

    def producer_fenced(self) -> None:
        pass

    def producer_started(self, client: str, stats: Callable[[], ProducerStats]) -> None:
        pass

    def producer_closed(self) -> None:
        pass

    def task_event(self, event: str, amount: int) -> None:
        pass

    def task_value(self, name: str, value: float) -> None:
        pass

    def close(self) -> None:
        pass


class NullObserver:
    def task(self, connector: str, task_id: int) -> TaskObserver:
        return NullTaskObserver()

    def rebalance_completed(self, rebalanced: Rebalanced) -> None:
        pass

    def fencing_round(self, connector: str, seconds: float, ok: bool) -> None:
        pass

    def task_count_record_written(self, connector: str) -> None:
        pass

    def config_read_lag(self, records: int) -> None:
        pass

    def offset_mirror_backlog(self, offsets: int) -> None:
        pass

    def thread_pool(self, busy: int, queued: int) -> None:
        pass

    def auto_restarted(self, connector: str, task: int | None, in_a_row: int) -> None:
        pass

    def auto_restarts_in_a_row(self, connector: str, task: int | None, in_a_row: int) -> None:
        pass

    def auto_restart_forgotten(self, connector: str, task: int | None) -> None:
        pass

    def last_stable_offsets(self, partitions: Mapping[tuple[str, int], tuple[int, float]]) -> None:
        pass

    def connector_files(self, outcomes: Mapping[str, tuple[str, str]]) -> None:
        pass

    def worker_info(self, group: str, worker: str, exactly_once: str) -> None:
        pass

    def connector_states(self, states: Callable[[], Mapping[str, State]]) -> None:
        pass
