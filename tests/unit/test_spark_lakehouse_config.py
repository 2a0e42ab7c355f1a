"""SparkSource changes modes: settings, task configs, offsets, the session's lakehouse
settings (no Spark needed)."""

from __future__ import annotations

import pytest

from eos.api import ConnectorTransactionBoundaries, ExactlyOnceSupport
from services.connectors.spark import SparkSource
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.lakehouse import ICEBERG_VERSION, lakehouse_settings

DELTA = {"mode": "delta-changes", "path": "/lake/orders", "topic": "t", "key.columns": "id"}


def _errors(config: dict[str, str]) -> dict[str, list[str]]:
    return {k: v for k, v in SparkSource().validate(config).items() if v}


def test_changes_settings_validate_and_parse() -> None:
    assert _errors(DELTA) == {}
    both = _errors({**DELTA, "table": "x"})
    assert "exactly one of `table`, `path` or `tables`" in both["table"][0]
    no_key = {**DELTA, "key.columns": "", "deletes": "tombstone"}
    assert "needs `key.columns`" in _errors(no_key)["deletes"][0]
    assert "a version number" in _errors({**DELTA, "starting.version": "v2"})["starting.version"][0]
    iceberg_path = {**DELTA, "mode": "iceberg-changes", "changelog": "true"}
    assert "name the table" in _errors(iceberg_path)["path"][0]
    s = SparkSourceSettings.parse(
        {**DELTA, "starting.version": "7", "change.metadata": "fields", "deletes": "tombstone"}
    )
    assert (s.table_format, s.tables, s.starting) == ("delta", ("/lake/orders",), "7")
    assert (s.metadata_in_value, s.tombstones, s.preimages) == (True, True, False)


async def test_tables_are_dealt_out_to_tasks() -> None:
    connector = SparkSource()
    await connector.start({**DELTA, "path": "", "tables": "a, b, c"})
    configs = connector.task_configs(2)
    assert [c["tables.assigned"] for c in configs] == ["a\nc", "b"]
    assert [SparkSourceSettings.parse(c).tables for c in configs] == [("a", "c"), ("b",)]
    assert len(connector.task_configs(8)) == 3


def test_exactly_once_and_connector_boundaries_supported() -> None:
    connector = SparkSource()
    assert connector.exactly_once_support(DELTA) is ExactlyOnceSupport.SUPPORTED
    supported = ConnectorTransactionBoundaries.SUPPORTED
    assert connector.can_define_transaction_boundaries(DELTA) is supported
    files = {"path": "/in", "topic": "t"}
    assert connector.can_define_transaction_boundaries(files) is not supported


def test_altered_offsets_must_be_versions() -> None:
    connector = SparkSource()
    connector.alter_offsets(DELTA, {'{"delta":"/lake/orders"}': {"version": 3, "row": 0}})
    connector.alter_offsets(DELTA, {'{"delta":"/lake/orders"}': None})
    with pytest.raises(ValueError, match=r'"version": <version or snapshot id>'):
        connector.alter_offsets(DELTA, {'{"delta":"/lake/orders"}': {"version": "x"}})


def test_lakehouse_session_settings() -> None:
    import pyspark

    minor = ".".join(pyspark.__version__.split(".")[:2])
    plain = {"spark.master": "local[2]"}
    assert lakehouse_settings(plain, {}) == plain
    conf = lakehouse_settings(
        {
            **plain,
            "spark.lakehouse": "delta, iceberg",
            "spark.lakehouse.iceberg.warehouse": "/wh",
            "spark.jars.packages": "org.example:x:1",
        },
        {"EOS_CACHE_DIR": "/cache"},
    )
    packages = conf["spark.jars.packages"].split(",")
    assert packages[0] == "org.example:x:1"
    assert packages[1].startswith(f"io.delta:delta-spark_{minor}_2.13:")
    assert packages[2] == f"org.apache.iceberg:iceberg-spark-runtime-{minor}_2.13:{ICEBERG_VERSION}"
    assert conf["spark.jars.ivy"] == "/cache/ivy"
    assert "DeltaSparkSessionExtension" in conf["spark.sql.extensions"]
    assert "IcebergSparkSessionExtensions" in conf["spark.sql.extensions"]
    assert conf["spark.sql.catalog.iceberg.warehouse"] == "/wh"
    assert not any(k.startswith("spark.lakehouse") for k in conf)
    with pytest.raises(ValueError, match="unknown table format hudi"):
        lakehouse_settings({"spark.lakehouse": "hudi"}, {})
