"""The Spark JVM of a worker starts quietly: with a local master it is told its
address (``SPARK_LOCAL_IP``), so it does not warn on every start that the machine's
host name resolves to a loopback address (as it does on many laptops and CI hosts).
It runs in a session of its own (a signal to the worker's process group does not
reach it) and still ends with the worker: at a normal exit, and after a SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration.worker_harness import REPO, process_alive, wait_gone

pytestmark = pytest.mark.integration

SCRIPT = """
import os, sys
from pyspark import SparkContext
from services.connectors.spark.session import create_session
session = create_session({"spark.master": "local[1]"})
print("rows", session.range(3).count())
jvm = SparkContext._gateway.proc.pid
print("jvm", jvm, "own session", os.getsid(jvm) != os.getsid(0), flush=True)
session.stop()
if len(sys.argv) > 1:  # wait to be killed
    sys.stdin.read()
"""


def jvm_of(output: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith("jvm "))
    assert line.endswith("own session True"), line
    return int(line.split()[1])


def test_a_local_session_does_not_warn_about_the_host_name() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows 3" in done.stdout
    output = done.stdout + done.stderr
    assert "resolves to a loopback address" not in output
    assert "Set SPARK_LOCAL_IP" not in output
    wait_gone([jvm_of(done.stdout)], 1, "Spark JVM")  # the worker stopped it before it exited


def test_the_jvm_dies_with_a_killed_worker() -> None:
    """SIGKILL leaves no time to stop anything: the JVM, in a session of its own, ends
    because its standard input (a pipe from the worker) closes."""
    with subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "wait"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO,
        text=True,
    ) as worker:  # fmt: skip
        try:
            assert worker.stdout is not None
            lines = [worker.stdout.readline() for _ in range(2)]
            jvm = jvm_of("".join(lines))
            assert process_alive(jvm)
            worker.kill()
            worker.wait(timeout=10)
            wait_gone([jvm], 10, "Spark JVM")
        finally:
            worker.kill()


RESTART = """
import sys
from services.connectors.spark import lakehouse
from services.connectors.spark.session import create_session, stop_session
for _ in range(2):  # a worker's session may stop and start again (a bench does)
    session = create_session({"spark.master": "local[1]", "spark.lakehouse": "delta"})
    session.range(3).count()
    stop_session(session)
    print("extra", lakehouse.extra_problem("delta"))
"""


def test_a_stopped_lakehouse_session_leaves_imports_working() -> None:
    """PySpark puts the session's jars (the Delta jar holds a ``delta`` package) on
    sys.path; after the session stops they are deleted, and a cached zip importer would
    fail the next ``find_spec('delta')`` with FileNotFoundError."""
    done = subprocess.run(
        [sys.executable, "-c", RESTART],
        capture_output=True, text=True, cwd=REPO, timeout=400, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("extra None") == 2, done.stdout
