"""Crash test: a worker process is SIGKILLed at random moments, again and again,
and restarted; the output topic must still hold every record exactly once.

Judged the way a user would: ``eos verify`` reads the topic with read_committed
and checks every source partition's seqnos for duplicates and gaps.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.connectors.verifiable import aborted_records
from tests.integration.worker_harness import QUICK_REJOIN, REPO, WorkerProcess, worker_props

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

TASKS = 2
PARTITIONS_PER_TASK = 4
RECORDS_PER_PARTITION = 25_000  # 2 x 4 x 25 000 = 200 000 records
KILLS = 20
KILLS_SECOND_PRODUCER = int(os.environ.get("EOS_CRASH_KILLS_LIBRDKAFKA", "8"))
"""librdkafka runs the same scenario with fewer kills by default (the suite must stay
under 30 minutes; each kill costs a worker start); the kill points are random either
way. ``EOS_CRASH_KILLS_LIBRDKAFKA=20`` runs the full count."""
COMMIT_EVERY, ABORT_EVERY = 100, 7


def run_verify(bootstrap: str, topic: str, expect: int, *extra: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "verify", "--bootstrap-server", bootstrap,
         "--topic", topic, "--expect", str(expect), "--timeout", "120", *extra],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("boundary", ["poll", "interval", "connector"])
def test_sigkill_loses_and_duplicates_nothing(
    boundary: str,
    producer_client: str,
    bootstrap: str,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    group, topic = unique_name("crash"), unique_name("out")
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(TASKS),
        "topic": topic,
        "partitions.per.task": str(PARTITIONS_PER_TASK),
        "records.per.partition": str(RECORDS_PER_PARTITION),
        "throughput": "4000",
        "transaction.boundary": boundary,
    }
    total = TASKS * PARTITIONS_PER_TASK * RECORDS_PER_PARTITION
    expect, verify_args = total, []
    if boundary == "interval":
        connector["transaction.boundary.interval.ms"] = "200"
    if boundary == "connector":
        connector["commit.every.records"] = str(COMMIT_EVERY)
        connector["abort.every.transactions"] = str(ABORT_EVERY)
        pattern = (
            f"{PARTITIONS_PER_TASK},{COMMIT_EVERY},{ABORT_EVERY},{TASKS},{RECORDS_PER_PARTITION}"
        )
        verify_args = ["--aborted-pattern", pattern]
        for task in range(TASKS):
            aborted = aborted_records(
                PARTITIONS_PER_TASK, COMMIT_EVERY, ABORT_EVERY, task, RECORDS_PER_PARTITION
            )
            expect -= sum(len(s) for s in aborted.values())

    rng = random.Random(f"{boundary}-{group}")
    kills = KILLS if producer_client == "aiokafka" else KILLS_SECOND_PRODUCER
    props = {**worker_props(bootstrap, group, producer_client=producer_client), **QUICK_REJOIN}
    worker = WorkerProcess(tmp_path, props, [connector])
    try:
        for _ in range(kills):
            worker.start()
            worker.wait_running("vs", TASKS)
            time.sleep(rng.uniform(0.2, 1.5))
            worker.kill(signal.SIGKILL)
        worker.start()
        worker.wait_running("vs", TASKS)
        code, output = run_verify(bootstrap, topic, expect, *verify_args)
    finally:
        worker.stop()

    summary = re.search(r"records=(\d+) partitions=(\d+) duplicates=(\d+) gaps=(\d+)", output)
    assert summary, output
    assert summary.groups() == (str(expect), "8", "0", "0"), f"{output}\n{worker.tail()}"
    assert code == 0, output
    assert worker.starts == kills + 1
    # Every kill met running tasks: each start joined the group before it was killed.
    assert worker.log.read_text().count("joined group cause=start") == kills + 1
