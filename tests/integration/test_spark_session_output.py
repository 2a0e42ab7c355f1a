"""The Spark JVM of a worker starts quietly: with a local master it is told its
address (``SPARK_LOCAL_IP``), so it does not warn on every start that the machine's
host name resolves to a loopback address (as it does on many laptops and CI hosts)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration.worker_harness import REPO

pytestmark = pytest.mark.integration

SCRIPT = """
from services.connectors.spark.session import create_session
session = create_session({"spark.master": "local[1]"})
print("rows", session.range(3).count())
session.stop()
"""


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
