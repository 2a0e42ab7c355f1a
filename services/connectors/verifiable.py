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

**Output** (``output``). ``records`` (the default): one :class:`SourceRecord` per record,
key and value as Python values that the runtime's converters turn into JSON: the path
of a typical connector.
``blocks``: one :class:`RecordBlock` per source partition that a poll touches, its rows
in sequence-number order, its ``source_offset`` the offset after its last row; keys and
values are the bytes the ``json`` converters would have written for the same records
(so the topic is byte-identical, keys hash to the same partitions, ``eos verify``
reads it the same), encoded from per-partition templates with the sequence number
formatted in: the fast path, for benchmarks of the framework and its producers.
Neither output overrides ``commit_record`` (a task that does costs the runtime a record
kept per row until the commit and, with librdkafka, a delivery report per row).
``blocks`` needs both converters ``json``. Each poll emits the same records either way
(the ``batch.size`` smallest indexes ``k``), so offsets, ``throughput`` pacing and
restarts are the same. The transaction rule holds exactly: a poll's records
are cut into blocks at transaction ends too, and the boundary is asked for right after
the last block of each transaction (a block counts as one record for the transaction
context).
"""

from __future__ import annotations

import functools
import heapq
import json
import time
from collections.abc import Callable, Mapping, Sequence
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
    OneOf,
    Range,
    RecordBlock,
    Schema,
    SchemaBuilder,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    TransactionContext,
    Type,
    config_class,
    definition_of,
    fill,
    setting,
)
from eos.api.schema import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA

TASK_ID = "task.id"
TASK_PARTITIONS = "task.partitions"
RECORDS, BLOCKS = "records", "blocks"
"""The values of ``output``."""
IDLE_SECONDS = 1.0
"""How long :meth:`VerifiableSourceTask.poll` waits at most before returning empty: a
finished task, or one ahead of ``throughput``, wakes up once a second at most (the
runtime cancels a waiting poll when the task is stopped, so this adds no latency)."""

_EARLY = 0.01
"""Of a record's interval: how early a record may go (see ``_allowance``)."""


@config_class
class Settings:
    """The parsed settings of the connector and its tasks."""

    topic: str = setting(
        "topic",
        Type.STRING,
        NO_DEFAULT,
        NonEmpty(),
        Importance.HIGH,
        "Topic to write to.",
    )
    partitions_per_task: int = setting(
        "partitions.per.task",
        Type.INT,
        1,
        Range(at_least=1),
        Importance.MEDIUM,
        'Source partitions per task; task i owns "i-0" … "i-<n-1>".',
    )
    records_per_partition: int = setting(
        "records.per.partition",
        Type.LONG,
        0,
        Range(at_least=0),
        Importance.MEDIUM,
        "Records per source partition, then the partition idles; 0 = endless.",
    )
    throughput: float = setting(
        "throughput",
        Type.DOUBLE,
        0.0,
        Range(at_least=0),
        Importance.MEDIUM,
        "Records per second per task; 0 = as fast as possible.",
    )
    record_bytes: int = setting(
        "record.bytes",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.LOW,
        'Pad each JSON value with a "pad" string to about this many bytes; 0 = no padding.',
    )
    batch_size: int = setting(
        "batch.size",
        Type.INT,
        500,
        Range(at_least=1),
        Importance.LOW,
        "Most records returned by one poll.",
    )
    commit_every: int = setting(
        "commit.every.records",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.MEDIUM,
        "With transaction.boundary=connector: records per transaction, counted by the "
        "task-wide index (see the module documentation); 0 = commit after every poll batch.",
    )
    abort_every: int = setting(
        "abort.every.transactions",
        Type.INT,
        0,
        Range(at_least=0),
        Importance.MEDIUM,
        "With transaction.boundary=connector: abort every n-th transaction instead of "
        "committing it; 0 = never. Needs commit.every.records > 0.",
    )
    output: str = setting(
        "output",
        Type.STRING,
        RECORDS,
        OneOf(RECORDS, BLOCKS),
        Importance.LOW,
        "records: one SourceRecord per record, converted by the runtime; blocks: one RecordBlock "
        "per source partition and poll, keys and values already the bytes the json "
        "converters write (the same topic content, no Python object or delivery report "
        "per record; needs key.converter and value.converter json).",
        convert=str.lower,
    )

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> Settings:
        """Typed settings; :class:`ConfigError` names the first invalid one."""
        values = CONFIG_DEF.parse(config)
        for problem in _cross_check(values, config):
            raise problem
        return fill(cls, values)


