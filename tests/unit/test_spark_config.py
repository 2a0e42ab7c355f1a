"""SparkSource settings, validation, task configs and exactly-once support (no Spark needed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

from eos.api import ConfigError, ExactlyOnceSupport, SourcePartition, SourceTaskContext
from services.connectors.spark import SparkSource, SparkUnavailable
from services.connectors.spark.config import SparkSourceSettings
from services.connectors.spark.files_mode import FileInfo, owner_of
from services.connectors.spark.session import builder_settings, create_session, jvm_environment
from services.connectors.spark.task import SparkSourceTask

T = TypeVar("T")
FILES = {"path": "/data/in", "topic": "t"}
TABLE = {"mode": "table", "table": "db.orders", "incrementing.column": "id", "topic": "t"}


def _errors(config: dict[str, str]) -> dict[str, list[str]]:
    return {k: v for k, v in SparkSource().validate(config).items() if v}


def test_valid_configs_have_no_errors() -> None:
    assert _errors(FILES) == {}
    assert _errors(TABLE) == {}
    assert _errors({**TABLE, "table": "", "query": "SELECT 1 AS id"}) == {}


@pytest.mark.parametrize(
    ("config", "key", "words"),
    [
        ({"topic": "t"}, "path", "required setting 'path' is missing"),
        ({**FILES, "format": "xml"}, "format", "must be one of: parquet, csv, json, orc"),
        ({**TABLE, "incrementing.column": ""}, "incrementing.column", "'incrementing.column'"),
        ({**TABLE, "table": ""}, "table", "exactly one of `table`, `path`"),
        ({**TABLE, "query": "SELECT 1"}, "table", "got table, query"),
        ({"path": "/x"}, "topic", "`topic` or `topic.column`"),
        ({**FILES, "mode": "stream"}, "mode", "must be one of: files, table"),
        ({**FILES, "max.buffered.rows": "3"}, "max.buffered.rows", "at least 4"),
        ({**FILES, "batch.rows": "lots"}, "batch.rows", "expected an integer"),
    ],
)
def test_validation_names_the_setting(config: dict[str, str], key: str, words: str) -> None:
    errors = _errors(config)
    assert list(errors) == [key]
    assert words in errors[key][0]
    with pytest.raises(ConfigError) as raised:
        SparkSourceSettings.parse(config)
    assert raised.value.key == key


async def test_start_rejects_bad_config() -> None:
    with pytest.raises(ConfigError, match="'path'"):
        await SparkSource().start({"topic": "t"})


def test_settings_parse() -> None:
    s = SparkSourceSettings.parse(
        {
            **FILES,
            "options.header": "true",
            "options.": "x",
            "key.columns": "a, b",
            "task.index": "1",
            "task.count": "3",
            "batch.rows": "50000",
            "max.buffered.rows": "1000",
        }
    )
    assert s.options == {"header": "true"}
    assert s.key_columns == ("a", "b")
    assert (s.task_index, s.task_count) == (1, 3)
    assert s.rows_per_poll == 250


async def test_task_configs_spread_files_and_table_has_one_task() -> None:
    connector = SparkSource()
    await connector.start(FILES)
    configs = connector.task_configs(3)
    assert [(c["task.index"], c["task.count"]) for c in configs] == [
        ("0", "3"),
        ("1", "3"),
        ("2", "3"),
    ]
    assert all(c["path"] == "/data/in" for c in configs)
    await connector.start(TABLE)
    assert [c["task.index"] for c in connector.task_configs(4)] == ["0"]
    assert connector.task_class() is SparkSourceTask


def test_exactly_once_support() -> None:
    connector = SparkSource()
    assert connector.exactly_once_support(FILES) is ExactlyOnceSupport.SUPPORTED
    assert connector.exactly_once_support(TABLE) is None
    unique = {**TABLE, "incrementing.column.unique": "true"}
    assert connector.exactly_once_support(unique) is ExactlyOnceSupport.SUPPORTED
    assert _errors({**TABLE, "exactly.once.support": "requested"}) == {}
    reason = _errors({**TABLE, "exactly.once.support": "required"})
    assert "incrementing.column.unique=true" in reason["incrementing.column.unique"][0]
    assert _errors({**unique, "exactly.once.support": "required"}) == {}


def test_each_file_has_exactly_one_owner() -> None:
    paths = [f"file:/data/in/part-{n:05d}.parquet" for n in range(200)]
    for tasks in (1, 2, 3, 7):
        owners = [owner_of(p, tasks) for p in paths]
        assert all(0 <= o < tasks for o in owners)
        assert owners == [owner_of(p, tasks) for p in paths]  # stable
        if tasks > 1:
            assert len(set(owners)) == tasks  # spread


def test_file_change_detection() -> None:
    file = FileInfo("f", 10, 1000)
    assert not file.changed_since({"row": 3})
    assert not file.changed_since({"row": 3, "size": 10, "mtime": 1000})
    assert file.changed_since({"row": 3, "size": 11, "mtime": 1000})
    assert file.changed_since({"row": 3, "size": 10, "mtime": 999})


def test_session_settings() -> None:
    conf = builder_settings({"spark.executor.memory": "2g", "bootstrap.servers": "x"})
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.app.name"] == "eos-worker"
    assert conf["spark.executor.memory"] == "2g"
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert "bootstrap.servers" not in conf
    cluster = builder_settings({"spark.master": "spark://host:7077"})
    assert "spark.driver.bindAddress" not in cluster


def test_local_masters_start_the_jvm_with_spark_local_ip() -> None:
    """So that Spark does not look the host name up and warn that it is a loopback."""
    local = builder_settings({})
    assert jvm_environment(local, {}) == {"SPARK_LOCAL_IP": "127.0.0.1"}
    bound = builder_settings({"spark.master": "local[2]", "spark.driver.bindAddress": "10.1.2.3"})
    assert jvm_environment(bound, {}) == {"SPARK_LOCAL_IP": "10.1.2.3"}
    assert jvm_environment(local, {"SPARK_LOCAL_IP": "10.0.0.9"}) == {}
    assert jvm_environment(builder_settings({"spark.master": "spark://host:7077"}), {}) == {}
    cluster = builder_settings(
        {"spark.master": "spark://host:7077", "spark.driver.bindAddress": "10.0.0.7"}
    )
    assert jvm_environment(cluster, {}) == {"SPARK_LOCAL_IP": "10.0.0.7"}


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkUnavailable, match=r"Spark needs Java.*install a JDK"):
        create_session({})


class _Resources:
    settings: dict[str, str] = {}

    def shared(self, key: str, factory: Callable[[], T], close: Callable[[T], None]) -> T:
        return factory()

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T:
        return func(*args)


class _NoOffsets:
    async def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        return None

    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[dict[str, Any] | None]:
        return [None for _ in partitions]


@pytest.mark.parametrize("config", [FILES, TABLE])
async def test_task_fails_clearly_without_java(
    config: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    context = SourceTaskContext("c", 0, _NoOffsets(), _Resources())
    with pytest.raises(SparkUnavailable, match="openjdk-17"):
        await SparkSourceTask().start(config, context)
