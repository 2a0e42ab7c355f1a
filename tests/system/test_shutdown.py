"""SIGTERM and SIGINT stop a worker process cleanly: it exits 0 after committing
what its tasks polled, and a restart continues without duplicates or gaps."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.worker_harness import WorkerProcess, worker_props
from tests.system.test_crash import run_verify

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_sigterm_and_sigint_stop_cleanly(
    bootstrap: str, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    group, topic = unique_name("stop"), unique_name("out")
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": "2",
        "topic": topic,
        "records.per.partition": "0",
        "throughput": "2000",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "3000",
    }
    worker = WorkerProcess(tmp_path, worker_props(bootstrap, group), [connector])
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            worker.start()
            worker.wait_running("vs", 2)
            time.sleep(2)
            assert worker.proc is not None
            started = time.monotonic()
            worker.proc.send_signal(sig)
            assert worker.proc.wait(timeout=30) == 0, worker.tail()
            assert time.monotonic() - started < 15
    finally:
        worker.stop()
    log = worker.log.read_text()
    assert log.count("worker stopped") == 2
    assert "Traceback" not in log
    code, output = run_verify(bootstrap, topic, 1)
    summary = re.search(r"records=(\d+) partitions=2 duplicates=0 gaps=0", output)
    assert summary, output
    # The final commits (interval 3 s, stopped after ~2 s) made it: about 2 x 2 x 2000 records.
    assert int(summary.group(1)) >= 4000, output
    assert code == 0