CONFIG_DEF = definition_of(Settings)


def _cross_check(values: Mapping[str, Any], config: Mapping[str, Any]) -> list[ConfigError]:
    problems = []
    abort_every = values["abort.every.transactions"]
    if abort_every > 0 and values["commit.every.records"] == 0:
        problems.append(
            ConfigError(
                "abort.every.transactions",
                abort_every,
                "aborting every n-th transaction needs fixed transactions: "
                "set commit.every.records > 0 as well",
            )
        )
    if values["output"].lower() == BLOCKS:
        for which in ("key", "value"):
            converter = config.get(f"{which}.converter", "json")
            if str(converter).strip().lower() != "json":
                problems.append(
                    ConfigError(
                        f"{which}.converter",
                        converter,
                        "output=blocks writes the JSON the json converter would (the "
                        f"converters are skipped): set {which}.converter=json, or "
                        "output=records",
                    )
                )
    return problems


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


def _value_schema(padded: bool) -> Schema:
    builder = (
        SchemaBuilder.struct().name("eos.verifiable.Record")
        .field("partition", STRING_SCHEMA).field("seqno", INT64_SCHEMA)
        .field("task", INT32_SCHEMA)
    )  # fmt: skip
    if padded:
        builder.field("pad", STRING_SCHEMA)
    return builder.build()


VALUE_SCHEMA = _value_schema(padded=False)
"""The schema of a record's value (its key is the partition, a STRING)."""
PADDED_SCHEMA = _value_schema(padded=True)
"""The value's schema with ``record.bytes`` set (``pad`` makes up the size)."""


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


_JSON = json.JSONEncoder(separators=(",", ":"))
"""Compact JSON, as the runtime's ``json`` converter writes it."""


