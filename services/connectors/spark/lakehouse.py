"""Delta Lake and Apache Iceberg in the worker's Spark session (``spark.lakehouse``).

A worker setting ``spark.lakehouse`` (``delta``, ``iceberg`` or ``delta,iceberg``)
adds what the table formats need to the session it builds (:func:`lakehouse_settings`,
applied by :func:`~.session.builder_settings`):

- the jars, through Spark's own resolver (``spark.jars.packages``), from Maven
  Central into ``spark.jars.ivy`` (default ``$EOS_CACHE_DIR/ivy``, else
  ``~/.cache/eos/ivy``): ``io.delta:delta-spark_<spark minor>_2.13:<delta-spark
  version installed>`` and ``org.apache.iceberg:iceberg-spark-runtime-<spark
  minor>_2.13:`` :data:`ICEBERG_VERSION` (``spark.lakehouse.iceberg.version`` to change);
- their SQL extensions (``spark.sql.extensions``);
- Delta's catalog as ``spark_catalog`` (unless set), and, with
  ``spark.lakehouse.iceberg.warehouse=<path>``, a Hadoop (path) catalog named
  ``iceberg`` over that directory (any other Iceberg catalog: the usual
  ``spark.sql.catalog.<name>.*`` settings, passed through).

Jars must be on the JVM when it starts, so they are a worker setting, not a
connector one. :func:`require` tells a connector that needs a format, before any
Spark work, what is missing: the Python extra (``pip install 'eos[delta]'``) or
the worker setting.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

LAKEHOUSE = "spark.lakehouse"
PREFIX = "spark.lakehouse."
ICEBERG_VERSION = "1.12.0"
"""The Iceberg release whose Spark runtime is used (published for Spark 4.0 and 4.1)."""
SCALA = "2.13"
FORMATS = ("delta", "iceberg")
_EXTENSIONS = {
    "delta": "io.delta.sql.DeltaSparkSessionExtension",
    "iceberg": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
}
_PROVIDED = "org.apache.hadoop:hadoop-client-api,org.apache.hadoop:hadoop-client-runtime"
"""Jars Spark already ships, left out of the resolution (Delta's kernel asks for them)."""


class LakehouseUnavailable(RuntimeError):
    """A table format a connector needs is not available on this worker; the message
    names the extra to install or the worker setting to add."""


def formats(settings: Mapping[str, str]) -> list[str]:
    """The formats ``spark.lakehouse`` names (ValueError for an unknown one)."""
    names = [n.strip().lower() for n in str(settings.get(LAKEHOUSE, "")).split(",") if n.strip()]
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise ValueError(
            f"worker setting {LAKEHOUSE}={settings.get(LAKEHOUSE)!r}: unknown table format "
            f"{', '.join(unknown)} (known: {', '.join(FORMATS)})"
        )
    return names


def _spark_minor() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def _delta_version() -> str:
    try:
        return importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError as exc:
        raise LakehouseUnavailable(missing_extra("delta")) from exc


def missing_extra(fmt: str) -> str:
    return (
        f"{fmt} tables need the eos[{fmt}] extra, which is not installed on this worker: "
        f"`pip install 'eos[{fmt}]'`, then restart the worker with {LAKEHOUSE}={fmt} "
        "in its settings"
    )


def packages(names: list[str], settings: Mapping[str, str]) -> list[str]:
    """Maven coordinates of the jars the formats ``names`` need."""
    minor = _spark_minor()
    found = []
    if "delta" in names:
        found.append(f"io.delta:delta-spark_{minor}_{SCALA}:{_delta_version()}")
    if "iceberg" in names:
        version = settings.get(f"{PREFIX}iceberg.version", ICEBERG_VERSION)
        found.append(f"org.apache.iceberg:iceberg-spark-runtime-{minor}_{SCALA}:{version}")
    return found


def _joined(*parts: str) -> str:
    seen: list[str] = []
    for part in parts:
        seen += [p.strip() for p in part.split(",") if p.strip() and p.strip() not in seen]
    return ",".join(seen)


def ivy_dir(environ: Mapping[str, str]) -> str:
    base = environ.get("EOS_CACHE_DIR") or str(Path.home() / ".cache" / "eos")
    return str(Path(base) / "ivy")


def lakehouse_settings(conf: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``conf`` (the session's ``spark.*`` settings) with what ``spark.lakehouse``
    asks for added, and the ``spark.lakehouse.*`` keys removed."""
    names = formats(conf)
    out = {k: v for k, v in conf.items() if k != LAKEHOUSE and not k.startswith(PREFIX)}
    if not names:
        return out
    out["spark.jars.packages"] = _joined(out.get("spark.jars.packages", ""), *packages(names, conf))
    out["spark.jars.excludes"] = _joined(out.get("spark.jars.excludes", ""), _PROVIDED)
    out.setdefault("spark.jars.ivy", ivy_dir(environ))
    out["spark.sql.extensions"] = _joined(
        out.get("spark.sql.extensions", ""), *(_EXTENSIONS[n] for n in names)
    )
    if "delta" in names:
        out.setdefault(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        if out.get("spark.master", "local").startswith("local"):
            # Delta rebuilds a table's state with 50 partitions by default: slow on a laptop.
            out.setdefault("spark.databricks.delta.snapshotPartitions", "2")
    warehouse = conf.get(f"{PREFIX}iceberg.warehouse")
    if "iceberg" in names and warehouse:
        out.setdefault("spark.sql.catalog.iceberg", "org.apache.iceberg.spark.SparkCatalog")
        out.setdefault("spark.sql.catalog.iceberg.type", "hadoop")
        out.setdefault("spark.sql.catalog.iceberg.warehouse", warehouse)
    return out


def require(fmt: str, worker_settings: Mapping[str, str]) -> None:
    """:class:`LakehouseUnavailable` unless ``fmt`` can be read on this worker: its
    extra installed and ``spark.lakehouse`` naming it."""
    python_module = {"delta": "delta", "iceberg": "pyspark"}[fmt]
    if importlib.util.find_spec(python_module) is None:
        raise LakehouseUnavailable(missing_extra(fmt))
    if fmt not in formats(worker_settings):
        raise LakehouseUnavailable(
            f"{fmt} tables need the worker setting {LAKEHOUSE}={fmt} (or a list such as "
            f"delta,iceberg), which loads the {fmt} jars into the worker's Spark session: "
            f"add it to the worker's settings and restart the worker"
        )


def extra_problem(fmt: str) -> str | None:
    """The missing-extra message for ``fmt`` if its Python side is not installed (for
    validation, which runs on any worker), else None."""
    python_module = {"delta": "delta", "iceberg": "pyspark"}[fmt]
    return missing_extra(fmt) if importlib.util.find_spec(python_module) is None else None


def environ() -> Mapping[str, str]:
    return os.environ
