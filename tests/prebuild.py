"""The session's slow builds, started in the background as soon as the tests are collected.

helm (``go install``, about 4 minutes on 2 cores) and the worker's container images (for
each, a Debian base with mmdebstrap, then the worker's layers: about 3 minutes) are built
once and cached in ``.cache/``; on a fresh checkout (CI) the tests that need them would wait for
both builds in turn. When such tests are selected, :func:`start` builds them in processes
of their own at the lowest CPU and I/O priority, so they take what the other tests leave
idle (those mostly wait on brokers, workers and JVMs), and :func:`last` moves the tests
that need them to the end of the run. The fixtures call the same builders, which take a
lock: they wait for a build still under way and then find its result in the cache, or
build themselves (and report the failure) if the background build failed.

Spark's class-data-sharing archive (:mod:`tests.spark_cds`, about a minute) is built the
same way when tests that start Spark are selected; those are not moved, since a JVM that
starts before the archive is there starts as it would without it.

The container tools are installed from Debian before the image build goes to the
background, in the foreground, so that no two ``apt-get`` runs overlap.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests import spark_cds
from tests.scripts import REPO, load_script

IMAGE_TAG = "localhost/eos:latest"
SLIM_TAG = "localhost/eos:slim"
HELM_TESTS = "test_kubernetes.py"
IMAGE_FIXTURES = ("eos_image", "eos_slim_image")
SPARK_GLOBALS = ("SPARK", "SPARK_SETTINGS", "spark_resources")
"""A test module with one of these starts Spark (a worker's or its own session)."""

_jobs: list[subprocess.Popen[bytes]] = []
PIDS = "prebuild.pids"
"""The builds' process ids, in the log directory: with parallel workers (pytest-xdist)
the first worker starts them and the controller, which outlives every worker, ends them."""


def _needs(item: pytest.Item) -> set[str]:
    needs = set()
    if item.path.name == HELM_TESTS:
        needs.add("helm")
    if set(IMAGE_FIXTURES) & set(getattr(item, "fixturenames", ())):
        needs.add("image")
    module = getattr(item, "module", None)
    if any(hasattr(module, name) for name in SPARK_GLOBALS):
        needs.add("spark-cds")
    return needs


def last(items: list[pytest.Item]) -> None:
    """Move the tests that need a build to the end (in their order), so the builds have
    the whole run to finish in."""
    items.sort(key=lambda item: bool(_needs(item) - {"spark-cds"}))  # stable otherwise


def start(items: Sequence[pytest.Item], log_dir: Path) -> None:
    """Start the builds the selected ``items`` need and the cache does not hold yet."""
    needs = set().union(*map(_needs, items)) if items else set()
    (log_dir / PIDS).unlink(missing_ok=True)
    if "helm" in needs and not load_script("deploy/kubernetes/build_manifests.py").HELM.exists():
        _spawn("helm", "import runpy; runpy.run_path('deploy/kubernetes/build_manifests.py',"
               " run_name='prebuild')['ensure_helm']()", log_dir)  # fmt: skip
    if "image" in needs:
        builder = load_script("deploy/image/build_image.py")
        builder.ensure_tools()
        _spawn("image", f"import runpy; build = runpy.run_path('deploy/image/build_image.py',"
               f" run_name='prebuild')['build']; build({IMAGE_TAG!r});"
               f" build({SLIM_TAG!r}, variant='slim')", log_dir)  # fmt: skip
    if "spark-cds" in needs and not spark_cds.ARCHIVE.exists():
        _spawn("spark-cds", "from tests import spark_cds; spark_cds.build()", log_dir)


def _spawn(name: str, code: str, log_dir: Path) -> None:
    idle = ["nice", "-n", "19", *(["ionice", "-c", "3"] if shutil.which("ionice") else [])]
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (log_dir / f"prebuild-{name}.log").open("wb") as out:
        job = subprocess.Popen(
            [*idle, sys.executable, "-c", code],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )  # fmt: skip
    _jobs.append(job)
    with (log_dir / PIDS).open("a") as pids:
        pids.write(f"{job.pid}\n")


def stop(log_dir: Path) -> None:
    """End builds still running (a run stopped early, or the tests deselected): this
    process's, and those a parallel worker started."""
    for job in _jobs:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
    _jobs.clear()
    recorded = log_dir / PIDS
    for line in recorded.read_text().split() if recorded.exists() else ():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(line), signal.SIGTERM)  # its own session: the group is its pid
    recorded.unlink(missing_ok=True)
