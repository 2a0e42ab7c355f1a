"""SparkSource: rows read by PySpark from files or tables, into Kafka exactly once.

``connector.class=SparkSource``. See docs/spark.md for the settings and the
guarantees; :mod:`.files_mode` and :mod:`.table_mode` for the offsets.
"""

from __future__ import annotations

from collections.abc import Mapping

from eos.api import ConfigDef, ExactlyOnceSupport, SourceConnector, SourceTask
from services.connectors.spark.config import (
    CONFIG_DEF,
    TASK_COUNT,
    TASK_INDEX,
    SparkSourceSettings,
    problems,
)

NOT_UNIQUE_REASON = (
    "exactly-once delivery in mode=table needs `incrementing.column.unique=true`: declare "
    "that the column is unique and strictly increasing (new rows always get a value above "
    "every existing one); otherwise rows can be missed and support cannot be determined"
)


class SparkSource(SourceConnector):
    """Files (parquet, csv, json, orc) spread over tasks by path, or one table per task."""

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
        return errors

    async def start(self, config: Mapping[str, str]) -> None:
        self._settings = SparkSourceSettings.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        # imported here: the task brings PySpark, which loading the plugin class must not
        from services.connectors.spark.task import SparkSourceTask

        return SparkSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Files mode: ``max_tasks`` tasks, task ``i`` reading the files whose path hashes
        to ``i`` (:func:`~.files_mode.owner_of`). Table mode: one task."""
        assert self._settings is not None, "start() first"
        count = max(1, max_tasks) if self._settings.mode == "files" else 1
        return [{**self._config, TASK_INDEX: str(i), TASK_COUNT: str(count)} for i in range(count)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Files: SUPPORTED (each file belongs to one task; offsets are row positions).
        Table: SUPPORTED only with ``incrementing.column.unique=true``, else None
        (:data:`NOT_UNIQUE_REASON`)."""
        mode = str(config.get("mode", "files")).strip().lower()
        if mode != "table":
            return ExactlyOnceSupport.SUPPORTED
        unique = str(config.get("incrementing.column.unique", "false")).strip().lower()
        return ExactlyOnceSupport.SUPPORTED if unique == "true" else None
