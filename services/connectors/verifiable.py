"""VerifiableSource: numbered records whose output ``eos verify`` can check.

Each task owns ``P = partitions.per.task`` source partitions named ``"<task>-<j>"``
(``j`` in ``0..P-1``); tasks never share a partition. A partition's records carry
the sequence numbers 0, 1, 2, … and the value
``{"partition": "<task>-<j>", "seqno": n, "task": <task>}`` (plus a ``"pad"`` string
when ``record.bytes`` asks for bigger values); the key is the partition id, so all
records of a source partition land in one Kafka partition, in order. The source
offset is ``{"seqno": n + 1}``: the next sequence number to emit. A restarted task
resumes from the committed offsets, so a read_committed reader of the topic must
see, per partition, every sequence number from 0 up exactly once (``eos verify``).

**Emission order.** Record ``n`` of partition ``j`` has the task-wide index
``k = n * P + j``. A task always emits, among its unfinished partitions, the record
with the smallest ``k``: one record per partition, round-robin, and after a restart
from uneven offsets the lagging partitions catch up first. So ``k`` (hence the
transaction a record belongs to, below) depends only on the record, never on
restarts, batch sizes or throughput.

**Transaction rule** (``transaction.boundary=connector``, ``C = commit.every.records``,
``A = abort.every.transactions``). With ``C > 0`` record ``k`` belongs to
transaction ``t = k // C``. The task asks for the boundary right after the last
record of each transaction it emits — the record after which the next record to
emit belongs to another transaction, or after which no record is left
(``records.per.partition`` reached) — with ``abort_transaction(record)`` when
``A > 0`` and ``(t + 1) % A == 0`` (the A-th, 2A-th, … transactions), and
``commit_transaction(record)`` otherwise. :func:`aborted_records` lists the records
this makes invisible. As docs/exactly-once.md says, an abort still commits the source offsets,
so a restarted task continues after aborted records; a transaction interrupted by a
crash commits nothing, so the task redoes it from the previous boundary with the
same ``k`` and the same fate. (This relies on the framework never committing an
unfinished connector-defined transaction, e.g. at shutdown: Kafka Connect does not.)
With ``C = 0`` the task asks for a commit after every poll batch, and ``A`` must be 0.
Without a transaction context (other boundaries) both settings are ignored.
"""

from __future__ import annotations

import functools
import heapq
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from eos.api import (
    NO_DEFAULT,
    ConfigDef,
    ConfigError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    Importance,
    NonEmpty,
    Range,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    TransactionContext,
    Type,
)

TASK_ID = "task.id"
TASK_PARTITIONS = "task.partitions"
IDLE_SECONDS = 1.0
"""How long :meth:`VerifiableSourceTask.poll` waits at most before returning empty: a
finished task, or one ahead of ``throughput``, wakes up once a second at most (the
runtime cancels a waiting poll when the task is stopped, so this adds no latency)."""

CONFIG_DEF = (
    ConfigDef()
    .define("topic", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.HIGH, "Topic to write to.")
    .define(
        "partitions.per.task",
        Type.INT,
        1,
        Range(at_least=1),
        Importance.MEDIUM,
        'Source partitions per task; task i owns "i-0" … "i-<n-1>".',
    )
    .define(
        "records.per.partition",
        Type.LONG,
        0,
        Range(at_least=0),
        Importance.MEDIUM,
        "Records per source partition, then the partition idles; 0 = endless.",
    )
    .define(
        "throughput",
        Type.DOUBLE,
        0.0,
        Range(at_least=0),
        Importance.MEDIUM,
        "Records per second per task; 0 = as fast as possible.",
    )
    .define(
        "record.bytes",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.LOW,
        'Pad each JSON value with a "pad" string to about this many bytes; 0 = no padding.',
    )
    .define(
        "batch.size",
        Type.INT,
        500,
        Range(at_least=1),
        Importance.LOW,
        "Most records returned by one poll.",
    )
    .define(
        "commit.every.records",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.MEDIUM,
        "With transaction.boundary=connector: records per transaction, counted by the "
        "task-wide index (see the module documentation); 0 = commit after every poll batch.",
    )
    .define(
        "abort.every.transactions",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.MEDIUM,
        "With transaction.boundary=connector: abort every n-th transaction instead of "
        "committing it; 0 = never. Needs commit.every.records > 0.",
    )
)


