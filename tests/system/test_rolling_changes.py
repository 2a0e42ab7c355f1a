"""Settings changed one worker at a time on a live cluster of three ``eos worker``
processes with records flowing, read back read_committed by confluent-kafka (a client eos
does not use).

KIP-618's upgrade path: rolled ``disabled`` → ``preparing`` → ``enabled``, a worker
SIGKILLed once the cluster is exactly-once, then rolled back to ``preparing`` and
``disabled``:

- no gap anywhere, at any step;
- no duplicate of a record written while every worker ran ``enabled`` (from the last roll
  up to the start of the downgrade, the SIGKILL included);
- in ``disabled`` and ``preparing``, a worker's restart moves only the tasks it gives up
  and takes back: a task that stays on another worker through the step is not restarted
  there (its ``task starting`` lines);
- ``GET /`` lists each member's mode as the roll reaches it.

The assignor: ``sticky`` → ``sticky,zone`` → ``zone``, the group moving only once every
worker lists the new one; exactly once throughout.
"""

from __future__ import annotations

import json
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.verify import check
from tests.integration.worker_harness import Cluster, WorkerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

TASKS = 6


def connector(topic: str) -> dict[str, str]:
    return {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(TASKS),
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": "0",
        "throughput": "100",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "200",
    }


def log_size(worker: WorkerProcess) -> int:
    return worker.log.stat().st_size if worker.log.exists() else 0


def starts_since(worker: WorkerProcess, offset: int) -> Counter[int]:
    """How often each task of ``vs`` started on ``worker`` since byte ``offset`` of its log."""
    with worker.log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return Counter(
        int(found.group(1))
        for line in text.splitlines()
        if "task starting" in line and "connector=vs " in line + " "
        and (found := re.search(r"\btask=(\d+)", line))
    )  # fmt: skip


def modes(cluster: Cluster) -> dict[str, str | None]:
    """worker id → its mode, as ``GET /`` on a live worker lists the members."""
    root = cluster.get("/")
    if root is None:
        return {}
    return {m["worker_id"]: m["exactly_once_source_support"] for m in root["cluster"]["members"]}


def settled(cluster: Cluster, holder: WorkerProcess) -> dict[int, str]:
    """The placement once every task runs and ``holder`` (just restarted) holds some."""
    deadline = time.monotonic() + 120
    while True:
        placement = cluster.placement("vs", TASKS, 120)
        if cluster.worker_id(holder) in placement.values():
            return placement
        assert time.monotonic() < deadline, f"{placement}\n{cluster.tails()}"
        time.sleep(0.3)


def roll(cluster: Cluster, mode: str, *, only_moves_restart: bool) -> None:
    """Restart each worker in turn with ``exactly.once.source.support=mode``."""
    for worker in cluster.workers:
        before = cluster.placement("vs", TASKS, 120)
        offsets = {cluster.worker_id(w): log_size(w) for w in cluster.workers}
        restart(cluster, worker, {"exactly.once.source.support": mode})
        deadline = time.monotonic() + 60
        while modes(cluster).get(cluster.worker_id(worker)) != mode:
            assert time.monotonic() < deadline, f"{modes(cluster)}\n{cluster.tails()}"
            time.sleep(0.3)
        after = settled(cluster, worker)
        if only_moves_restart:
            for task, owner in before.items():
                if owner != cluster.worker_id(worker) and after[task] == owner:
                    starts = starts_since(cluster.by_id(owner), offsets[owner])
                    assert starts[task] == 0, (mode, task, owner, before, after)


def restart(cluster: Cluster, worker: WorkerProcess, settings: dict[str, str]) -> None:
    worker.set(settings)
    worker.stop()
    worker.start()


def read_back(bootstrap: str, topic: str) -> list[tuple[int, Any]]:
    """(CreateTime ms, value) of every record, read_committed by confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        got: list[tuple[int, Any]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error() is None:
                    got.append((message.timestamp()[1], json.loads(message.value() or b"null")))
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return got
        raise AssertionError(f"{topic} not read to its end in 120 s")
    finally:
        consumer.close()


def test_exactly_once_turned_on_and_off_on_a_live_cluster(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    topic, group = unique_name("upgrade"), unique_name("g")
    cluster = Cluster(tmp_path, bootstrap, group, exactly_once_source_support="disabled")
    try:
        cluster.start()
        cluster.leader()
        cluster.put_connector(connector(topic))
        cluster.placement("vs", TASKS, 120)
        assert set(modes(cluster).values()) == {"disabled"}
        time.sleep(2)
        roll(cluster, "preparing", only_moves_restart=True)
        roll(cluster, "enabled", only_moves_restart=False)
        enabled_from = time.time() * 1000
        time.sleep(3)
        victim = cluster.by_id(cluster.placement("vs", TASKS)[0])
        victim.kill(signal.SIGKILL)
        time.sleep(2)
        victim.start()
        settled(cluster, victim)
        time.sleep(3)
        enabled_until = time.time() * 1000
        roll(cluster, "preparing", only_moves_restart=False)
        roll(cluster, "disabled", only_moves_restart=True)
        time.sleep(2)
        assert set(modes(cluster).values()) == {"disabled"}
    finally:
        cluster.stop()
    records = read_back(bootstrap, topic)
    result = check(value for _, value in records)
    assert (result.gaps, result.invalid) == (0, 0), result
    assert result.partitions == TASKS
    copies = Counter((v["partition"], v["seqno"]) for _, v in records)
    in_window = {
        (v["partition"], v["seqno"]) for ts, v in records if enabled_from <= ts <= enabled_until
    }
    assert len(in_window) > 1000
    twice = sorted(key for key in in_window if copies[key] > 1)
    assert not twice, (len(twice), twice[:5])


def test_the_assignor_changed_one_worker_at_a_time(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """sticky on all → sticky,zone rolled → zone rolled (each worker in a rack of its own),
    records flowing: the group stays on sticky until every worker lists zone, then takes
    it and spreads the connector's tasks over the racks; nothing lost or doubled."""
    topic, group = unique_name("assignor"), unique_name("g")
    racks = [{"worker.rack": rack} for rack in ("a", "b", "c")]
    cluster = Cluster(tmp_path, bootstrap, group, each=racks, assignor="sticky")
    used: list[str] = []
    try:
        cluster.start()
        cluster.leader()
        cluster.put_connector(connector(topic))
        cluster.placement("vs", TASKS, 120)
        for setting in ("sticky,zone", "zone"):
            for worker in cluster.workers:
                restart(cluster, worker, {"assignor": setting})
                settled(cluster, worker)
                root = cluster.get("/")
                assert root is not None
                used.append(root["cluster"]["assignor"])
        placement = cluster.placement("vs", TASKS)
        assert sorted(Counter(placement.values()).values()) == [2, 2, 2]  # two per rack
    finally:
        cluster.stop()
    # the first round-robin-only worker finds every other one listing it: the group moves
    assert used == ["sticky", "sticky", "sticky", "zone", "zone", "zone"]
    records = read_back(bootstrap, topic)
    result = check(value for _, value in records)
    assert (result.gaps, result.duplicates, result.invalid) == (0, 0, 0), result
    assert result.partitions == TASKS
