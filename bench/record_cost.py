"""CPU per record of the typical connector path, stage by stage, without a broker.

FileSource's task reads a file of ``--lines`` lines of 100 bytes (its defaults, its
thread-pool reads run inline) and hands them over in record blocks; every block goes
through the record path's encoding of typed blocks (JSON converters, the values a
STRING column, :func:`~eos.converters.encode_block`) and its rows into a
librdkafka producer's ``produce()`` (no broker: the records only queue), and the send
step keeps the offsets of each poll batch. Timed with the thread's CPU clock
(``time.thread_time``), so other load on the machine disturbs it less than a wall clock;
every round is printed and the summary takes the median of the rounds of each stage:

  poll      FileSourceTask.poll: the lines read, decoded, a RecordBlock per file read
  convert   the blocks encoded by the converters (a column at a time) and produce()
  offsets   the send step's offsets batch for the poll

``--records``: the per-record path instead, with LineRecordSource's task
(bench/line_records.py: FileSource handing over a SourceRecord per line), each stage
apart. This is the path of records the runtime does not fold into blocks
(eos/columns/folding.py: records with headers, schemas built per record, a task that
overrides ``commit_record``, a schema registry); bench/peers.py's ``eos-file-records-*``
rows, whose records fold, run the block stages above instead:

  poll      LineRecordTask.poll: the lines read, decoded, a SourceRecord per line
  convert   the record path's convert step (RecordPath.convert: the key and value
            converters, JSON; the value a STRING)
  produce   librdkafka task producer's call per record: produce() (nothing sent)
  append    aiokafka task producer's call per record: the segment's append to the open
            batch of the partition (a full batch is closed and a new one opened; the
            sending, aiokafka's, is left out)
  offsets   the send step's offsets batch for the poll

with a total for each producer. The garbage collector is tuned as in the worker
(services.worker_service.tune_gc): with CPython's defaults a young collection every 700
objects costs the per-record path about 0.5 µs a record more.

What it leaves out (the event loop, the transaction, librdkafka's own threads, the
broker) is in bench/peers.py, which runs the same path end to end. Usage:

    python bench/record_cost.py [--lines 1000000] [--rounds 3] [--batch-size N] [--records]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import structlog
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from line_records import LineRecordTask

from eos.api import RecordBlock, SourceRecord
from eos.converters import encode_block
from eos.converters.json import JsonConverter
from eos.runtime.task.producers.aiokafka import _OpenBatch, _Segment
from eos.runtime.task.producers.base import Outgoing, count_records
from eos.runtime.task.record_path import RecordPath
from eos.runtime.task.source_task import _keep_offsets
from eos.runtime.task.task_deps import TaskDeps, TaskSpec
from eos.storage.offset_log import OffsetBatch
from services.connectors.file import FileSourceTask
from services.worker_service import tune_gc

STAGES = ("poll", "convert", "offsets")
RECORD_STAGES = ("poll", "convert", "produce", "append", "offsets")
TOTALS = {"librdkafka": ("poll", "convert", "produce", "offsets"),
          "aiokafka": ("poll", "convert", "append", "offsets")}  # fmt: skip
"""--records: the stages of each producer's total."""


class _Resources:
    async def run_blocking(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


class _Offsets:
    async def offsets(self, partitions: list[Any]) -> list[None]:
        return [None for _ in partitions]


class _Context:
    resources = _Resources()
    offset_reader = _Offsets()


def lines_file(lines: int) -> Path:
    path = Path(tempfile.gettempdir()) / f"eos-record-cost-{lines}.txt"
    if not path.exists() or path.stat().st_size != lines * 100:
        with path.open("w") as f:
            for i in range(lines):
                f.write(f"line {i:010d} ".ljust(99, "x") + "\n")
    return path


def converters() -> tuple[JsonConverter, JsonConverter]:
    """The key and value converters of the worker's defaults (json)."""
    keys, values = JsonConverter(), JsonConverter()
    keys.configure({}, True)
    values.configure({}, False)
    return keys, values


def queueing_producer(lines: int) -> Producer:
    """A librdkafka producer that only queues (no broker), room for ``lines`` records."""
    return Producer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "queue.buffering.max.messages": lines + 1,
            "queue.buffering.max.kbytes": 2_000_000,
            "linger.ms": 100_000,
            "log_level": 0,
        }
    )


async def started(task: FileSourceTask, path: Path, batch_size: int | None) -> None:
    config = {"topic": "t", "path": str(path), "task.id": "0", "task.count": "1"}
    if batch_size:
        config["batch.size"] = str(batch_size)
    await task.start(config, _Context())  # type: ignore[arg-type]


