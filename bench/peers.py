"""eos next to its peers on one broker, one table: Kafka's own producer, Kafka Connect's
Java worker, and eos with each task producer (aiokafka, librdkafka).

Rows (100-byte records unless said):

  pp-txn / pp-plain   Kafka's ProducerPerformance (Java client) on its defaults, with 1 s
                      transactions and without: a user's first try of the Java client
  pp-txn-tuned        the same, transactional, at its best settings here
                      (batch.size=65536, linger.ms=5): the Java client's ceiling on this
                      machine and broker, the "vs ceiling" column
  connect-file-*      Kafka Connect's distributed worker (Java),
                      exactly.once.source.support=enabled, FileStreamSourceConnector
                      reading a file of ``--lines`` lines (poll / interval 1 s boundary)
  eos-file-*          the eos worker (its own process), FileSource on the same file, with
                      each producer (FileSource's defaults, as Connect's on its side);
                      FileSource hands its lines over in RecordBlocks (one per file read)
  eos-file-records-*  the same with LineRecordSource (bench/line_records.py): FileSource
                      handing over a SourceRecord per line, as a connector written against
                      the per-record API would (the typical connector path: a SourceRecord
                      per row through the JSON converter), poll boundary, each producer;
                      the row of the "records path >= 0.6 x pp-txn" target
  *-three             the same with a chain of three of Connect's transforms on both sides
                      (THREE: HoistField$Value, InsertField$Value, RegexRouter), compared
                      with the same row without it: what the chain costs end to end
  vs-*                eos VerifiableSource in a worker in this process: exactly-once with
                      interval 1 s, each producer, 1 and 4 tasks, 100 B and 1 KB; and
                      at-least-once, 1 task, 100 B (for the "eos >= 0.95 x alos" target);
                      each with output=records (a SourceRecord per record, JSON-converted,
                      commit_record overridden) and output=blocks (rows "-blocks": the same
                      bytes as RecordBlocks, nothing per record in Python but the encoding)

File rows are timed from the connector's creation (REST) to the last committed record:
the read_committed end offset (LSO) of the 1-partition output topic is sampled every
50 ms and the run ends when the last line of the file is the last committed record.
VerifiableSource rows are timed by the worker's observer, first poll to last commit.
CPU per record counts the measured process (JVM or eos worker; this process for vs-*)
and the broker over the timed span.

Every round runs every row; rounds alternate the order of the groups, so load from
elsewhere on the machine spreads over all of them. The table gives the median of the
rounds and every round.

``--before REV`` runs the eos file rows a second time on the code of commit REV (a git
worktree under .cache/bench-code/, its worker in a process of its own), in the same
rounds, as rows ending in ``@REV``: before and after a change, in one table.

The Java parts come from Maven Central (bench/peers-pom.xml) into .cache/peers/,
for the broker's version in deploy/kafka/pom.xml. Usage:

    python bench/peers.py [--bootstrap HOST:PORT] [--lines 2000000] [--records 1000000]
                          [--rounds 2] [--only pp,connect,eos,vs] [--rows SUBSTRING,...]

``--file-batch 1000,2000`` adds FileSource (and LineRecordSource) rows with those
``batch.size`` values beside its default (rows ``eos-file-*-batchN``). ``--only`` picks
groups; ``--rows`` keeps, within them, the rows whose name contains one of the substrings
(``--rows vs-eos-librdkafka-1t-100B,vs-alos-librdkafka-1t-100B``: VerifiableSource's rows
of the 0.95 x alos target, records and blocks; ``--rows pp-txn,eos-file-records``: the
rows of the records path's 0.6 x pp-txn target).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import httpx
from cpu_meter import CpuMeter, _descendants, _stat
from line_records import CLASS_PATH as LINE_RECORDS
from worker_run import (
    CACHE,
    REPO,
    bench_broker,
    bench_process,
    bench_settings,
    code_at,
    run_until_committed,
)

from eos.kafka import ClientConfig, make_consumer
from eos.kafka.admin import ensure_topic
from services.dev_kafka import free_ports

POM = REPO / "bench" / "peers-pom.xml"
SETTINGS = REPO / "bench" / "spark-kafka-settings.xml"
CLIENTS = ("aiokafka", "librdkafka")
OUTPUTS = ("records", "blocks")
"""VerifiableSource's ``output``: a row per output (blocks rows end in ``-blocks``)."""

