"""Exactly once on a secured Kafka: for each security mode, one ``eos worker`` process whose
principal holds exactly the ACLs ``eos acls grant`` planned (nothing else) runs
VerifiableSource and FileSource, each with both task producers (aiokafka, librdkafka), through
a series of SIGKILLs; a three-worker cluster on SASL_SSL rides out a SIGKILL and a SIGSTOP.
Connectors log in as principals of their own (``producer.override.*``): SCRAM-SHA-256 and
PLAIN next to the worker's SCRAM-SHA-512, a client certificate of its own under mTLS.

Judged as a user would: ``eos verify --command-config admin.properties`` for the
VerifiableSource topics, every line of every file exactly once for FileSource.
"""

from __future__ import annotations

import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from eos.acls.rules import output_topics, plan
from services.verify import verify
from services.worker_service import worker_settings
from tests.integration.secured import PLAIN_USER, Secured, eos, read_values
from tests.integration.worker_harness import Cluster, WorkerProcess, worker_props

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

KILLS = {"sasl-scram": 10, "sasl-ssl": 10, "mtls": 10}
"""SIGKILLs per mode. Each costs a worker start, ~3.5 s on 2 cores with 2 s sessions (the
dev brokers allow them): the three series take about two minutes together."""
RECORDS = 6000  # per VerifiableSource partition; two partitions per connector
SESSION = {"session.timeout.ms": "2000", "heartbeat.interval.ms": "400"}


def vs(name: str, topic: str, client: str) -> dict[str, str]:
    return {
        "name": name, "connector.class": "VerifiableSource", "tasks.max": "1", "topic": topic,
        "partitions.per.task": "2", "records.per.partition": str(RECORDS),
        "throughput": "1500", "producer.client": client,
    }  # fmt: skip


def fs(name: str, topic: str, path: Path, client: str) -> dict[str, str]:
    return {
        "name": name, "connector.class": "FileSource", "tasks.max": "1", "topic": topic,
        "path": str(path), "poll.interval.ms": "100", "batch.size": "50",
        "value.converter": "string", "producer.client": client,
    }  # fmt: skip


class Appender:
    """Lines appended to files while the workers are killed (FileSource tails them)."""

    def __init__(self, files: list[Path]) -> None:
        self.files, self.lines = files, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in self.files:
                with path.open("a") as out:
                    out.writelines(f"line-{n:07d}\n" for n in range(self.lines, self.lines + 40))
            self.lines += 40
            time.sleep(0.1)

    def __enter__(self) -> Appender:
        for path in self.files:
            path.write_text("")
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def own_principals(secured: Secured, connectors: list[dict[str, str]]) -> None:
    """Connectors 1 and 2 log in as principals of their own."""
    if secured.mode == "mtls":
        done = eos("dev-kafka", "user", "add", "fs-rdk", "--data-dir", str(secured.kafka.data_dir))
        assert done.returncode == 0, done.stderr
        directory = secured.security.directory
        connectors[2] |= {
            "producer.override.ssl.certfile": str(directory / "fs-rdk.crt.pem"),
            "producer.override.ssl.keyfile": str(directory / "fs-rdk.key.pem"),
        }
        return
    sha256 = await secured.user("conn")
    logins = [(1, sha256, "SCRAM-SHA-256"), (2, PLAIN_USER, "PLAIN")]
    for index, user, mechanism in logins:
        props = secured.client_properties(user, mechanism)
        connectors[index] |= {
            f"producer.override.{k}": props[k] for k in ("sasl.mechanism", "sasl.jaas.config")
        }


def kill_again_and_again(worker: WorkerProcess, files: list[Path], mode: str) -> int:
    """Start, wait until every task runs, SIGKILL at a random moment; again and again while
    the files grow; then start for good. The number of lines each file got."""
    rng = random.Random(f"{mode}-{worker.directory}")
    with Appender(files) as appender:
        for _ in range(KILLS[mode]):
            worker.start()
            for name in ("vs-aio", "vs-rdk", "fs-rdk", "fs-aio"):
                worker.wait_running(name, 1)
            time.sleep(rng.uniform(0.3, 1.2))
            worker.kill(signal.SIGKILL)
    worker.start()
    for name in ("vs-aio", "vs-rdk", "fs-rdk", "fs-aio"):
        worker.wait_running(name, 1)
    return appender.lines


