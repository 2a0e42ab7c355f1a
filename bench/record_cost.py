"""CPU per record of the typical connector path, stage by stage, without a broker.

FileSource's task reads a file of ``--lines`` lines of 100 bytes (its defaults, its
thread-pool reads run inline) and hands them over in record blocks; every block goes
through the record path's encoding of typed blocks (JSON converters, the values a
STRING column, :func:`~eos.runtime.converters.encode_block`) and its rows into a
librdkafka producer's ``produce()`` (no broker: the records only queue), and the send
step keeps the offsets of each poll batch. Timed with the thread's CPU clock
(``time.thread_time``), so other load on the machine disturbs it less than a wall clock;
every round is printed and the summary takes the median of the rounds of each stage:

  poll      FileSourceTask.poll: the lines read, decoded, a RecordBlock per file read
  convert   the blocks encoded by the converters (a column at a time) and produce()
  offsets   the send step's offsets batch for the poll

What it leaves out (the event loop, the transaction, librdkafka's own threads, the
broker) is in bench/peers.py, which runs the same path end to end. Usage:

    python bench/record_cost.py [--lines 1000000] [--rounds 3] [--batch-size N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from confluent_kafka import Producer

from eos.api import RecordBlock
from eos.runtime.converters import encode_block
from eos.runtime.converters.json import JsonConverter
from eos.runtime.producers.base import count_records
from eos.runtime.source_task import _keep_offsets
from eos.storage.offset_log import OffsetBatch
from services.connectors.file import FileSourceTask

STAGES = ("poll", "convert", "offsets")


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


async def one_round(path: Path, lines: int, batch_size: int | None) -> dict[str, float]:
    keys, values = converters()
    producer = Producer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "queue.buffering.max.messages": lines + 1,
            "queue.buffering.max.kbytes": 2_000_000,
            "linger.ms": 100_000,
            "log_level": 0,
        }
    )
    produce = producer.produce
    task = FileSourceTask()
    config = {"topic": "t", "path": str(path), "task.id": "0", "task.count": "1"}
    if batch_size:
        config["batch.size"] = str(batch_size)
    await task.start(config, _Context())  # type: ignore[arg-type]
    spent = dict.fromkeys(STAGES, 0.0)
    offsets = OffsetBatch("bench")
    n = 0
    while n < lines:
        start = time.thread_time()
        records = await task.poll()
        polled = time.thread_time()
        spent["poll"] += polled - start
        if not records:
            continue
        for block in records:
            assert isinstance(block, RecordBlock)
            encoded = encode_block(block, keys, values)
            topic, row_keys = encoded.topic, encoded.keys or [None] * len(encoded)
            for key, value in zip(row_keys, encoded.values, strict=True):
                produce(topic, value, key, -1, None)
        converted = time.thread_time()
        spent["convert"] += converted - polled
        _keep_offsets(offsets, records)
        spent["offsets"] += time.thread_time() - converted
        n += count_records(records)
    producer.purge()
    return {stage: seconds / n * 1e6 for stage, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None)
    args = parser.parse_args()
    path = lines_file(args.lines)
    rounds = []
    for n in range(args.rounds):
        got = anyio.run(one_round, path, args.lines, args.batch_size)
        rounds.append(got)
        cells = ", ".join(f"{s} {got[s]:.2f}" for s in STAGES)
        print(f"round {n + 1}: {cells}, total {sum(got.values()):.2f} µs/record", flush=True)
    print("\n| stage | µs of CPU per record (median of the rounds) | rounds |")
    print("|---|---:|---|")
    for stage in STAGES:
        values = [r[stage] for r in rounds]
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {stage} | {statistics.median(values):.2f} | {each} |")
    totals = [sum(r.values()) for r in rounds]
    each = ", ".join(f"{v:.2f}" for v in totals)
    print(f"| total | {statistics.median(totals):.2f} | {each} |")
    print(f"\nload average {os.getloadavg()}")


if __name__ == "__main__":
    main()
