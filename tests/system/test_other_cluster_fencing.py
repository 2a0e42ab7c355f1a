"""A connector that writes to another Kafka cluster (``producer.override.bootstrap.servers``)
has its old task generations fenced on **that** cluster, as Connect fences with the
connector's own clients (KIP-618).

Two ``eos worker`` processes keep their internal topics on the session's broker; a
4-task FileSource writes lines, and its offsets, to a second one-broker cluster. The worker
without task 0 is SIGSTOPped past its session and ``tasks.max`` drops to the lowest task
it holds, so no new task with its ids starts (a task that starts fences its predecessor by
itself): only the leader's fencing round can stop those zombies, and their files go to the
tasks left, which resume from the committed offsets. After SIGCONT:

- every line is in the output topic exactly once (read_committed by confluent-kafka, a
  client the worker does not use): a zombie whose open transaction became visible would
  have doubled lines the new owners read again;
- the leader fenced the old generation's transactional ids where they live: each got an
  epoch above 0 (on a cluster that never saw them, as before the fix, each got 0).

The same with one cluster is the control."""

from __future__ import annotations

import functools
import json
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from eos.kafka import ClientConfig
from eos.kafka.admin import ensure_topic
from tests.integration.jdbc_helpers import committed
from tests.integration.worker_harness import Cluster, WorkerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

FILES = 12
TASKS = 4
SESSION_S = 6


class Appender(threading.Thread):
    """Appends a line to one of the files in turn, about 300 a second; each line a JSON
    string naming its file and number."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.paths = [directory / f"in-{i:02d}.txt" for i in range(FILES)]
        for path in self.paths:
            path.touch()
        self.written: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            path = self.paths[n % FILES]
            line = f"{path.stem}-{n}"
            with path.open("a") as f:
                f.write(json.dumps(line) + "\n")
            self.written.append(line)
            n += 1
            time.sleep(1 / 300)


def fenced_epochs(worker: WorkerProcess, group: str) -> dict[str, int]:
    """Transactional id → the epoch its last fencing in ``worker``'s log gave it."""
    epochs = {}
    for line in worker.log.read_text(errors="replace").splitlines():
        if "producer fenced" in line:
            tid = re.search(r"transactional_id=(\S+)", line)
            epoch = re.search(r"epoch=(\d+)", line)
            if tid and epoch and tid.group(1).startswith(f"{group}-files-"):
                epochs[tid.group(1)] = int(epoch.group(1))
    return epochs


@pytest.mark.parametrize("where", ["other cluster", "same cluster"])
def test_old_task_generations_are_fenced_on_the_cluster_they_write_to(
    where: str,
    bootstrap: str,
    other_kafka: str,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    output = other_kafka if where == "other cluster" else bootstrap
    topic, group = unique_name("lines"), unique_name("g")
    anyio.run(
        functools.partial(
            ensure_topic, ClientConfig({"bootstrap.servers": output}), topic, partitions=2
        )
    )
    (tmp_path / "in").mkdir()
    appender = Appender(tmp_path / "in")
    config = {
        "name": "files",
        "connector.class": "FileSource",
        "path": str(tmp_path / "in" / "*.txt"),
        "topic": topic,
        "tasks.max": str(TASKS),
        "poll.interval.ms": "100",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "500",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }
    if output != bootstrap:
        config["producer.override.bootstrap.servers"] = output
    cluster = Cluster(
        tmp_path, bootstrap, group, workers=2, session_timeout_ms=str(SESSION_S * 1000)
    )
    appender.start()
    try:
        cluster.start()
        cluster.leader()
        cluster.put_connector(config)
        deadline = time.monotonic() + 90
        while len(set((placement := cluster.placement("files", TASKS)).values())) < 2:
            assert time.monotonic() < deadline, f"{placement}\n{cluster.tails()}"
            time.sleep(0.5)
        victim_id = next(w for w in set(placement.values()) if w != placement[0])
        remaining = min(t for t, w in placement.items() if w == victim_id)
        victim = cluster.by_id(victim_id)
        survivor = next(w for w in cluster.workers if w is not victim)
        time.sleep(1.2)  # its tasks have written and hold open transactions
        victim.kill(signal.SIGSTOP)
        cluster.put_connector({**config, "tasks.max": str(remaining)})
        placement = cluster.placement("files", remaining)
        assert set(placement.values()) == {cluster.worker_id(survivor)}
        done = f"fencing round done connector=files fenced={TASKS} "
        deadline = time.monotonic() + 60
        while done not in survivor.log.read_text(errors="replace"):
            assert time.monotonic() < deadline, survivor.tail()
            time.sleep(0.2)
        time.sleep(SESSION_S)  # the zombie is out of the group
        victim.kill(signal.SIGCONT)
        time.sleep(5)
        appender.stop.set()
        appender.join(10)
        deadline = time.monotonic() + 90
        while True:
            lines = [value for _, _, value in committed(output, topic)]
            if len(lines) >= len(appender.written) or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        appender.stop.set()
        cluster.stop()
    twice = [line for line, n in Counter(lines).items() if n > 1]
    assert not twice, (len(twice), twice[:5])
    assert set(lines) == set(appender.written), len(set(appender.written) - set(lines))
    epochs = fenced_epochs(survivor, group)
    assert sorted(epochs) == [f"{group}-files-{i}" for i in range(TASKS)], epochs
    assert all(epoch > 0 for epoch in epochs.values()), epochs
