"""PostgresCdcSource: one task per replication slot (the slot is one stream, read in
order by one reader)."""

from __future__ import annotations

from collections.abc import Mapping

from eos.api import (
    ConfigDef,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from services.connectors.postgres_cdc.settings import CONFIG_DEF, VERSION, CdcSettings


class PostgresCdcSource(SourceConnector):
    def __init__(self) -> None:
        self._config: dict[str, str] = {}

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    async def start(self, config: Mapping[str, str]) -> None:
        CdcSettings.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        from services.connectors.postgres_cdc.task import PostgresCdcTask

        return PostgresCdcTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One task: a slot's changes are one ordered stream."""
        return [dict(self._config)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED

    def output_topics(self, config: Mapping[str, str]) -> list[str] | None:
        return None
