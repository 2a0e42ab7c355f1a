"""A class-data-sharing archive for the Spark JVMs the tests start again and again.

A Spark driver JVM with both lakehouse jars loads about 30 000 classes before the first
read returns; on 2 cores parsing and verifying them is several seconds of every start.
The JDK can write the classes a run loaded into an archive (``-XX:ArchiveClassesAtExit``)
and map it at the next start (``-XX:SharedArchiveFile``): the crash tests restart a Spark
worker dozens of times a run. :func:`build` runs a short workload of the reads the tests
make (Parquet, JSON, CSV, Delta's change feed, Iceberg's changelog) in a JVM of its own
and keeps the archive in ``.cache/spark-cds/``, named after what it depends on (the Java
binary, pyspark, delta-spark and the Iceberg runtime's version), so that a new version of
any of them builds a new one. :data:`JAVA_OPTIONS` names it in the tests' driver options.

Nothing depends on it being there: a JVM that finds no archive (not built yet, or the build
failed) or one of another JDK starts as before, without a word (``-Xlog:cds=off``).
``docs/spark.md`` shows a user how to do the same for a worker.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from services.connectors.spark.lakehouse import ICEBERG_VERSION
from tests.scripts import REPO

CACHE = REPO / ".cache" / "spark-cds"


def _key() -> str:
    home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(home, "bin") if home else None)
    java_id = ""
    if java:
        real = os.path.realpath(java)
        java_id = f"{real}:{os.stat(real).st_mtime_ns}"
    versions = []
    for dist in ("pyspark", "delta-spark"):
        try:
            versions.append(importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            versions.append("-")
    text = "|".join([java_id, *versions, ICEBERG_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


ARCHIVE = CACHE / f"spark-{_key()}.jsa"
JAVA_OPTIONS = f"-XX:SharedArchiveFile={ARCHIVE} -Xlog:cds=off -Xlog:cds+dynamic=off"
"""Driver JVM options that map the archive when it exists, and say nothing when not."""

BUILD_TIMEOUT = 900.0

_WORKLOAD = r"""
import sys, tempfile
from pathlib import Path
from services.connectors.spark.arrow_stream import next_batch, open_arrow_stream
from services.connectors.spark.session import create_session

archive, home = sys.argv[1], Path(sys.argv[2])
spark = create_session({
    "spark.master": "local[2]", "spark.ui.enabled": "false", "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={archive}",
    "spark.lakehouse": "delta,iceberg",
    "spark.lakehouse.iceberg.warehouse": str(home / "warehouse"),
})

def drain(df):
    stream = open_arrow_stream(df)
    while next_batch(stream, 1000) is not None:
        pass
    stream.close()

rows = spark.range(2000).selectExpr(
    "id", "concat('n-', id) AS name", "cast(id AS decimal(12, 2)) AS amount",
    "current_timestamp() AS at", "current_date() AS day")
for fmt in ("parquet", "json", "csv", "orc"):
    path = str(home / fmt)
    rows.write.format(fmt).option("header", "true").save(path)
    drain(spark.read.format(fmt).option("header", "true").load(path))
delta = f"delta.`{home / 'delta'}`"
spark.sql(f"CREATE TABLE {delta} (id BIGINT, name STRING) USING delta "
          "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
spark.range(100).selectExpr("id", "concat('n-', id) AS name").write.format("delta") \
    .mode("append").save(str(home / "delta"))
spark.sql(f"UPDATE {delta} SET name = 'x' WHERE id < 10")
spark.sql(f"DESCRIBE HISTORY {delta}").collect()
drain(spark.read.format("delta").option("readChangeFeed", "true")
      .option("startingVersion", 1).option("endingVersion", 2).load(str(home / "delta")))
drain(spark.read.format("delta").option("versionAsOf", 1).load(str(home / "delta")))
spark.sql("CREATE TABLE iceberg.db.t (id BIGINT, name STRING) USING iceberg")
spark.range(100).selectExpr("id", "concat('n-', id) AS name").writeTo("iceberg.db.t").append()
spark.sql("UPDATE iceberg.db.t SET name = 'x' WHERE id < 10")
snapshots = spark.read.format("iceberg").load("iceberg.db.t.snapshots").collect()
spark.read.format("iceberg").load("iceberg.db.t.history").collect()
spark.sql("CALL iceberg.system.create_changelog_view(table => 'db.t', "
          "changelog_view => 'v', identifier_columns => array('id'))")
drain(spark.table("v"))
drain(spark.read.format("iceberg").option("versionAsOf", snapshots[0]["snapshot_id"])
      .load("iceberg.db.t"))
spark.stop()
"""


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build() -> Path | None:
    """The archive, built now unless the cache holds it (under a lock: one build at a time);
    None, with the reason on standard error, if the build failed."""
    with _locked():
        if ARCHIVE.exists():
            return ARCHIVE
        for old in CACHE.glob("spark-*.jsa"):
            old.unlink()  # another JDK's or Spark's: of no use to this one
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="spark-cds-") as home:
            partial = Path(home) / "spark.jsa"
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            run = subprocess.run(
                [sys.executable, "-c", _WORKLOAD, str(partial), home],
                cwd=REPO, env=env, capture_output=True, timeout=BUILD_TIMEOUT, check=False,
            )  # fmt: skip
            if run.returncode != 0 or not partial.exists():
                tail = run.stderr.decode(errors="replace")[-2000:]
                print(f"spark-cds: the archive was not built (rc {run.returncode}):\n{tail}",
                      file=sys.stderr)  # fmt: skip
                return None
            staged = ARCHIVE.with_suffix(".partial")
            shutil.move(partial, staged)
            os.replace(staged, ARCHIVE)  # whole or not at all: a JVM may map it any time
        size = ARCHIVE.stat().st_size >> 20
        print(f"spark-cds: {ARCHIVE} ({size} MiB) in {time.monotonic() - started:.0f} s")
        return ARCHIVE


if __name__ == "__main__":
    sys.exit(0 if build() is not None else 1)
