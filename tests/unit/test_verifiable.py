"""VerifiableSource: numbering, resuming, padding, order and connector-defined transactions."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import pytest

from eos.api import (
    ConfigError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RecordBlock,
    SourcePartition,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
)
from eos.converters import JsonConverter
from services.connectors.verifiable import (
    VerifiableSource,
    VerifiableSourceTask,
    aborted_records,
    is_aborted,
    partition_ids,
)

T = TypeVar("T")


class MemoryOffsets:
    """An OffsetStorageReader over a dict, like the committed offsets topic."""

    def __init__(self, offsets: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.store: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (offsets or {}).items()}

    async def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        return self.store.get(json.dumps(dict(partition), sort_keys=True))

    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[dict[str, Any] | None]:
        return [await self.offset(p) for p in partitions]

    def save(self, records: Sequence[SourceRecord | RecordBlock]) -> None:
        for r in records:
            assert r.source_offset is not None
            self.store[json.dumps(dict(r.source_partition), sort_keys=True)] = dict(r.source_offset)


def offsets_of(seqnos: Mapping[str, int]) -> MemoryOffsets:
    return MemoryOffsets({json.dumps({"partition": p}): {"seqno": n} for p, n in seqnos.items()})


class InlineResources:
    """WorkerResources without a worker: blocking calls run in anyio's thread pool."""

    settings: Mapping[str, str] = {}

    def shared(self, key: str, factory: Callable[[], T], close: Callable[[T], None]) -> T:
        return factory()

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(func, *args)


