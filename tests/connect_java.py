"""Kafka Connect's own Java classes for tests that compare eos's bytes with theirs:
connect-json and what it needs (connect-api, kafka-clients), resolved with Maven from
Maven Central into ``.cache/`` once, and small single-file Java programs run on them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from services.dev_kafka import cache_dir
from services.dev_registry import find_java

HERE = Path(__file__).parent / "integration" / "connect_json"
VERSION = "4.3.1"


def connect_classpath() -> str:
    """The classpath (``dir/*``) of connect-json's runtime dependencies."""
    libs = cache_dir() / "connect-json" / VERSION
    if not (libs / ".complete").exists():
        mvn = shutil.which("mvn")
        assert mvn, "mvn is needed to fetch Kafka Connect's classes"
        subprocess.run(
            [mvn, "-q", "-B", "-f", str(HERE / "pom.xml"),
             f"-Dmaven.repo.local={cache_dir() / 'm2'}",
             f"-Dkafka.version={VERSION}", "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={libs}"],
            check=True, capture_output=True,
        )  # fmt: skip
        (libs / ".complete").touch()
    return f"{libs}/*"


def run_java(classpath: str, program: str, lines: str, *args: str) -> str:
    """Run ``connect_json/<program>`` with ``lines`` on stdin; its stdout."""
    done = subprocess.run(
        [str(find_java()), "-cp", classpath, str(HERE / program), *args],
        input=lines, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout
