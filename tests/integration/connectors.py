"""Connectors used only by tests (loaded by class path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anyio

from eos.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
)


class BadRecordSource(SourceConnector):
    """Batch 1: three good records. Batch 2: two good records, then one that the
    JSON converter cannot convert (an ``object()``)."""

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    async def start(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return BadRecordTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"topic": self.config["topic"]}]


class BadRecordTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.batches = 0

    def _record(self, n: int, value: object) -> SourceRecord:
        return SourceRecord({"p": "only"}, {"n": n + 1}, self.topic, value)

    async def poll(self) -> Sequence[SourceRecord] | None:
        self.batches += 1
        if self.batches == 1:
            return [self._record(n, {"n": n}) for n in range(3)]
        if self.batches == 2:
            return [self._record(3, {"n": 3}), self._record(4, {"n": 4}), self._record(5, object())]
        return None

    async def stop(self) -> None:
        pass


class NeverCommitSource(SourceConnector):
    """Connector-defined boundaries that never ask for a commit: its transaction
    stays open until the broker times it out."""

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED

    async def start(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return NeverCommitTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"topic": self.config["topic"]}]


class NeverCommitTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.n = 0

    async def poll(self) -> Sequence[SourceRecord] | None:
        await anyio.sleep(0.2)
        self.n += 1
        return [SourceRecord({"p": "only"}, {"n": self.n}, self.topic, {"n": self.n})]

    async def stop(self) -> None:
        pass