class RecordingTransactions:
    """A TransactionContext that records the boundaries asked for."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, SourceRecord | RecordBlock | None]] = []

    def commit_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None:
        self.requests.append(("commit", record))

    def abort_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None:
        self.requests.append(("abort", record))


def settings(**overrides: Any) -> dict[str, str]:
    base = {"topic": "out", "name": "verifiable", "tasks.max": "2"}
    return {**base, **{k.replace("_", "."): str(v) for k, v in overrides.items()}}


async def started_task(
    config: Mapping[str, str],
    offsets: MemoryOffsets | None = None,
    txn: RecordingTransactions | None = None,
    task: int = 0,
    clock: Any = None,
) -> VerifiableSourceTask:
    connector = VerifiableSource()
    await connector.start(config)
    task_config = connector.task_configs(task + 1)[task]
    source = VerifiableSourceTask(clock=clock) if clock else VerifiableSourceTask()
    context = SourceTaskContext(
        connector="verifiable",
        task_id=task,
        offset_reader=offsets or MemoryOffsets(),
        resources=InlineResources(),
        transaction_context=txn,
    )
    await source.start(task_config, context)
    return source


async def poll(task: VerifiableSourceTask) -> list[SourceRecord]:
    """The records of one poll (of a task with ``output=records``)."""
    items = list(await task.poll() or [])
    records = [r for r in items if isinstance(r, SourceRecord)]
    assert len(records) == len(items), "output=records returns records only"
    return records


def values_of(item: SourceRecord | RecordBlock) -> list[dict[str, Any]]:
    """The values of a record, or of every row of a block (decoded)."""
    if isinstance(item, RecordBlock):
        return [json.loads(v) for v in item.values if v is not None]
    return [item.value]


def ids(items: Sequence[SourceRecord | RecordBlock]) -> list[tuple[str, int]]:
    return [(v["partition"], v["seqno"]) for item in items for v in values_of(item)]


async def test_records_offsets_and_round_robin() -> None:
    task = await started_task(settings(partitions_per_task=3, batch_size=7), task=1)
    records = await poll(task)
    assert ids(records) == [
        ("1-0", 0),
        ("1-1", 0),
        ("1-2", 0),
        ("1-0", 1),
        ("1-1", 1),
        ("1-2", 1),
        ("1-0", 2),
    ]
    first = records[0]
    assert first.topic == "out"
    assert first.key == "1-0"
    assert first.source_partition == {"partition": "1-0"}
    assert first.source_offset == {"seqno": 1}
    assert first.value == {"partition": "1-0", "seqno": 0, "task": 1}
    assert ids(await poll(task))[0] == ("1-1", 2)


async def test_finite_partitions_finish_then_idle() -> None:
    task = await started_task(settings(partitions_per_task=2, records_per_partition=3))
    records = await poll(task)
    assert sorted(ids(records)) == [(p, n) for p in ("0-0", "0-1") for n in range(3)]
    assert await task.poll() is None
    assert task.next_seqnos() == {"0-0": None, "0-1": None}


async def test_resumes_from_committed_offsets() -> None:
    offsets = MemoryOffsets()
    task = await started_task(settings(partitions_per_task=2, batch_size=5), offsets)
    offsets.save(await poll(task))  # 0-0: 0,1,2  0-1: 0,1
    again = await started_task(settings(partitions_per_task=2, batch_size=3), offsets)
    assert again.next_seqnos() == {"0-0": 3, "0-1": 2}
    assert ids(await poll(again)) == [("0-1", 2), ("0-0", 3), ("0-1", 3)]


async def test_uneven_offsets_catch_up_in_index_order() -> None:
    task = await started_task(
        settings(partitions_per_task=3, batch_size=5), offsets_of({"0-0": 4, "0-2": 1})
    )
    assert ids(await poll(task)) == [("0-1", 0), ("0-1", 1), ("0-2", 1), ("0-1", 2), ("0-2", 2)]


async def test_ignores_offsets_it_cannot_read() -> None:
    offsets = MemoryOffsets({json.dumps({"partition": "0-0"}): {"seqno": "seven", "x": 1}})
    task = await started_task(settings(), offsets)
    assert task.next_seqnos() == {"0-0": 0}


@pytest.mark.parametrize("size", [100, 1000, 4096])
async def test_record_bytes_pads_the_value(size: int) -> None:
    task = await started_task(settings(record_bytes=size, batch_size=20))
    for record in await poll(task):
        encoded = json.dumps(record.value, separators=(",", ":"))
        assert len(encoded) == size
        assert set(record.value["pad"]) == {"x"}


async def test_no_padding_by_default_or_when_too_small() -> None:
    task = await started_task(settings(record_bytes=10))
    (record,) = (await poll(task))[:1]
    assert record.value["pad"] == ""
    plain = await started_task(settings())
    assert "pad" not in (await poll(plain))[0].value


async def test_throughput_paces_records() -> None:
    now = [100.0]
    task = await started_task(settings(throughput=10, batch_size=1000), clock=lambda: now[0])
    assert len(await poll(task)) == 1  # the first record goes at once
    assert await task.poll() is None  # the next one is due 0.1 s later
    now[0] += 1.0
    assert len(await poll(task)) == 10
    now[0] += 500.0
    assert len(await poll(task)) == 1000  # catching up is bounded by batch.size


async def test_throughput_emits_each_record_when_due() -> None:
    """A poll that waits for the next record's time returns it, even when the clock then
    reads exactly that time and the float arithmetic lands just short of it (here for
    n = 3, 4, 8, 9, ...): one poll per record, never an empty one in between."""
    start = 12345.678
    reads = iter(
        [start] + [t for n in range(1, 30) for t in (start + n / 10 - 1e-3, start + n / 10)]
    )
    task = await started_task(settings(throughput=10, batch_size=1000), clock=lambda: next(reads))
    assert [len(await poll(task)) for _ in range(30)] == [1] * 30


def test_task_configs_partitions_are_disjoint() -> None:
    connector = VerifiableSource()
    anyio.run(connector.start, settings(partitions_per_task=3))
    configs = connector.task_configs(4)
    assert [c["task.id"] for c in configs] == ["0", "1", "2", "3"]
    owned = [c["task.partitions"].split(",") for c in configs]
    assert owned[2] == ["2-0", "2-1", "2-2"]
    everything = [p for group in owned for p in group]
    assert len(everything) == len(set(everything)) == 12
    assert all(c["topic"] == "out" for c in configs)


def test_support_declarations() -> None:
    connector = VerifiableSource()
    assert connector.exactly_once_support(settings()) is ExactlyOnceSupport.SUPPORTED
    supported = ConnectorTransactionBoundaries.SUPPORTED
    assert connector.can_define_transaction_boundaries(settings()) is supported


def test_validation() -> None:
    connector = VerifiableSource()
    assert not any(connector.validate(settings(commit_every_records=10)).values())
    errors = connector.validate(settings(abort_every_transactions=3))
    assert "commit.every.records" in errors["abort.every.transactions"][0]
    assert connector.validate({})["topic"]
    assert connector.validate(settings(commit_every_records=-1))["commit.every.records"]
    assert connector.validate(settings(partitions_per_task=0))["partitions.per.task"]


async def test_start_rejects_abort_without_commit_interval() -> None:
    with pytest.raises(ConfigError) as caught:
        await VerifiableSource().start(settings(abort_every_transactions=2))
    assert caught.value.key == "abort.every.transactions"


def test_aborted_rule() -> None:
    # P=2, C=4, A=3: transactions of 4 records (k = seqno*2 + j); every 3rd aborted.
    assert [t for t in range(9) if is_aborted(t * 4, 4, 3)] == [2, 5, 8]
    assert aborted_records(2, 4, 3, 0, 8) == {"0-0": {4, 5}, "0-1": {4, 5}}
    assert aborted_records(2, 4, 0, 5, 8) == {"5-0": set(), "5-1": set()}
    # C not a multiple of P: transaction 2 is k = 6, 7, 8 → seqnos 2 (j=0, 1), 3 (j=0)
    assert aborted_records(3, 3, 3, 1, 4) == {"1-0": {2}, "1-1": {2}, "1-2": {2}}
    assert aborted_records(2, 3, 3, 0, 4) == {"0-0": {3}, "0-1": {3}}


async def drain(
    config: Mapping[str, str],
    offsets: MemoryOffsets,
    txn: RecordingTransactions,
    polls: int,
    task: int = 0,
) -> list[SourceRecord | RecordBlock]:
    """Poll a fresh task; save offsets at each requested boundary (commit or abort),
    like the framework, and return the records of committed transactions."""
    source = await started_task(config, offsets, txn, task=task)
    visible: list[SourceRecord | RecordBlock] = []
    open_txn: list[SourceRecord | RecordBlock] = []
    for _ in range(polls):
        if all(n is None for n in source.next_seqnos().values()):
            break  # finished: a poll would only wait a second and return nothing
        for record in await source.poll() or []:
            open_txn.append(record)
            asked = [kind for kind, r in txn.requests if r is record]
            if asked:
                offsets.save(open_txn)
                if asked == ["commit"]:
                    visible.extend(open_txn)
                open_txn = []
    return visible  # whatever is still open is lost, like a crash


@pytest.mark.parametrize("output", ["records", "blocks"])
async def test_boundaries_match_aborted_records(output: str) -> None:
    config = settings(
        partitions_per_task=2,
        records_per_partition=13,
        commit_every_records=4,
        abort_every_transactions=3,
        batch_size=5,
        output=output,
    )
    offsets, txn = MemoryOffsets(), RecordingTransactions()
    visible = await drain(config, offsets, txn, polls=10, task=1)
    expected = aborted_records(2, 4, 3, 1, 13)
    for pid in ("1-0", "1-1"):
        assert {n for p, n in ids(visible) if p == pid} == set(range(13)) - expected[pid]
    kinds = [kind for kind, _ in txn.requests]
    assert kinds == ["commit", "commit", "abort", "commit", "commit", "abort", "commit"]
    assert all(record is not None for _, record in txn.requests)
    # the last (partial) transaction ends with the last record
    assert ids([r for _, r in txn.requests if r is not None])[-1] == ("1-1", 12)


@pytest.mark.parametrize("output", ["records", "blocks"])
async def test_boundaries_survive_restarts(output: str) -> None:
    """A crash loses the open transaction; the restarted task redoes it with the same fate."""
    config = settings(
        partitions_per_task=3,
        records_per_partition=20,
        commit_every_records=5,  # not a multiple of 3: transactions end mid-round
        abort_every_transactions=2,
        batch_size=4,
        output=output,
    )
    offsets = MemoryOffsets()
    visible: list[SourceRecord | RecordBlock] = []
    for polls in (3, 1, 5, 2, 7, 30):
        visible += await drain(config, offsets, RecordingTransactions(), polls)
    expected = aborted_records(3, 5, 2, 0, 20)
    seen = ids(visible)
    assert len(seen) == len(set(seen))
    for pid in partition_ids(0, 3):
        assert {n for p, n in seen if p == pid} == set(range(20)) - expected[pid]


async def test_batch_commits_without_commit_interval() -> None:
    txn = RecordingTransactions()
    task = await started_task(settings(batch_size=3), txn=txn)
    await poll(task)
    await poll(task)
    assert txn.requests == [("commit", None), ("commit", None)]


async def test_no_boundaries_without_transaction_context() -> None:
    task = await started_task(settings(commit_every_records=2, abort_every_transactions=2))
    assert len(await poll(task)) == 500


# ------------------------------------------------------------------ output=blocks

JSON = JsonConverter()


def converted(items: Sequence[SourceRecord | RecordBlock]) -> dict[str, list[tuple[bytes, bytes]]]:
    """Source partition → the (key, value) bytes of its records in order, as written to
    Kafka: records through the default (json) converters, block rows as they are."""
    rows: dict[str, list[tuple[bytes, bytes]]] = {}
    for item in items:
        for record in item.records() if isinstance(item, RecordBlock) else [item]:
            key, value = record.key, record.value
            if not record.encoded:
                key, value = JSON.convert("out", key), JSON.convert("out", value)
            assert isinstance(key, bytes)
            assert isinstance(value, bytes)
            rows.setdefault(record.source_partition["partition"], []).append((key, value))
    return rows


def last_offsets(items: Sequence[SourceRecord | RecordBlock]) -> dict[str, Any]:
    """Source partition → its offset once the poll's items are written."""
    return {
        item.source_partition["partition"]: item.source_offset
        for item in items
        if item.source_offset is not None
    }


