"""SparkSource: rows read by PySpark from files or tables, into Kafka exactly once.

``connector.class=SparkSource``. See docs/spark.md for the settings and the
guarantees; :mod:`.files_mode` and :mod:`.table_mode` for the offsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos.api import (
    ConfigDef,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from services.connectors.spark.config import (
    CHANGE_MODES,
    CONFIG_DEF,
    TABLES,
    TASK_COUNT,
    TASK_INDEX,
    SparkSourceSettings,
    json_converters,
    problems,
)
from services.connectors.spark.jdbc_settings import JdbcSettings
from services.connectors.spark.lakehouse import extra_problem

NOT_UNIQUE_REASON = (
    "exactly-once delivery in mode=table needs `incrementing.column.unique=true`: declare "
    "that the column is unique and strictly increasing (new rows always get a value above "
    "every existing one); otherwise rows can be missed and support cannot be determined"
)


def _mode(config: Mapping[str, str]) -> str:
    return str(config.get("mode", "files")).strip().lower()


class SparkSource(SourceConnector):
    """Files (parquet, csv, json, orc) spread over tasks by path, one table per task, or
    the changes of Delta / Iceberg tables (each table read by one task)."""

    worker_settings = ("spark.",)

    def __init__(self) -> None:
        self._config: dict[str, str] = {}
        self._settings: SparkSourceSettings | None = None

    def version(self) -> str:
        return "1.0.0"

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        errors = CONFIG_DEF.validate(config)
        for key, messages in problems(config).items():
            errors.setdefault(key, []).extend(messages)
        required = str(config.get("exactly.once.support", "")).strip().lower() == "required"
        if required and self.exactly_once_support(config) is None:
            errors.setdefault("incrementing.column.unique", []).append(NOT_UNIQUE_REASON)
        fmt = CHANGE_MODES.get(_mode(config))
        missing = extra_problem(fmt) if fmt else None
        if missing:
            errors.setdefault("mode", []).append(missing)
        return errors

    async def start(self, config: Mapping[str, str]) -> None:
        self._settings = SparkSourceSettings.parse(config)
        if self._settings.mode == "jdbc":
            JdbcSettings.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        # imported here: the task brings PySpark, which loading the plugin class must not
        from services.connectors.spark.task import SparkSourceTask

        return SparkSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Files mode: ``max_tasks`` tasks, task ``i`` reading the files whose path hashes
        to ``i`` (:func:`~.files_mode.owner_of`). Table mode: one task. Changes modes:
        the tables dealt out in turn to at most ``max_tasks`` tasks (a table's changes
        are one ordered stream: one task reads it)."""
        settings = self._settings
        assert settings is not None, "start() first"
        if settings.mode in CHANGE_MODES:
            tables = settings.tables
            count = max(1, min(max_tasks, len(tables)))
            return [
                {
                    **self._config,
                    TASK_INDEX: str(i),
                    TASK_COUNT: str(count),
                    TABLES: "\n".join(tables[i::count]),
                }
                for i in range(count)
            ]
        if settings.mode == "jdbc":
            return self._jdbc_task_configs(max_tasks)
        count = max(1, max_tasks) if settings.mode == "files" else 1
        return [{**self._config, TASK_INDEX: str(i), TASK_COUNT: str(count)} for i in range(count)]

    def _jdbc_task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """A query: one task. Tables: ``max_tasks`` tasks (at most one per whitelist
        entry); each lists the tables and reads its own (:func:`~.jdbc_mode.owned`)."""
        jdbc = JdbcSettings.parse(self._config)
        count = max(1, max_tasks)
        if jdbc.query:
            count = 1
        elif jdbc.whitelist:
            count = max(1, min(count, len(jdbc.whitelist)))
        return [{**self._config, TASK_INDEX: str(i), TASK_COUNT: str(count)} for i in range(count)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Files: SUPPORTED (each file belongs to one task; offsets are row positions).
        Table: SUPPORTED only with ``incrementing.column.unique=true``, else None
        (:data:`NOT_UNIQUE_REASON`)."""
        mode = _mode(config)
        if mode != "table":
            return ExactlyOnceSupport.SUPPORTED
        unique = str(config.get("incrementing.column.unique", "false")).strip().lower()
        return ExactlyOnceSupport.SUPPORTED if unique == "true" else None

    def encodes_rows(self, config: Mapping[str, str]) -> bool:
        """With both converters ``json`` Spark writes the records' JSON itself."""
        return json_converters(config)

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        """Changes modes: SUPPORTED (one transaction per table version, see
        ``transaction.max.rows``)."""
        if _mode(config) in CHANGE_MODES:
            return ConnectorTransactionBoundaries.SUPPORTED
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[str, dict[str, Any] | None]
    ) -> None:
        """Changes modes: an offset is ``{"version": <int>, "row": <int>}`` (optionally
        ``"done": true``): read version (snapshot id) ``version`` from row ``row``."""
        if _mode(config) not in CHANGE_MODES:
            return
        for partition, offset in offsets.items():
            if offset is None:
                continue
            version, row = offset.get("version"), offset.get("row", 0)
            if not isinstance(version, int) or not isinstance(row, int) or row < 0:
                raise ValueError(
                    f"offset {offset} for {partition}: a changes offset is "
                    '{"version": <version or snapshot id>, "row": <rows of it already '
                    "delivered, usually 0>}"
                )