Wanted = Callable[[str], bool]
"""Whether to run the row of this name (``--rows``)."""


def everything(name: str) -> bool:
    return True


def kafka_version() -> str:
    text = (REPO / "deploy" / "kafka" / "pom.xml").read_text()
    found = re.search(r"<kafka.version>([^<]+)</kafka.version>", text)
    assert found is not None
    return found.group(1)


def resolve_jars(version: str) -> Path:
    """kafka-tools, connect-runtime and connect-file (with what they need) in .cache/."""
    target = CACHE / "peers" / version
    if not (target / ".complete").exists():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(
                "mvn not found: install Apache Maven (Debian: apt-get install maven)"
            )
        subprocess.run(
            [mvn, "-q", "-B", "-s", str(SETTINGS), "-f", str(POM),
             f"-Dmaven.repo.local={CACHE / 'm2'}", f"-Dkafka.version={version}",
             "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={target}"],
            check=True,
        )  # fmt: skip
        (target / ".complete").touch()
    return target


def java(jars: Path, *args: str, heap: str = "1g") -> list[str]:
    return ["java", f"-Xmx{heap}", "-cp", f"{jars}/*", *args]


def create_topic(bootstrap: str, topic: str) -> None:
    config = ClientConfig({"bootstrap.servers": bootstrap})
    anyio.run(partial(ensure_topic, config, topic, partitions=1))


@dataclass
class Row:
    name: str
    records: int
    seconds: float
    nbytes: int
    cpu_us: float | None = None
    """CPU microseconds per record of the measured process."""
    broker_us: float | None = None

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def proc_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants."""
    total = 0.0
    for p in (pid, *_descendants(pid)):
        if (stat := _stat(p)) is not None:
            total += stat[1]
    return total


def brokers_cpu(pids: list[int]) -> float:
    return sum(proc_cpu(pid) for pid in pids)


# ------------------------------------------------------------- ProducerPerformance


TUNED = ("batch.size=65536", "linger.ms=5")
"""ProducerPerformance's best settings here (the ceiling row, ``pp-txn-tuned``)."""


def producer_performance(
    jars: Path, bootstrap: str, records: int, size: int, transactional: bool, brokers: list[int],
    tuned: bool = False,
) -> Row:  # fmt: skip
    topic = f"pp-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    args = [
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
        "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", *(TUNED if tuned else ()),
    ]  # fmt: skip
    if transactional:
        args += ["--transactional-id", topic, "--transaction-duration-ms", "1000"]
    before, broker0 = resource.getrusage(resource.RUSAGE_CHILDREN), brokers_cpu(brokers)
    done = subprocess.run(java(jars, *args), capture_output=True, text=True, check=True)
    after, broker1 = resource.getrusage(resource.RUSAGE_CHILDREN), brokers_cpu(brokers)
    last = [line for line in done.stdout.splitlines() if "records sent" in line][-1]
    found = re.search(r"([\d.]+) records/sec", last)
    assert found is not None, done.stdout
    rate = float(found.group(1))
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Row(
        ("pp-txn" if transactional else "pp-plain") + ("-tuned" if tuned else ""),
        records,
        records / rate,
        records * size,
        cpu / records * 1e6,  # the JVM's start-up included: an upper bound
        (broker1 - broker0) / records * 1e6,
    )


# ------------------------------------------------------------------ file sources


def lines_file(lines: int) -> tuple[Path, str]:
    """A file of ``lines`` lines of 100 bytes (newline included), and its last line."""
    path = CACHE / "peers-data" / f"lines-{lines}.txt"
    last = f"line-{lines - 1:012d}".ljust(99, "x")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as f:
            for n in range(lines):
                f.write(f"line-{n:012d}".ljust(99, "x") + "\n")
        tmp.rename(path)
    return path, last


