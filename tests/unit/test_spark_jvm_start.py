"""Starting Spark's JVM: one resolution at a time on a fresh Ivy cache, and nothing left
behind by a JVM that failed to start."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from services.connectors.spark.session import _end_abandoned_jvm, _resolving_packages


def _conf(ivy: Path, packages: str = "io.delta:delta-spark_2.13:4.0.0") -> dict[str, str]:
    return {"spark.jars.packages": packages, "spark.jars.ivy": str(ivy)}


def test_a_second_start_waits_for_the_first_resolution_of_the_same_packages(
    tmp_path: Path,
) -> None:
    order: list[str] = []
    first_in = threading.Event()

    def second() -> None:
        first_in.wait()
        with _resolving_packages(_conf(tmp_path)):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with _resolving_packages(_conf(tmp_path)):
        first_in.set()
        time.sleep(0.3)
        order.append("first")
    thread.join()
    assert order == ["first", "second"]


def test_once_resolved_a_start_takes_no_lock(tmp_path: Path) -> None:
    with _resolving_packages(_conf(tmp_path)):
        pass
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:  # another set of packages, resolving for the first time
        with _resolving_packages(_conf(tmp_path, "org.example:other:1")):
            held.set()
            release.wait()

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait()
    try:
        entered = []
        with _resolving_packages(_conf(tmp_path)):
            entered.append(True)
        assert entered == [True]
    finally:
        release.set()
        thread.join()


def test_a_failed_start_leaves_no_marker(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), _resolving_packages(_conf(tmp_path)):
        raise RuntimeError("unresolved dependency")
    assert not list(tmp_path.glob(".eos-resolved-*"))


def test_no_packages_no_lock(tmp_path: Path) -> None:
    with _resolving_packages({"spark.jars.ivy": str(tmp_path)}):
        pass
    assert list(tmp_path.iterdir()) == []


def _launch_that_fails() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)  # fmt: skip
    assert proc.poll() is None
    raise RuntimeError("Java gateway process exited before sending its port number")


def test_the_process_a_failed_launch_left_is_ended_and_its_pipe_closed() -> None:
    with pytest.raises(RuntimeError) as caught:
        _launch_that_fails()
    _end_abandoned_jvm(caught.value)
    trace = caught.value.__traceback__
    while trace is not None and "proc" not in trace.tb_frame.f_locals:
        trace = trace.tb_next
    assert trace is not None
    proc = trace.tb_frame.f_locals["proc"]
    assert proc.stdin.closed
    assert proc.returncode == 0
