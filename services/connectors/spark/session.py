"""The Spark session: one per worker, created lazily, stopped when the worker stops.

The worker's ``spark.*`` plugin settings configure it: ``spark.master`` (default
``local[*]``; a cluster URL works unchanged), ``spark.app.name`` (default
``eos-worker``), ``spark.lakehouse`` (Delta Lake and Iceberg, see :mod:`.lakehouse`)
and any other ``spark.*`` key, passed through to the builder.
Arrow transfer to Python is always on. With a ``local`` master the driver binds to
127.0.0.1 unless ``spark.driver.host`` / ``spark.driver.bindAddress`` say otherwise,
and the JVM is started with ``SPARK_LOCAL_IP`` set to that address (unless the
environment sets it), so that it does not look up the machine's host name and warn
"Your hostname ... resolves to a loopback address" on every start; with a cluster
master, likewise when ``spark.driver.bindAddress`` is set. A standalone master
(``spark://``) must accept a connection before the JVM starts
(:func:`check_master_reachable`).

Each task works in its own :meth:`~pyspark.sql.SparkSession.newSession`: the same
SparkContext (JVM, executors, cache), but SQL settings of its own, so the reader
settings a task needs (:func:`task_session`) never leak into the worker's session.

**The JVM runs in a session (and process group) of its own** (:func:`_jvm_of_its_own`).
A signal to the worker's whole process group — systemd without ``KillMode=mixed``,
``timeout``, a terminal's Ctrl-C, many container runtimes — then reaches the worker
alone, which stops its tasks first and Spark after them; killed first, the JVM would
fail the running Spark tasks during the stop. It still ends with the worker: PySpark's
gateway exits when its standard input, a pipe from the worker, closes — at a normal
exit the worker closes it and waits for the JVM (:func:`_stop_jvm`), and after a
SIGKILL the kernel closes it.

Every function here blocks: call it through ``resources.run_blocking``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from eos.api import WorkerResources
from services.connectors.spark.jdbc_drivers import driver_settings
from services.connectors.spark.lakehouse import lakehouse_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHARED_KEY = "spark.session"
JVM_EXIT_TIMEOUT = 10.0
"""Seconds the JVM gets to exit once its standard input is closed (then it is killed)."""
ARCHIVING_EXIT_TIMEOUT = 300.0
"""The same for a JVM told to write a class-data-sharing archive as it exits
(``-XX:ArchiveClassesAtExit`` in ``spark.driver.extraJavaOptions``, see docs/spark.md):
writing it takes a minute on 2 cores."""
_lock = threading.Lock()
log = structlog.get_logger(__name__)


class SparkUnavailable(RuntimeError):
    """Spark cannot start on this worker (no Java, no pyspark, or the JVM failed).
    The message says what to install or fix."""


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise SparkUnavailable(
            "Spark needs Java (17 or 21) and none was found: install a JDK or JRE "
            "(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
        )


def builder_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The Spark settings the session is built with, from the worker's settings."""
    conf = {k: str(v) for k, v in settings.items() if k.startswith("spark.")}
    conf = lakehouse_settings(conf, os.environ)
    conf = driver_settings(conf, os.environ)
    conf.setdefault("spark.master", "local[*]")
    conf.setdefault("spark.app.name", "eos-worker")
    conf["spark.sql.execution.arrow.pyspark.enabled"] = "true"
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    if conf["spark.master"].startswith("local"):
        conf.setdefault("spark.driver.host", "127.0.0.1")
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
    return conf