class BlockEncoder:
    """The keys and values of one partition's records as the ``json`` converters write
    them, without a Python object per record: one template per number of digits of the
    sequence number (the padding depends on it), with the number formatted in."""

    def __init__(self, partition: str, task_id: int, record_bytes: int) -> None:
        self.partition = partition
        self.task_id = task_id
        self.record_bytes = record_bytes
        self.key = _JSON.encode(partition).encode()
        self._templates: dict[int, bytes] = {}

    def _template(self, digits: int) -> bytes:
        template = self._templates.get(digits)
        if template is None:
            sample = 10 ** (digits - 1) if digits > 1 else 0
            value = record_value(self.partition, sample, self.task_id, self.record_bytes)
            head, marker, tail = _JSON.encode(value).encode().partition(b'"seqno":%d,' % sample)
            assert marker, "the value holds its sequence number"
            escaped = [part.replace(b"%", b"%%") for part in (head, tail)]
            template = self._templates[digits] = escaped[0] + b'"seqno":%d,' + escaped[1]
        return template

    def values(self, start: int, stop: int) -> list[bytes]:
        """The values of the sequence numbers ``start`` … ``stop - 1``."""
        values: list[bytes] = []
        while start < stop:
            digits = len(str(start))
            end = min(stop, 10**digits)
            values += map(self._template(digits).__mod__, range(start, end))
            start = end
        return values


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
            for problem in _cross_check(CONFIG_DEF.parse(config), config):
                errors.setdefault(problem.key, []).append(str(problem))
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

    def encodes_rows(self, config: Mapping[str, str]) -> bool:
        """``output=blocks`` writes the JSON itself."""
        return str(config.get("output", RECORDS)).strip().lower() == BLOCKS

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
        self._encoders: list[BlockEncoder] = []
        self._started_at: float | None = None
        self._emitted = 0

    def version(self) -> str:
        return "1.0.0"

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        settings = Settings.parse(config)
        self._settings = settings
        self._task_id, self._partitions = _task_assignment(config)
        self._txn = context.transaction_context
        self._encoders = [
            BlockEncoder(p, self._task_id, settings.record_bytes) for p in self._partitions
        ]
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

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        assert self._settings is not None, "start() first"
        if not self._heap:
            await anyio.sleep(IDLE_SECONDS)
            return None
        budget = await self._allowance()
        batch: Sequence[SourceRecord | RecordBlock]
        if self._settings.output == BLOCKS:
            batch = self._next_blocks(budget)
            self._emitted += sum(map(len, batch))
        else:
            records: list[SourceRecord] = []
            while self._heap and len(records) < budget:
                records.append(self._next_record())
            batch = records
            self._emitted += len(records)
        if batch and self._txn is not None and self._settings.commit_every == 0:
            self._txn.commit_transaction()
        return batch or None

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
        # Records due by now, the one due at ``due_at`` included even when the loop woke
        # the sleeper a little early (it may, by its clock resolution) or the float
        # arithmetic lands just short of it: else every record would cost an empty poll.
        due = int((now - self._started_at) * rate + _EARLY) + 1
        return max(0, min(batch, due - self._emitted))

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
            key_schema=STRING_SCHEMA,
            value_schema=PADDED_SCHEMA if self._settings.record_bytes > 0 else VALUE_SCHEMA,
        )
        self._request_boundary(record, k)
        return record

    def _next_blocks(self, budget: int) -> list[RecordBlock]:
        """The next ``budget`` records (those ``_next_record`` would give, by smallest
        index ``k``) as blocks: one per partition and transaction segment, the boundary
        asked for right after the last block of a transaction."""
        assert self._settings is not None
        commit_every = self._settings.commit_every if self._txn is not None else 0
        blocks: list[RecordBlock] = []
        taken = 0
        while self._heap and taken < budget:
            bound = self._threshold(budget - taken)
            if commit_every > 0:  # a segment ends with its transaction
                bound = min(bound, (self._heap[0][0] // commit_every + 1) * commit_every)
            segment, last = self._take(bound)
            blocks += segment
            taken += sum(map(len, segment))
            self._request_boundary(segment[-1], last)
        return blocks

    def _left(self, k: int, bound: int) -> int:
        """How many records of the partition whose next index is ``k`` have an index
        below ``bound`` (and are not beyond ``records.per.partition``)."""
        assert self._settings is not None
        count = len(self._partitions)
        below = max(0, (bound - k + count - 1) // count)
        total = self._settings.records_per_partition
        return min(below, total - k // count) if total > 0 else below

    def _threshold(self, wanted: int) -> int:
        """The smallest index bound below which ``wanted`` records are left (or all of
        them, when fewer are): one more per step at most, so a binary search finds it."""
        assert self._settings is not None
        count, total = len(self._partitions), self._settings.records_per_partition
        target = wanted
        if total > 0:
            target = min(wanted, sum(total - k // count for k, _ in self._heap))
        low = self._heap[0][0]  # nothing below it
        high = max(k for k, _ in self._heap) + wanted * count  # wanted of each, or all
        while high - low > 1:
            middle = (low + high) // 2
            if sum(self._left(k, middle) for k, _ in self._heap) >= target:
                high = middle
            else:
                low = middle
        return high

    def _take(self, bound: int) -> tuple[list[RecordBlock], int]:
        """The blocks of the records with an index below ``bound``, in the order of their
        first index, and the last index; the partitions move on past them."""
        assert self._settings is not None
        count = len(self._partitions)
        blocks: list[RecordBlock] = []
        heap: list[tuple[int, int]] = []
        last = -1
        for k, j in sorted(self._heap):
            n = self._left(k, bound)
            if n == 0:
                heap.append((k, j))
                continue
            start = k // count
            blocks.append(self._block(j, start, start + n))
            last = max(last, k + (n - 1) * count)
            if not self._finished(start + n):
                heap.append((k + n * count, j))
        heapq.heapify(heap)
        self._heap = heap
        return blocks, last

    def _block(self, j: int, start: int, stop: int) -> RecordBlock:
        """The records ``start`` … ``stop - 1`` of partition ``j`` as one block."""
        assert self._settings is not None
        encoder = self._encoders[j]
        return RecordBlock(
            source_partition={"partition": encoder.partition},
            source_offset={"seqno": stop},
            topic=self._settings.topic,
            values=encoder.values(start, stop),
            keys=[encoder.key] * (stop - start),
        )

    def _request_boundary(self, record: SourceRecord | RecordBlock, k: int) -> None:
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