async def polled(task: VerifiableSourceTask) -> list[SourceRecord | RecordBlock]:
    return list(await task.poll() or [])


def rows(items: Sequence[SourceRecord | RecordBlock]) -> int:
    """How many records: a block counts its rows."""
    return sum(len(i) if isinstance(i, RecordBlock) else 1 for i in items)


@pytest.mark.parametrize(
    ("record_bytes", "partitions", "batch", "resume"),
    [
        (0, 1, 500, {}),
        (100, 3, 7, {}),
        # 0-0 catches up from 95 to 995 first, then both cross 999 → 1000
        (1000, 2, 500, {"0-0": 95, "0-1": 995}),
        (4096, 3, 5, {"0-0": 8, "0-2": 1}),  # uneven: the lagging partitions catch up first
        (60, 1, 33, {"0-0": 9_999_990}),  # the padding shrinks as the seqno grows a digit
    ],
)
async def test_blocks_are_the_records_converted(
    record_bytes: int, partitions: int, batch: int, resume: dict[str, int]
) -> None:
    """Poll by poll: the same rows per partition, byte for byte as the json converters
    write the records, with the same offsets; one block per partition touched."""
    common = {"record_bytes": record_bytes, "partitions_per_task": partitions, "batch_size": batch}
    records = await started_task(settings(**common), offsets_of(resume))
    blocks = await started_task(settings(**common, output="blocks"), offsets_of(resume))
    for _ in range(6):
        expected, got = await polled(records), await polled(blocks)
        assert converted(got) == converted(expected)
        assert last_offsets(got) == last_offsets(expected)
        assert all(isinstance(b, RecordBlock) for b in got)
        touched = [b.source_partition["partition"] for b in got]
        assert len(touched) == len(set(touched)) == len(converted(expected))
        assert blocks.next_seqnos() == records.next_seqnos()