async def wait_last_committed(
    bootstrap: str, topic: str, last_value: bytes, timeout: float
) -> float:
    """perf_counter() when the last committed record of ``topic`` (partition 0) holds
    ``last_value`` (the file's last line, whatever the transforms wrapped it in),
    watching the read_committed end offset."""
    from aiokafka import TopicPartition

    config = ClientConfig({"bootstrap.servers": bootstrap})
    consumer = make_consumer(config, isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    try:
        with anyio.fail_after(timeout):
            seen, changed = -1, time.perf_counter()
            while True:
                end = (await consumer.end_offsets([tp]))[tp]
                now = time.perf_counter()
                if end != seen:
                    seen, changed = end, now
                elif end > 0 and now - changed > 0.5:
                    consumer.seek(tp, max(0, end - 3))
                    batch = await consumer.getmany(tp, timeout_ms=2000)
                    values = [r.value for r in batch.get(tp, [])]
                    if values and values[-1] is not None and last_value in values[-1]:
                        return changed
                    changed = now  # not there yet: keep watching
                await anyio.sleep(0.05)
    finally:
        await consumer.stop()


@contextmanager
def process(
    cmd: list[str], log: Path, ready: str, env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
) -> Iterator[int]:  # fmt: skip
    """Run ``cmd`` (in ``cwd``) until the block ends; wait until ``ready`` (a URL) answers."""
    out = log.open("ab")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})}, cwd=cwd)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(ready, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ready} not ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()


def write_props(path: Path, props: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def internal_topics(group: str) -> dict[str, str]:
    return {
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
    }


def timed_file_run(
    url: str, pid: int, name: str, config: dict[str, str], bootstrap: str, brokers: list[int],
    lines: int, last: str, row: str,
) -> Row:  # fmt: skip
    """Create the connector, time it to its last committed record, delete it."""
    topic = config["topic"]
    create_topic(bootstrap, topic)
    if "transforms" in config:  # THREE renames the topic: watch the renamed one
        topic += RENAMED
        create_topic(bootstrap, topic)
    cpu0, broker0 = proc_cpu(pid), brokers_cpu(brokers)
    while True:  # 409: a rebalance (after the previous connector's deletion) is under way
        started = time.perf_counter()
        body = {"name": name, "config": config}
        response = httpx.post(f"{url}/connectors", json=body, timeout=60)
        if response.status_code not in (409, 503):
            break
        time.sleep(0.5)
    response.raise_for_status()
    finished = anyio.run(wait_last_committed, bootstrap, topic, last.encode(), 600.0)
    cpu1, broker1 = proc_cpu(pid), brokers_cpu(brokers)
    httpx.delete(f"{url}/connectors/{name}", timeout=60)
    return Row(
        row,
        lines,
        finished - started,
        lines * 99,
        (cpu1 - cpu0) / lines * 1e6,
        (broker1 - broker0) / lines * 1e6,
    )


CONNECT_SMT = "org.apache.kafka.connect.transforms."
RENAMED = "-t"
THREE = {
    "transforms": "hoist,stamp,route",
    "transforms.hoist.type": CONNECT_SMT + "HoistField$Value",
    "transforms.hoist.field": "line",
    "transforms.stamp.type": CONNECT_SMT + "InsertField$Value",
    "transforms.stamp.static.field": "src",
    "transforms.stamp.static.value": "file",
    "transforms.route.type": CONNECT_SMT + "RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "$1" + RENAMED,
}
"""The chain of the ``-three`` rows, the same settings on Connect and on eos: Kafka's
documentation's file-source example (each line a map with a ``line`` field, the source
stamped on it) and a RegexRouter. Each ``-three`` row is compared with its row without
the chain: what the chain costs."""
CHAINS = {"": {}, "-three": THREE}


def boundary(mode: str) -> dict[str, str]:
    if mode == "poll":
        return {"transaction.boundary": "poll"}
    return {"transaction.boundary": "interval", "transaction.boundary.interval.ms": "1000"}


def connect_rows(
    jars: Path, bootstrap: str, brokers: list[int], lines: int, work: Path,
    wanted: Wanted = everything,
) -> list[Row]:  # fmt: skip
    modes = [
        (mode, chain)
        for mode in ("poll", "interval")
        for chain in CHAINS
        if wanted(f"connect-file-{mode}{chain}")
    ]
    if not modes:
        return []
    path, last = lines_file(lines)
    (port,) = free_ports(1)
    group = f"connect-{uuid.uuid4().hex[:8]}"
    props = {
        "bootstrap.servers": bootstrap,
        **internal_topics(group),
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "exactly.once.source.support": "enabled",
        "listeners": f"http://127.0.0.1:{port}",
        "offset.flush.interval.ms": "10000",
    }
    worker = write_props(work / f"{group}.properties", props)
    url = f"http://127.0.0.1:{port}"
    rows = []
    cmd = java(jars, "org.apache.kafka.connect.cli.ConnectDistributed", str(worker))
    with process(cmd, work / "connect.log", f"{url}/connectors") as pid:
        for mode, chain in modes:
            name = f"file-{mode}-{uuid.uuid4().hex[:6]}"
            config = {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "file": str(path),
                "topic": f"{group}-{name}",
                "tasks.max": "1",
                **boundary(mode),
                **CHAINS[chain],
            }
            rows.append(timed_file_run(url, pid, name, config, bootstrap, brokers, lines, last,
                                       f"connect-file-{mode}{chain}"))  # fmt: skip
    return rows


FILE_SOURCES = {"": "FileSource", "records-": LINE_RECORDS}
"""The eos file rows' connectors by the row's kind: FileSource (its lines in blocks) and
LineRecordSource (a SourceRecord per line, rows ``eos-file-records-*``)."""
FILE_RUNS = (("", "poll"), ("records-", "poll"), ("", "interval"))
"""(kind, transaction boundary) of the eos file rows, for each producer."""


def file_row(kind: str, mode: str, client: str, batch: str, chain: str = "") -> str:
    return f"eos-file-{kind}{mode}-{client}{batch and '-batch' + batch}{chain}"


def eos_file_rows(
    bootstrap: str, brokers: list[int], lines: int, work: Path, wanted: Wanted = everything,
    batches: Sequence[str] = ("",), code: Path = REPO, label: str = "",
) -> list[Row]:  # fmt: skip
    """FileSource (and LineRecordSource) rows on the worker of the code in ``code``; rows
    of other code than this end in ``@label``."""
    suffix = f"@{label}" if label else ""
    runs = [
        (client, kind, mode, batch, chain)
        for client in CLIENTS
        for kind, mode in FILE_RUNS
        for batch in batches
        for chain in CHAINS
        if wanted(file_row(kind, mode, client, batch, chain) + suffix)
    ]
    if not runs:
        return []
    path, last = lines_file(lines)
    (port,) = free_ports(1)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    props = {
        "bootstrap.servers": bootstrap,
        **internal_topics(group),
        "offset.storage.partitions": "5",
        "status.storage.partitions": "1",
        "listeners": f"http://127.0.0.1:{port}",
    }
    worker = write_props(work / f"{group}.properties", props)
    url = f"http://127.0.0.1:{port}"
    rows = []
    cmd = [sys.executable, "-m", "services.cli", "worker", str(worker)]
    env = {"PYTHONPATH": str(code), "EOS_LOG_LEVEL": "WARNING"}  # bench.line_records too
    with process(cmd, work / f"eos{suffix}.log", f"{url}/connectors", env, code) as pid:
        for client, kind, mode, batch, chain in runs:
            name = f"file-{kind}{mode}-{client}-{uuid.uuid4().hex[:6]}"
            config = {
                "connector.class": FILE_SOURCES[kind],
                "path": str(path),
                "topic": f"{group}-{name}",
                "tasks.max": "1",
                "producer.client": client,
                **boundary(mode),
                **({"batch.size": batch} if batch else {}),
                **CHAINS[chain],
            }
            row = file_row(kind, mode, client, batch, chain) + suffix
            rows.append(timed_file_run(url, pid, name, config, bootstrap, brokers, lines,
                                       last, row))  # fmt: skip
    return rows


# ------------------------------------------------------------------ VerifiableSource


def vs_name(client: str, mode: str, size: int, tasks: int, output: str) -> str:
    suffix = "-blocks" if output == "blocks" else ""
    return f"vs-{mode}-{client}-{tasks}t-{size}B{suffix}"


async def verifiable(
    bootstrap: str, brokers: list[int], client: str, mode: str, size: int, tasks: int,
    records: int, output: str,
) -> Row:  # fmt: skip
    settings = bench_settings(
        bootstrap,
        "peers",
        {
            "offset.flush.interval.ms": "1000",
            "exactly.once.source.support": "disabled" if mode == "alos" else "enabled",
            "producer.client": client,
        },
    )
    topic = f"{settings.group_id}-out"
    await ensure_topic(settings.client_config, topic, partitions=tasks)
    per_task = records // tasks
    connector = {
        "name": "vs",
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "partitions.per.task": "1",
        "records.per.partition": str(per_task),
        "record.bytes": str(size),
        "batch.size": "1000",
        "output": output,
        **boundary("interval"),
    }
    from worker_run import Progress

    progress = Progress(target=per_task * tasks, cpu=CpuMeter(brokers))
    await run_until_committed(settings, connector, per_task * tasks, 600, progress=progress)
    if not progress.done.is_set():
        raise TimeoutError(f"vs {client} {mode}: not every record was committed in time")
    assert progress.cpu is not None
    used = progress.cpu.used()
    n = progress.committed
    name = vs_name(client, mode, size, tasks, output)
    return Row(name, n, progress.seconds, progress.nbytes, used["python"] / n * 1e6,
               used["broker"] / n * 1e6)  # fmt: skip


def vs_rows(
    bootstrap: str, brokers: list[int], records: int, wanted: Wanted = everything
) -> list[Row]:
    runs = [
        ("eos", size, tasks, client, output)
        for size in (100, 1000)
        for tasks in (1, 4)
        for client in CLIENTS
        for output in OUTPUTS
    ]
    runs += [("alos", 100, 1, client, output) for client in CLIENTS for output in OUTPUTS]
    rows = []
    for mode, size, tasks, client, output in runs:
        if not wanted(vs_name(client, mode, size, tasks, output)):
            continue
        count = records if size == 100 else records * 3 // 10
        rows.append(anyio.run(verifiable, bootstrap, brokers, client, mode, size, tasks, count,
                              output))  # fmt: skip
        print(f"  {rows[-1].name}: {rows[-1].rate:,.0f} rec/s", flush=True)
    return rows


# ------------------------------------------------------------------------ table


def median_rows(rounds: list[list[Row]]) -> dict[str, tuple[float, list[float], Row]]:
    by: dict[str, list[Row]] = {}
    for rows in rounds:
        for row in rows:
            by.setdefault(row.name, []).append(row)
    out = {}
    for name, rows in by.items():
        rates = [r.rate for r in rows]
        mid = sorted(rows, key=lambda r: r.rate)[len(rows) // 2]
        out[name] = (statistics.median(rates), rates, mid)
    return out


def table(rounds: list[list[Row]]) -> str:
    rows = median_rows(rounds)
    pp = rows.get("pp-txn", (None,))[0]
    ceiling = rows.get("pp-txn-tuned", (None,))[0]
    lines = [
        "| what | records/s (median) | rounds | MB/s | vs pp-txn | vs ceiling | vs peer "
        "| CPU µs/rec (process / broker) |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for name, (rate, rates, mid) in rows.items():
        mb = mid.nbytes / mid.seconds / 1e6
        vs_pp = f"{rate / pp:.2f}" if pp else ""
        vs_ceiling = f"{rate / ceiling:.2f}" if ceiling else ""
        peer = peer_of(name)
        vs_peer = f"{rate / rows[peer][0]:.2f} x {peer}" if peer in rows else ""
        cpu = "" if mid.cpu_us is None else f"{mid.cpu_us:.1f} / {mid.broker_us or 0:.1f}"
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(
            f"| {name} | {rate:,.0f} | {shown} | {mb:.1f} | {vs_pp} | {vs_ceiling} | {vs_peer} "
            f"| {cpu} |"
        )
    return "\n".join(lines)


def peer_of(name: str) -> str:
    """What a row is compared with: Connect for eos file rows, at-least-once (of the same
    producer and output) for the exactly-once VerifiableSource rows of 1 task and 100 B;
    a row of other code (``@REV``) has its own row's peer."""
    name, at, label = name.partition("@")
    if name.endswith("-three"):  # the same row without the chain: what the chain costs
        return name.removesuffix("-three") + at + label
    if name.startswith("eos-file-"):
        mode = name.removeprefix("eos-file-").removeprefix("records-").split("-")[0]
        return f"connect-file-{mode}"
    if name.startswith("vs-eos-") and name.removesuffix("-blocks").endswith("-1t-100B"):
        return name.replace("vs-eos-", "vs-alos-")
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--pp-records", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="pp,connect,eos,vs")
    parser.add_argument("--rows", default="", help="only rows whose name contains one of these")
    parser.add_argument(
        "--file-batch",
        default="",
        help="FileSource batch.size values to run beside its default (rows '-batchN')",
    )
    parser.add_argument(
        "--before", default="", help="also run the eos file rows on the code of this commit"
    )
    args = parser.parse_args()
    bench_process()
    wanted = args.only.split(",")
    patterns = [p for p in args.rows.split(",") if p]

    def row_wanted(name: str) -> bool:
        return not patterns or any(p in name for p in patterns)

    batches = ["", *(b for b in args.file_batch.split(",") if b)]
    jars = resolve_jars(kafka_version()) if {"pp", "connect"} & set(wanted) else Path()
    before = code_at(args.before) if args.before else REPO
    if args.before:
        wanted.append("before")
    lines_file(args.lines)
    work = Path(tempfile.mkdtemp(prefix="eos-peers-"))
    groups: dict[str, Callable[[str, list[int]], list[Row]]] = {
        "pp": lambda b, p: [
            producer_performance(jars, b, args.pp_records, 100, transactional, p, tuned)
            for transactional, tuned in ((True, False), (True, True), (False, False))
            if row_wanted(("pp-txn" if transactional else "pp-plain") + ("-tuned" * tuned))
        ],
        "connect": lambda b, p: connect_rows(jars, b, p, args.lines, work, row_wanted),
        "eos": lambda b, p: eos_file_rows(b, p, args.lines, work, row_wanted, batches),
        **(
            {
                "before": lambda b, p: eos_file_rows(
                    b, p, args.lines, work, row_wanted, batches, before, args.before
                )
            }
            if args.before
            else {}
        ),
        "vs": lambda b, p: vs_rows(b, p, args.records, row_wanted),
    }
    rounds: list[list[Row]] = []
    with bench_broker(args.bootstrap, heap="1g") as (bootstrap, brokers):
        for n in range(args.rounds):
            order = [g for g in groups if g in wanted]
            if n % 2:
                order.reverse()
            rows: list[Row] = []
            for group in order:
                print(f"round {n + 1}: {group}", flush=True)
                got = groups[group](bootstrap, brokers)
                for row in got:
                    print(f"  {row.name}: {row.rate:,.0f} rec/s", flush=True)
                rows += got
            rounds.append(rows)
            print(table(rounds), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()}")
    print(table(rounds))


if __name__ == "__main__":
    main()