@dataclass(frozen=True)
class Settings:
    """The parsed settings of the connector and its tasks."""

    topic: str
    partitions_per_task: int
    records_per_partition: int
    throughput: float
    record_bytes: int
    batch_size: int
    commit_every: int
    abort_every: int

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> Settings:
        """Typed settings; :class:`ConfigError` names the first invalid one."""
        values = CONFIG_DEF.parse(config)
        for problem in _cross_check(values):
            raise problem
        return cls(
            topic=values["topic"],
            partitions_per_task=values["partitions.per.task"],
            records_per_partition=values["records.per.partition"],
            throughput=values["throughput"],
            record_bytes=values["record.bytes"],
            batch_size=values["batch.size"],
            commit_every=values["commit.every.records"],
            abort_every=values["abort.every.transactions"],
        )


def _cross_check(values: Mapping[str, Any]) -> list[ConfigError]:
    abort_every = values["abort.every.transactions"]
    if abort_every > 0 and values["commit.every.records"] == 0:
        return [
            ConfigError(
                "abort.every.transactions",
                abort_every,
                "aborting every n-th transaction needs fixed transactions: "
                "set commit.every.records > 0 as well",
            )
        ]
    return []


def partition_ids(task_id: int, partitions_per_task: int) -> list[str]:
    """The source partitions of task ``task_id``: ``"<task>-<j>"``."""
    return [f"{task_id}-{j}" for j in range(partitions_per_task)]


