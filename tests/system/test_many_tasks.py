"""Hundreds of exactly-once tasks on one worker: they start (bounded, sharing their
start-up reads), survive a SIGKILL of the worker, and a task count that changes
300 -> 50 -> 300 while they run fences every old task and loses nothing."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.integration.worker_harness import WorkerProcess, worker_props
from tests.system.test_crash import run_verify

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

TASKS = 300
START_TIMEOUT = 300  # seconds; a 2-core CI machine under load


def connector(topic: str, tasks: int, records: int, throughput: float) -> dict[str, str]:
    return {
        "name": "many",
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.partition": str(records),
        "throughput": str(throughput),
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "1000",
    }


def verified(bootstrap: str, topic: str, expect: int, partitions: int) -> None:
    code, output = run_verify(bootstrap, topic, expect)
    summary = re.search(r"records=(\d+) partitions=(\d+) duplicates=(\d+) gaps=(\d+)", output)
    assert summary, output
    assert summary.groups() == (str(expect), str(partitions), "0", "0"), output
    assert code == 0, output


def test_300_tasks_start_and_survive_a_sigkill(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group, topic = unique_name("many"), unique_name("out")
    records = 20
    worker = WorkerProcess(
        tmp_path, worker_props(bootstrap, group), [connector(topic, TASKS, records, 5)]
    )
    try:
        worker.start()
        worker.wait_running("many", TASKS, timeout=START_TIMEOUT)
        time.sleep(1.5)  # some transactions committed, most records still to come
        worker.kill(signal.SIGKILL)
        worker.start()
        worker.wait_running("many", TASKS, timeout=START_TIMEOUT)
        verified(bootstrap, topic, TASKS * records, TASKS)
    finally:
        worker.stop()
    assert "Traceback" not in worker.log.read_text()


def test_task_count_300_to_50_to_300_fences_every_old_task(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group, topic = unique_name("many"), unique_name("out")
    records = 40  # at 2 records/s per task: 20 s of output per source partition
    worker = WorkerProcess(tmp_path, worker_props(bootstrap, group), [])
    url = worker.rest_url
    try:
        worker.start()
        previous = 0
        for tasks in (TASKS, 50, TASKS):
            deadline = time.monotonic() + 60
            status = None
            while status not in (200, 201) and time.monotonic() < deadline:
                time.sleep(0.5)  # the first PUT may meet a worker still starting
                try:
                    answer = httpx.put(
                        f"{url}/connectors/many/config",
                        json=connector(topic, tasks, records, 2),
                        timeout=30,
                    )
                except httpx.HTTPError:
                    continue
                status = answer.status_code
            assert status in (200, 201), worker.tail()
            # The new generation's round fences every task of the previous one (the
            # statuses alone could still show the previous generation's tasks RUNNING).
            done = f"fencing round done connector=many fenced={previous} "
            deadline = time.monotonic() + START_TIMEOUT
            while done not in worker.log.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            worker.wait_running("many", tasks, timeout=START_TIMEOUT)
            previous = tasks
            time.sleep(2)
        verified(bootstrap, topic, TASKS * records, TASKS)
    finally:
        worker.stop()
    log = worker.log.read_text()
    rounds = re.findall(r"fencing round done connector=many fenced=(\d+)", log)
    # 300 tasks fence nothing (no earlier generation); 50 fence the 300; 300 fence the 50.
    assert rounds == ["0", str(TASKS), "50"], rounds
    assert "Traceback" not in log
