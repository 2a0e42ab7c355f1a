"""Many tasks on one worker: how long a connector of N exactly-once tasks needs to
reach RUNNING, and what the worker then costs (RSS, CPU, file descriptors, committed
transactions per second, CPU per committed transaction), one row per N, in a table.

Each row is a fresh ``eos worker`` process (the real command, measured through
``/proc``) on one local broker; one VerifiableSource connector with N tasks at
``--rate`` records/s per task, ``transaction.boundary=interval`` 1 s, is created over
REST and timed from the PUT until every task reports RUNNING. The steady state is then
measured over ``--window`` seconds. A last row runs the largest N idle (each task
writes one record, then its polls return nothing): that is what idle tasks cost.

    python bench/scale.py [--tasks 10,100,300,1000] [--rate 10] [--window 30]
                          [--long-window 600] [--bootstrap HOST:PORT] [--keep-logs]
                          [--set producer.client=librdkafka ...] [--py-spy DIR]

``--long-window`` applies to the largest N (the issue asks for 10 minutes at 1
record/s per task there; ``--long-window 0`` uses ``--window``). A row fails loudly if
any task reports FAILED.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
from worker_run import bench_broker

from tests.integration.worker_harness import WorkerProcess, worker_props

CONNECTOR = "scale"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    tasks: int
    rate: float
    to_running: float
    rss_mb: float
    cpu_cores: float
    sys_share: float
    """The part of the CPU spent in the kernel (socket writes reach the broker there)."""
    fds: int
    txn_per_s: float
    window: float
    failed: int

    @property
    def cpu_ms_per_txn(self) -> float:
        return 1000 * self.cpu_cores / self.txn_per_s if self.txn_per_s else float("nan")


def proc_cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS  # utime, stime


def proc_rss_mb(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


COMMITTED = re.compile(r"^eos_task_transactions_committed_total\{[^}]*\} (\S+)$", re.M)


def committed(http: httpx.Client, url: str) -> float:
    return sum(float(v) for v in COMMITTED.findall(http.get(f"{url}/metrics").text))


def wait_rest(http: httpx.Client, worker: WorkerProcess, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert worker.alive(), worker.tail()
        try:
            if http.get(f"{worker.rest_url}/").json()["cluster"]["leader_url"]:
                return  # joined: writes are served
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"worker REST not up within {timeout}s\n{worker.tail()}")


def task_states(http: httpx.Client, url: str) -> list[str]:
    try:
        body = http.get(f"{url}/connectors/{CONNECTOR}/status").json()
    except (httpx.HTTPError, ValueError):
        return []
    return [t["state"] for t in body.get("tasks", [])]


def one_row(
    bootstrap: str,
    home: Path,
    tasks: int,
    rate: float,
    window: float,
    idle: bool,
    extra: dict[str, str],
    profile: Path | None = None,
) -> Row:
    group = f"scale-{uuid.uuid4().hex[:8]}"
    props = {**worker_props(bootstrap, group, offset_storage_partitions="25"), **extra}
    worker = WorkerProcess(home, props, [])
    config = {
        "connector.class": "VerifiableSource",
        "tasks.max": str(tasks),
        "topic": f"{group}-out",
        "throughput": str(rate),
        "records.per.partition": "1" if idle else "0",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "1000",
    }
    worker.start()
    assert worker.proc is not None
    pid = worker.proc.pid
    try:
        with httpx.Client(timeout=30) as http:
            wait_rest(http, worker)
            started = time.monotonic()
            answer = http.put(f"{worker.rest_url}/connectors/{CONNECTOR}/config", json=config)
            assert answer.status_code in (200, 201), answer.text
            while True:
                states = task_states(http, worker.rest_url)
                if len(states) == tasks and all(s == "RUNNING" for s in states):
                    break
                if "FAILED" in states:
                    raise SystemExit(f"a task FAILED while starting\n{worker.tail()}")
                if time.monotonic() - started > 600:
                    raise SystemExit(f"not RUNNING within 600 s: {states.count('RUNNING')}")
                time.sleep(0.2)
            to_running = time.monotonic() - started
            time.sleep(min(10.0, window / 3))  # warm-up: first transactions, allocations
            cpu0, txn0, t0 = proc_cpu_seconds(pid), committed(http, worker.rest_url), time.time()
            spy = None if profile is None else py_spy(pid, window, profile)
            time.sleep(window)
            if spy is not None:
                spy.wait()
            cpu1, txn1, t1 = proc_cpu_seconds(pid), committed(http, worker.rest_url), time.time()
            user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
            states = task_states(http, worker.rest_url)
            return Row(
                tasks=tasks,
                rate=0.0 if idle else rate,
                to_running=to_running,
                rss_mb=proc_rss_mb(pid),
                cpu_cores=(user + system) / (t1 - t0),
                sys_share=system / (user + system) if user + system else 0.0,
                fds=proc_fds(pid),
                txn_per_s=(txn1 - txn0) / (t1 - t0),
                window=t1 - t0,
                failed=states.count("FAILED"),
            )
    finally:
        worker.stop()


def py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """Sample the worker with py-spy (raw, collapsed stacks) while the window runs;
    its own CPU is not the worker's, so the measured numbers stay comparable. Only samples
    taken while the worker holds the GIL count: Python's CPU, not time in a system call."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    cmd = [
        spy,
        "record",
        "-p",
        str(pid),
        "-d",
        str(int(seconds)),
        "-r",
        "100",
        "-f",
        "raw",
        "--nonblocking",
        "--gil",
    ]
    return subprocess.Popen([*cmd, "-o", str(out)], stdout=subprocess.DEVNULL)


def table(rows: list[Row]) -> str:
    lines = [
        "| tasks | records/s per task | seconds to RUNNING | RSS MB | RSS per task MB "
        "| CPU cores | of it kernel | fds | transactions/s | CPU ms per transaction "
        "| window s | FAILED |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.tasks} | {'idle' if r.rate == 0 else f'{r.rate:g}'} | {r.to_running:.1f} "
            f"| {r.rss_mb:.0f} | {r.rss_mb / r.tasks:.2f} | {r.cpu_cores:.2f} | {r.sys_share:.0%} "
            f"| {r.fds} "
            f"| {r.txn_per_s:.0f} | {r.cpu_ms_per_txn:.2f} | {r.window:.0f} | {r.failed} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="10,100,300,1000")
    parser.add_argument("--rate", type=float, default=10.0, help="records/s per task")
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--long-window", type=float, default=600.0)
    parser.add_argument("--long-rate", type=float, default=1.0)
    parser.add_argument("--no-idle", action="store_true")
    parser.add_argument("--bootstrap")
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--py-spy", type=Path, metavar="DIR",
        help="profile each row's measured window with py-spy (collapsed stacks in DIR)",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a worker setting, e.g. --set producer.client=librdkafka (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.set)
    counts = [int(n) for n in args.tasks.split(",")]
    root = Path(tempfile.mkdtemp(prefix="eos-scale-"))
    rows: list[Row] = []
    with bench_broker(args.bootstrap, heap="2g") as (bootstrap, _):
        for i, n in enumerate(counts):
            largest = i == len(counts) - 1
            window = args.long_window if largest and args.long_window else args.window
            rate = args.long_rate if largest and args.long_window else args.rate
            home = root / f"row-{n}"
            home.mkdir()
            spy = None if args.py_spy is None else args.py_spy / f"worker-{n}.txt"
            if spy is not None:
                spy.parent.mkdir(parents=True, exist_ok=True)
            rows.append(one_row(bootstrap, home, n, rate, window, False, extra, spy))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
        if not args.no_idle:
            home = root / "idle"
            home.mkdir()
            last = one_row(bootstrap, home, counts[-1], 0, args.window, idle=True, extra=extra)
            rows.append(last)
    load = os.getloadavg()
    print()
    settings = " ".join(args.set) or "defaults"
    print(f"eos worker ({settings}), one broker on loopback, {os.cpu_count()} CPUs, "
          f"load {load[0]:.1f}")  # fmt: skip
    print(table(rows))
    if args.keep_logs:
        print(f"logs: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    if any(r.failed for r in rows):
        raise SystemExit("some tasks FAILED")


if __name__ == "__main__":
    main()
