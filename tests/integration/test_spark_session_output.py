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