def is_aborted(index: int, commit_every: int, abort_every: int) -> bool:
    """Whether the record with task-wide index ``index`` is in an aborted transaction."""
    if commit_every <= 0 or abort_every <= 0:
        return False
    return (index // commit_every + 1) % abort_every == 0


def aborted_records(
    partitions_per_task: int,
    commit_every: int,
    abort_every: int,
    task_id: int,
    total_per_partition: int,
) -> dict[str, set[int]]:
    """Partition id → the sequence numbers below ``total_per_partition`` that the
    transaction rule (module documentation) aborts, for every partition of one task."""
    return {
        pid: {
            seqno
            for seqno in range(total_per_partition)
            if is_aborted(seqno * partitions_per_task + j, commit_every, abort_every)
        }
        for j, pid in enumerate(partition_ids(task_id, partitions_per_task))
    }


def record_value(partition: str, seqno: int, task_id: int, record_bytes: int = 0) -> dict[str, Any]:
    """The value of one record, padded to about ``record_bytes`` of compact JSON."""
    value: dict[str, Any] = {"partition": partition, "seqno": seqno, "task": task_id}
    if record_bytes > 0:
        # The compact JSON length, computed without encoding (this runs per record).
        bare = _BARE + len(partition) + len(str(seqno)) + len(str(task_id))
        value["pad"] = _pad(max(0, record_bytes - bare))
    return value


_BARE = len('{"partition":"","seqno":,"task":,"pad":""}')


@functools.lru_cache(maxsize=64)
def _pad(length: int) -> str:
    return "x" * length


class VerifiableSource(SourceConnector):
    """Numbered records in ``partitions.per.task`` times ``tasks.max`` source partitions."""

    def __init__(self) -> None:
        self._config: dict[str, str] = {}
        self._settings: Settings | None = None

    def version(self) -> str:
        return "1.0.0"

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        errors = super().validate(config)
        if not any(errors.values()):
            for problem in _cross_check(CONFIG_DEF.parse(config)):
                errors[problem.key].append(str(problem))
        return errors

    async def start(self, config: Mapping[str, str]) -> None:
        self._settings = Settings.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return VerifiableSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Task ``i`` gets the connector's settings, ``task.id=i`` and its partitions."""
        assert self._settings is not None, "start() first"
        per_task = self._settings.partitions_per_task
        return [
            {
                **self._config,
                TASK_ID: str(i),
                TASK_PARTITIONS: ",".join(partition_ids(i, per_task)),
            }
            for i in range(max_tasks)
        ]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class VerifiableSourceTask(SourceTask):
    """Emits its partitions' records in task-wide index order (module documentation).

    ``clock`` (monotonic seconds) paces ``throughput``; tests replace it.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._settings: Settings | None = None
        self._task_id = 0
        self._partitions: list[str] = []
        self._heap: list[tuple[int, int]] = []  # (task-wide index k, partition index j)
        self._txn: TransactionContext | None = None
        self._started_at: float | None = None
        self._emitted = 0
        self.committed_records = 0
        self.commits = 0

    def version(self) -> str:
        return "1.0.0"

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        settings = Settings.parse(config)
        self._settings = settings
        self._task_id, self._partitions = _task_assignment(config)
        self._txn = context.transaction_context
        offsets = await context.offset_reader.offsets([{"partition": p} for p in self._partitions])
        count = len(self._partitions)
        self._heap = []
        for j, offset in enumerate(offsets):
            seqno = _next_seqno(offset)
            if not self._finished(seqno):
                self._heap.append((seqno * count + j, j))
        heapq.heapify(self._heap)

    def next_seqnos(self) -> dict[str, int | None]:
        """Partition id → the next sequence number to emit (None when finished)."""
        upcoming: dict[str, int | None] = dict.fromkeys(self._partitions)
        for k, j in self._heap:
            upcoming[self._partitions[j]] = k // len(self._partitions)
        return upcoming

    def _finished(self, seqno: int) -> bool:
        assert self._settings is not None
        total = self._settings.records_per_partition
        return total > 0 and seqno >= total

    async def poll(self) -> Sequence[SourceRecord] | None:
        assert self._settings is not None, "start() first"
        if not self._heap:
            await anyio.sleep(IDLE_SECONDS)
            return None
        budget = await self._allowance()
        records: list[SourceRecord] = []
        while self._heap and len(records) < budget:
            records.append(self._next_record())
        self._emitted += len(records)
        if records and self._txn is not None and self._settings.commit_every == 0:
            self._txn.commit_transaction()
        return records or None

    async def _allowance(self) -> int:
        """How many records may go now: ``batch.size``, or fewer when ``throughput``
        is ahead of the clock (after a short wait for the next one)."""
        assert self._settings is not None
        rate, batch = self._settings.throughput, self._settings.batch_size
        if rate <= 0:
            return batch
        now = self._clock()
        if self._started_at is None:
            self._started_at = now
        due_at = self._started_at + self._emitted / rate  # when the next record may go
        if now < due_at:
            await anyio.sleep(min(due_at - now, IDLE_SECONDS))
            now = self._clock()
        allowed = int((now - self._started_at) * rate) + 1 - self._emitted
        return max(0, min(batch, allowed))

    def _next_record(self) -> SourceRecord:
        assert self._settings is not None
        count = len(self._partitions)
        k, j = heapq.heappop(self._heap)
        seqno = k // count
        if not self._finished(seqno + 1):
            heapq.heappush(self._heap, (k + count, j))
        partition = self._partitions[j]
        record = SourceRecord(
            source_partition={"partition": partition},
            source_offset={"seqno": seqno + 1},
            topic=self._settings.topic,
            key=partition,
            value=record_value(partition, seqno, self._task_id, self._settings.record_bytes),
        )
        self._request_boundary(record, k)
        return record

    def _request_boundary(self, record: SourceRecord, k: int) -> None:
        """Ask for a commit or abort right after the last record of a transaction."""
        assert self._settings is not None
        commit_every, abort_every = self._settings.commit_every, self._settings.abort_every
        if self._txn is None or commit_every == 0:
            return
        following = self._heap[0][0] if self._heap else None
        if following is not None and following // commit_every == k // commit_every:
            return
        if is_aborted(k, commit_every, abort_every):
            self._txn.abort_transaction(record)
        else:
            self._txn.commit_transaction(record)

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.committed_records += 1

    async def commit(self) -> None:
        self.commits += 1

    async def stop(self) -> None:
        self._heap = []


def _task_assignment(config: Mapping[str, str]) -> tuple[int, list[str]]:
    """The task id and partitions that :meth:`VerifiableSource.task_configs` wrote."""
    try:
        task_id = int(config[TASK_ID])
        partitions = [p for p in config[TASK_PARTITIONS].split(",") if p]
    except (KeyError, ValueError) as exc:
        raise ConfigError(
            TASK_ID, config.get(TASK_ID), f"not a task configuration of VerifiableSource ({exc!r})"
        ) from None
    if not partitions:
        raise ConfigError(TASK_PARTITIONS, config.get(TASK_PARTITIONS), "lists no partition")
    return task_id, partitions


def _next_seqno(offset: Mapping[str, Any] | None) -> int:
    seqno = None if offset is None else offset.get("seqno")
    return seqno if isinstance(seqno, int) and not isinstance(seqno, bool) and seqno > 0 else 0