@pytest.mark.parametrize("mode", list(KILLS))
async def test_exactly_once_through_sigkills_with_exactly_the_planned_acls(
    mode: str,
    secured_kafka: Callable[[str], Secured],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    secured = secured_kafka(mode)
    group = unique_name("sec")
    principal = await secured.user("worker")
    props = {
        **worker_props(secured.bootstrap, group, **{"offset.flush.interval.ms": "500"}),
        **SESSION,
        **secured.client_properties(principal),
    }
    files = [tmp_path / "fs-aio.txt", tmp_path / "fs-rdk.txt"]
    topics = [await secured.topic(unique_name(f"out-{i}"), 2) for i in range(4)]
    connectors = [
        vs("vs-aio", topics[0], "aiokafka"),
        vs("vs-rdk", topics[1], "librdkafka"),
        fs("fs-rdk", topics[2], files[1], "librdkafka"),
        fs("fs-aio", topics[3], files[0], "aiokafka"),
    ]
    await own_principals(secured, connectors)
    worker = WorkerProcess(tmp_path, props, connectors)
    admin = str(secured.admin_file)
    plan_args = ["acls", "grant", str(worker.worker_file), "--command-config", admin]
    plan_args += [arg for f in worker.connector_files for arg in ("--connector-config", str(f))]
    granted = eos(*plan_args)
    assert granted.returncode == 0, granted.stdout + granted.stderr
    checked = eos("acls", "check", *plan_args[2:])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ACLs of the plan are granted" in checked.stdout

    try:
        lines = await anyio.to_thread.run_sync(kill_again_and_again, worker, files, mode)
        for topic in topics[:2]:
            expect = str(2 * RECORDS)
            done = eos("verify", "--bootstrap-server", secured.bootstrap, "--command-config", admin,
                       "--topic", topic, "--expect", expect, "--timeout", "120")  # fmt: skip
            summary = re.search(
                r"records=(\d+) partitions=(\d+) duplicates=(\d+) gaps=(\d+)", done.stdout
            )
            assert summary, done.stdout + done.stderr
            assert summary.groups() == (str(2 * RECORDS), "2", "0", "0"), worker.tail()
        for topic in topics[2:]:
            values = await read_values(secured.admin, topic, lines, timeout=120)
            expected = [f"line-{n:07d}".encode() for n in range(lines)]
            duplicates = [v for v, n in Counter(values).items() if n > 1]
            assert (len(values), duplicates) == (lines, []), worker.tail()
            assert sorted(values) == expected
    finally:
        worker.stop()
    assert worker.starts == KILLS[mode] + 1


async def test_three_workers_on_sasl_ssl_ride_out_a_sigkill_and_a_sigstop(
    secured_kafka: Callable[[str], Secured],
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    secured = secured_kafka("sasl-ssl")
    group, topic = unique_name("sec3"), await secured.topic(unique_name("out"), 3)
    principal = await secured.user("cluster")
    login = {**secured.client_properties(principal), **SESSION}
    cluster = Cluster(tmp_path, secured.bootstrap, group, each=[login] * 3)
    connector = {**vs("vs", topic, "aiokafka"), "tasks.max": "3", "records.per.partition": "0",
                 "throughput": "200"}  # fmt: skip
    settings = worker_settings(cluster.workers[0].props)
    await secured.grant(plan(settings, {"vs": connector}, output_topics).least())
    run = anyio.to_thread.run_sync
    try:
        cluster.start()
        await run(cluster.put_connector, connector)
        placement = await run(cluster.placement, "vs", 3)
        victim = cluster.by_id(Counter(placement.values()).most_common(1)[0][0])
        victim.kill(signal.SIGKILL)
        placement = await run(cluster.placement, "vs", 3)
        assert cluster.worker_id(victim) not in placement.values()
        victim.start()
        placement = await run(cluster.placement, "vs", 3)
        stalled = cluster.by_id(sorted(placement.values())[0])
        stalled.kill(signal.SIGSTOP)
        await anyio.sleep(5)
        placement = await run(cluster.placement, "vs", 3)
        assert cluster.worker_id(stalled) not in placement.values()
        stalled.kill(signal.SIGCONT)
        await anyio.sleep(3)
        await run(cluster.placement, "vs", 3)
    finally:
        cluster.stop()
    result = await verify(secured.admin, topic, None, 60, {})
    assert (result.duplicates, result.gaps, result.unexpected) == (0, 0, 0), cluster.tails()
    assert result.partitions == 6
    assert result.records > 1000
