"""Transactions through a task producer alone: no worker, no connector, no converter.

Each transaction is what a source task's poll boundary makes of a poll: one block of
``--rows`` rows (100-byte values, no key), its offsets record, the commit. The variants run
side by side on one broker, in alternating order, ``--transactions`` transactions a round;
the first round warms up and is not counted. Rows/s are printed for every round and the
median. Variants:

  aiokafka                  eos's default producer as the code is
  aiokafka-lingering        the same with the commit's ``send_now`` skipped: a
                            transaction's last batch and its offsets records wait out
                            ``linger.ms`` (5 ms) in aiokafka's accumulator before EndTxn
                            (the code before 2026-12-06)
  librdkafka                the librdkafka producer as the code is
  librdkafka-linger0        the same with ``linger.ms=0`` (whether librdkafka's commit
                            waits out the linger: it does not, if both rows agree)

Usage: python bench/task_producer.py [--rows 50000] [--rounds 8] [--transactions 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from worker_run import _client_settings, bench_broker

from eos.api import RecordBlock
from eos.kafka import ClientConfig
from eos.kafka import aiokafka_private as private
from eos.kafka.admin import ensure_topic
from eos.runtime.task.producers import make_task_producer
from eos.runtime.task.producers.base import ProducerClient

TASK_DEFAULTS = {"linger.ms": "5", "batch.size": "524288"}
"""What a task's producer gets on a worker running one task (source_task.py)."""


@contextmanager
def lingering() -> Iterator[None]:
    """The commit no longer has the background sender send at once."""
    send_now = private.send_now
    private.send_now = lambda producer: None
    try:
        yield
    finally:
        private.send_now = send_now


@contextmanager
def unchanged() -> Iterator[None]:
    yield


VARIANTS: dict[str, tuple[ProducerClient, dict[str, str], Callable[[], Any]]] = {
    "aiokafka": ("aiokafka", {}, unchanged),
    "aiokafka-lingering": ("aiokafka", {}, lingering),
    "librdkafka": ("librdkafka", {}, unchanged),
    "librdkafka-linger0": ("librdkafka", {"linger.ms": "0"}, unchanged),
}


async def measure(bootstrap: str, rows: int, rounds: int, transactions: int) -> None:
    config = ClientConfig({"bootstrap.servers": bootstrap, **_client_settings})
    offsets = f"bench-offsets-{uuid.uuid4().hex[:6]}"
    await ensure_topic(config, offsets, partitions=1)
    producers = {}
    for name, (client, extra, _) in VARIANTS.items():
        topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        await ensure_topic(config, topic, partitions=1)
        settings = config.with_overrides(producer={**TASK_DEFAULTS, **extra})
        producer = make_task_producer(
            client, settings, per_record=False, transactional_id=f"bench-{topic}",
            enable_idempotence=True, transaction_timeout_ms=60000,
        )  # fmt: skip
        await producer.start()
        producers[name] = (topic, producer)
    values = [b"x" * 100] * rows
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    order = list(VARIANTS)
    for round_ in range(rounds + 1):
        for name in order if round_ % 2 else reversed(order):
            topic, producer = producers[name]
            with VARIANTS[name][2]():
                start = time.perf_counter()
                for n in range(transactions):
                    await producer.begin()
                    block = RecordBlock({"bench": name}, {"n": n}, topic, values)
                    await producer.send([block], _unused, per_record=False)
                    await producer.send_offsets(offsets, [(name.encode(), str(n).encode())])
                    await producer.commit()
                took = time.perf_counter() - start
            if round_:
                rates[name].append(rows * transactions / took)
        if round_:
            print(f"  round {round_}: " + ", ".join(f"{n} {r[-1]:,.0f}" for n, r in rates.items()))
    for _, producer in producers.values():
        await producer.close()
    print(f"\n| producer ({rows:,} rows a transaction) | rows/s (median) | rounds |")
    print("|---|---:|---|")
    for name, found in rates.items():
        every = ", ".join(f"{r:,.0f}" for r in found)
        print(f"| {name} | {statistics.median(found):,.0f} | {every} |")


def _unused(record: Any) -> Any:
    raise AssertionError("blocks of bytes are not converted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--transactions", type=int, default=20)
    args = parser.parse_args()
    with bench_broker(None) as (bootstrap, _):
        anyio.run(measure, bootstrap, args.rows, args.rounds, args.transactions)


if __name__ == "__main__":
    main()