async def one_round(path: Path, lines: int, batch_size: int | None) -> dict[str, float]:
    keys, values = converters()
    producer = queueing_producer(lines)
    produce = producer.produce
    task = FileSourceTask()
    await started(task, path, batch_size)
    spent = dict.fromkeys(STAGES, 0.0)
    offsets = OffsetBatch("bench")
    async for records, polled in timed_polls(task, lines, spent):
        for block in records:
            assert isinstance(block, RecordBlock)
            encoded = encode_block(block, keys, values)
            topic, row_keys = encoded.topic, encoded.keys or [None] * len(encoded)
            for key, value in zip(row_keys, encoded.values, strict=True):
                produce(topic, value, key, -1, None)
        converted = time.thread_time()
        spent["convert"] += converted - polled
        keep_offsets(offsets, records, spent, converted)
    producer.purge()
    return {stage: seconds / lines * 1e6 for stage, seconds in spent.items()}


async def timed_polls(
    task: FileSourceTask, lines: int, spent: dict[str, float]
) -> AsyncIterator[tuple[Sequence[Outgoing], float]]:
    """The task's polls with something, until ``lines`` records, each timed (``poll``),
    with the thread time it ended."""
    n = 0
    while n < lines:
        start = time.thread_time()
        records = await task.poll()
        polled = time.thread_time()
        spent["poll"] += polled - start
        if records:
            yield records, polled
            n += count_records(records)


def keep_offsets(
    offsets: OffsetBatch, records: Sequence[Outgoing], spent: dict[str, float], since: float
) -> None:
    """The send step's offsets batch for a poll, timed (``offsets``) from ``since``."""
    _keep_offsets(offsets, records)
    spent["offsets"] += time.thread_time() - since


def record_path() -> RecordPath:
    """The task's record path with the worker's default converters (JSON), no transforms."""
    keys, values = converters()
    nothing: Any = None  # what the record path does not use
    deps = TaskDeps(nothing, "bench", "offsets", nothing, keys, values, nothing, nothing,
                    1.0, 1000, 60000)  # fmt: skip
    topics: set[str] = set()
    return RecordPath(TaskSpec("bench", 0, 1, {}), deps, topics.add, False, structlog.get_logger())


async def records_round(path: Path, lines: int, batch_size: int | None) -> dict[str, float]:
    convert = (await record_path().prepare([])).convert  # the convert step of any segment
    producer = queueing_producer(lines)
    produce = producer.produce
    aiokafka = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", max_batch_size=262144)
    segment = _Segment(aiokafka, cast(Any, None), False)  # keyless: no partitioner
    segment._sticky["t"] = 0
    segment.batches["t", 0] = _OpenBatch(aiokafka, False)
    task = LineRecordTask()
    await started(task, path, batch_size)
    spent = dict.fromkeys(RECORD_STAGES, 0.0)
    offsets = OffsetBatch("bench")
    async for polled_records, polled in timed_polls(task, lines, spent):
        records = cast(list[SourceRecord], polled_records)
        pairs: list[Any] = [convert(r) for r in records]  # (key, value): none skipped
        converted = time.thread_time()
        spent["convert"] += converted - polled
        for r, (key, value) in zip(records, pairs, strict=True):
            produce(r.topic, value, key, 0, None)
        produced = time.thread_time()
        spent["produce"] += produced - converted
        quick = segment.quick
        for r, (key, value) in zip(records, pairs, strict=True):
            if not quick(r, key, value):  # full (sending it needs a broker): a new one
                segment.batches["t", 0].builder.close()
                segment.batches["t", 0] = _OpenBatch(aiokafka, False)
                quick(r, key, value)
        appended = time.thread_time()
        spent["append"] += appended - produced
        keep_offsets(offsets, records, spent, appended)
    producer.purge()
    await aiokafka.stop()
    return {stage: seconds / lines * 1e6 for stage, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--records", action="store_true", help="the per-record path")
    args = parser.parse_args()
    tune_gc()
    path = lines_file(args.lines)
    stages, run = (RECORD_STAGES, records_round) if args.records else (STAGES, one_round)
    totals = TOTALS if args.records else {"": STAGES}
    rounds = []
    for n in range(args.rounds):
        got = anyio.run(run, path, args.lines, args.batch_size)
        rounds.append(got)
        cells = ", ".join(f"{s} {got[s]:.2f}" for s in stages)
        print(f"round {n + 1}: {cells} µs/record", flush=True)
    print("\n| stage | µs of CPU per record (median of the rounds) | rounds |")
    print("|---|---:|---|")
    summed = {name: [sum(r[s] for s in parts) for r in rounds] for name, parts in totals.items()}
    lines = [(stage, [r[stage] for r in rounds]) for stage in stages]
    lines += [(f"total {name}".strip(), values) for name, values in summed.items()]
    for label, values in lines:
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {label} | {statistics.median(values):.2f} | {each} |")
    print(f"\nload average {os.getloadavg()}")


if __name__ == "__main__":
    main()