def jvm_environment(conf: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Environment variables the Spark JVM needs beyond ``environ``: ``SPARK_LOCAL_IP``,
    the driver's bind address, for a local master or when ``spark.driver.bindAddress``
    is set (a cluster's driver), unless ``environ`` has one."""
    if "SPARK_LOCAL_IP" in environ:
        return {}
    bind = conf.get("spark.driver.bindAddress")
    if bind is None and not conf["spark.master"].startswith("local"):
        return {}
    return {"SPARK_LOCAL_IP": bind or "127.0.0.1"}


def create_session(settings: Mapping[str, str]) -> SparkSession:
    """A new (or the process's existing) SparkSession; :class:`SparkUnavailable` if none."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailable(
            f"pyspark is not installed ({exc}): install eos with the spark extra, "
            "`pip install 'eos[spark]'`"
        ) from exc
    _check_java()
    conf = builder_settings(settings)
    check_master_reachable(conf["spark.master"])
    os.environ.update(jvm_environment(conf, os.environ))
    try:
        _jvm_of_its_own(conf)
    except Exception as exc:
        raise _failed("Spark's JVM", exc, conf) from exc
    builder = SparkSession.builder.master(conf.pop("spark.master")).appName(
        conf.pop("spark.app.name")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:
        raise _failed("Spark", exc, conf) from exc


def _failed(what: str, exc: Exception, conf: Mapping[str, str]) -> SparkUnavailable:
    """Spark did not start: the settings to check, the jars to resolve among them (the
    JVM resolves ``spark.jars.packages`` as it starts)."""
    packages = conf.get("spark.jars.packages")
    jars = (
        f"; that the jars of spark.jars.packages ({packages}, from spark.jdbc.drivers, "
        "spark.lakehouse or set directly) can be resolved from Maven Central: the log "
        "above names any 'unresolved dependency'"
        if packages
        else ""
    )
    return SparkUnavailable(
        f"{what} failed to start: {exc}. Check the worker's spark.* settings "
        f"(spark.master, memory){jars}; and that Java 17 or 21 is installed"
    )


MASTER_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a TCP connection to a standalone master before giving up."""


def check_master_reachable(master: str, timeout: float = MASTER_CONNECT_TIMEOUT) -> None:
    """:class:`SparkUnavailable` unless a standalone master (``spark://host:port``, or
    several ``host:port`` separated by commas) accepts a TCP connection on one of its
    addresses. Spark itself would retry registering for a minute, then stop the context
    with a log line nobody sees; other masters (local, yarn, k8s) are not checked."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            errors.append(f"{address.strip()}: {exc}")
    raise SparkUnavailable(
        f"the Spark master in spark.master={master} cannot be reached "
        f"({'; '.join(errors)}): start the master, or correct the worker setting spark.master"
    )


def _jvm_of_its_own(conf: Mapping[str, str]) -> None:
    """Start PySpark's JVM (gateway) in a session of its own, with the settings the
    session is built with, unless one runs in this process already.

    PySpark starts it as the worker's child in the worker's process group (it keeps
    only SIGINT from it); ``launch_gateway`` takes ``Popen`` arguments, so the JVM is
    launched here with ``start_new_session`` and handed to ``SparkContext`` as
    ``_ensure_initialized`` would (the one place that touches PySpark's private class
    attributes; ``tests/integration/test_spark_session_output.py`` checks the contract)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        spark_conf = SparkConf()  # no JVM yet: a plain mapping, passed as --conf
        spark_conf.setAll(list(conf.items()))
        try:
            with _resolving_packages(conf):
                gateway = launch_gateway(  # type: ignore[no-untyped-call]
                    spark_conf, popen_kwargs={"start_new_session": True}
                )
        except Exception as exc:
            _end_abandoned_jvm(exc)
            raise
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    archiving = "-XX:ArchiveClassesAtExit" in conf.get("spark.driver.extraJavaOptions", "")
    atexit.register(_stop_jvm, gateway, ARCHIVING_EXIT_TIMEOUT if archiving else JVM_EXIT_TIMEOUT)


@contextlib.contextmanager
def _resolving_packages(conf: Mapping[str, str]) -> Iterator[None]:
    """Hold a lock on the ``spark.jars.ivy`` cache while a JVM resolves packages the
    cache has not seen start a JVM yet.

    Spark's resolver (Ivy) takes no lock of its own: two JVMs filling one cache at once
    read each other's half-written files, and one fails with "unresolved dependency"
    (seen with two workers, or a worker and the tests' archive build, starting on a
    fresh cache). Once a JVM started with a set of packages, a marker in the cache says
    so, and later starts resolve from the filled cache without waiting."""
    packages, ivy = conf.get("spark.jars.packages"), conf.get("spark.jars.ivy")
    if not packages or not ivy:
        yield
        return
    wanted = "|".join(conf.get(k, "") for k in ("spark.jars.packages", "spark.jars.excludes",
                                                "spark.jars.repositories"))  # fmt: skip
    marker = Path(ivy) / f".eos-resolved-{hashlib.sha256(wanted.encode()).hexdigest()[:16]}"
    if marker.exists():
        yield
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    with (marker.parent / ".eos-resolve.lock").open("a") as lock:  # freed with the process
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
        marker.touch()


def _end_abandoned_jvm(exc: BaseException) -> None:
    """End the JVM process a failed ``launch_gateway`` left behind: its ``Popen``, with
    the pipe to the JVM's standard input, is only in that function's frame, which the
    exception's traceback still holds; left to the garbage collector, the pipe would be
    closed there, with a ResourceWarning, at any later point."""
    trace = exc.__traceback__
    while trace is not None:
        proc = trace.tb_frame.f_locals.get("proc")
        if isinstance(proc, subprocess.Popen):
            _end_process(proc, JVM_EXIT_TIMEOUT)
        trace = trace.tb_next


def _stop_jvm(gateway: Any, timeout: float = JVM_EXIT_TIMEOUT) -> None:
    """At the worker's exit: close the JVM's standard input (it exits on that) and wait
    for it, at most ``timeout`` seconds, then kill it."""
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    _end_process(proc, timeout)


def _end_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_session(session: SparkSession) -> None:
    session.stop()
    forget_deleted_jars()
    log.info("spark session stopped")


def forget_deleted_jars() -> None:
    """Drop the ``sys.path`` entries PySpark added for the session's jars (its temporary
    ``userFiles-*`` directory) once that directory is gone: their cached zip importers
    would otherwise fail later imports with FileNotFoundError (the Delta jar, for one,
    holds a ``delta`` package)."""
    gone = [entry for entry in sys.path if "userFiles-" in entry and not os.path.exists(entry)]
    for entry in gone:
        sys.path.remove(entry)
        sys.path_importer_cache.pop(entry, None)


def worker_session(resources: WorkerResources) -> SparkSession:
    """The worker's shared session, created on first use (blocking)."""
    with _lock:
        return resources.shared(
            SHARED_KEY, lambda: create_session(resources.settings), stop_session
        )


def task_session(
    resources: WorkerResources, *, arrow_batch_rows: int, single_split: bool = False
) -> SparkSession:
    """A child session for one task's reads (blocking).

    ``arrow_batch_rows`` caps every Arrow batch handed to Python. ``single_split``
    makes every file one input partition (never split by bytes), which is how
    rows of csv, json and orc files get a deterministic index (see files_mode).
    """
    session = worker_session(resources).newSession()
    session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(arrow_batch_rows))
    # Partition sizes are chosen by the reader; adaptive execution must not merge them.
    session.conf.set("spark.sql.adaptive.enabled", "false")
    if single_split:
        session.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 62))
        session.conf.set("spark.sql.files.minPartitionNum", "1")
    return session