async def test_blocks_of_a_poll() -> None:
    task = await started_task(settings(partitions_per_task=2, batch_size=5, output="blocks"))
    first, second = await polled(task)
    assert isinstance(first, RecordBlock)
    assert isinstance(second, RecordBlock)
    assert (first.topic, first.source_partition, first.source_offset) == (
        "out",
        {"partition": "0-0"},
        {"seqno": 3},  # after its last row: 0, 1, 2
    )
    assert first.keys == [b'"0-0"'] * 3
    assert first.values[0] == b'{"partition":"0-0","seqno":0,"task":0}'
    assert (second.source_offset, len(second)) == ({"seqno": 2}, 2)


async def test_blocks_finish_and_resume_like_records() -> None:
    offsets = MemoryOffsets()
    config = settings(partitions_per_task=3, records_per_partition=50, batch_size=7)
    first = await started_task({**config, "output": "blocks"}, offsets)
    offsets.save(await polled(first) + await polled(first))  # 14 records
    again = await started_task({**config, "output": "blocks", "batch.size": "1000"}, offsets)
    records = await started_task({**config, "batch.size": "1000"}, offsets)
    assert again.next_seqnos() == records.next_seqnos() == {"0-0": 5, "0-1": 5, "0-2": 4}
    rest = await polled(again)
    assert converted(rest) == converted(await polled(records))
    assert rows(rest) == 150 - 14
    assert await again.poll() is None
    assert again.next_seqnos() == {"0-0": None, "0-1": None, "0-2": None}


async def test_blocks_throughput_paces_rows() -> None:
    now = [100.0]
    config = settings(throughput=10, batch_size=1000, partitions_per_task=3, output="blocks")
    task = await started_task(config, clock=lambda: now[0])

    assert rows(await polled(task)) == 1
    assert await task.poll() is None
    now[0] += 1.0
    assert rows(await polled(task)) == 10
    now[0] += 500.0
    assert rows(await polled(task)) == 1000


async def test_blocks_commit_after_each_poll_without_commit_interval() -> None:
    txn = RecordingTransactions()
    task = await started_task(settings(batch_size=3, output="blocks"), txn=txn)
    await task.poll()
    await task.poll()
    assert txn.requests == [("commit", None), ("commit", None)]


@pytest.mark.parametrize("which", ["key", "value"])
async def test_blocks_need_json_converters(which: str) -> None:
    config = {**settings(output="blocks"), f"{which}.converter": "string"}
    problems = VerifiableSource().validate(config)[f"{which}.converter"]
    assert problems
    assert f"set {which}.converter=json, or output=records" in problems[0]
    with pytest.raises(ConfigError) as caught:
        await VerifiableSource().start(config)
    assert caught.value.key == f"{which}.converter"
    assert not any(VerifiableSource().validate({**config, f"{which}.converter": "JSON"}).values())
    assert VerifiableSource().validate(settings(output="rows"))["output"]


def test_no_output_overrides_commit_record() -> None:
    """What the runtime looks at to skip per-record bookkeeping (a record kept and a
    delivery report per row): neither output pays for it."""
    assert VerifiableSource().task_class().commit_record is SourceTask.commit_record
