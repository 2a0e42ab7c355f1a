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


class OneTaskSource(SourceConnector):
    """An exactly-once capable connector with one task that gets the connector's config."""

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    async def start(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config)]


class BoundarySource(OneTaskSource):
    """:class:`OneTaskSource` that defines its own transaction boundaries."""

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class BadRecordSource(OneTaskSource):
    """Batch 1: three good records. Batch 2: two good records, then one that the
    JSON converter cannot convert (an ``object()``)."""

    def task_class(self) -> type[SourceTask]:
        return BadRecordTask


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


class NeverCommitSource(BoundarySource):
    """Connector-defined boundaries that never ask for a commit: its transaction
    stays open until the broker times it out."""

    def task_class(self) -> type[SourceTask]:
        return NeverCommitTask


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


BACKGROUND_SOURCES: dict[str, int] = {}
"""The external system of :class:`BackgroundSource`, per topic: how many records it
holds (a test grows it between runs)."""

BACKGROUND_EVENTS: dict[str, list[str]] = {}
"""What the tasks of :class:`BackgroundSource` did, per topic, in order: "stopped" when
``stop()`` returned, and how their background coroutine ended ("background
cancelled", "background raised")."""


class BackgroundSource(BoundarySource):
    """One task whose records come from a background coroutine (``context.start_soon``):
    it puts the numbers from the committed offset up to ``BACKGROUND_SOURCES[topic]``
    into a memory stream that ``poll`` drains (at most 50 per batch), then waits to be
    cancelled.

    ``fail.after.handover=true``: once ``poll`` has handed every record to the runtime,
    the coroutine raises instead. ``close.on.exit=true``: the coroutine closes its end
    of the stream when it ends (the usual anyio idiom). ``commit.after=K`` (with
    ``transaction.boundary=connector``): the task asks to commit after its K-th record
    only, so the records after it stay in an open transaction."""

    def task_class(self) -> type[SourceTask]:
        return BackgroundTask


class BackgroundTask(SourceTask):
    PARTITION: Mapping[str, str] = {"reader": "background"}

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.fail = config.get("fail.after.handover") == "true"
        self.close_on_exit = config.get("close.on.exit") == "true"
        self.commit_after = int(config.get("commit.after", "0"))
        self.transactions = context.transaction_context
        self.events = BACKGROUND_EVENTS.setdefault(self.topic, [])
        self.total = BACKGROUND_SOURCES[self.topic]
        offset = await context.offset_reader.offset(self.PARTITION)
        self.returned = offset["n"] if offset else 0
        self.send, self.receive = anyio.create_memory_object_stream[int](max_buffer_size=20)
        self.handed_over = anyio.Event()
        context.start_soon(self._read_ahead, self.returned)

    async def _read_ahead(self, first: int) -> None:
        try:
            for n in range(first, self.total):
                await self.send.send(n)
            if self.fail:
                # poll() was called again after returning the last record: the runtime
                # has sent them all (into the open transaction).
                await self.handed_over.wait()
                await anyio.sleep(0.5)  # let the producer deliver them (linger.ms is 5)
                raise RuntimeError(f"background reader broke after {self.total} records")
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.events.append("background cancelled")
            raise
        except Exception:
            self.events.append("background raised")
            raise
        finally:
            if self.close_on_exit:
                self.send.close()

    async def poll(self) -> Sequence[SourceRecord] | None:
        if self.returned == self.total:
            self.handed_over.set()
        numbers: list[int] = []
        with anyio.move_on_after(0.2):
            numbers.append(await self.receive.receive())
        while numbers and len(numbers) < 50:
            try:
                numbers.append(self.receive.receive_nowait())
            except anyio.WouldBlock:
                break
        records = [
            SourceRecord(self.PARTITION, {"n": n + 1}, self.topic, {"n": n}) for n in numbers
        ]
        for record, n in zip(records, numbers, strict=True):
            if self.transactions is not None and n + 1 == self.commit_after:
                self.transactions.commit_transaction(record)
        self.returned += len(records)
        return records

    async def stop(self) -> None:
        await anyio.sleep(0.2)  # the background coroutine still runs while stop() works
        self.receive.close()
        self.send.close()
        self.events.append("stopped")


class EncodedSource(OneTaskSource):
    """One task returning ``encoded=True`` records: ``ENCODED_RECORDS`` (bytes the JSON
    converter would have changed), then, with ``bad=true``, one whose value is a str."""

    def task_class(self) -> type[SourceTask]:
        return EncodedTask


ENCODED_RECORDS: list[tuple[bytes | None, bytes | None]] = [
    (b"k0", b'{"already":"json"}'),
    (None, b"\x00\xff not json at all \xfe"),
    (b"\x01\x02", b""),
    (b"tombstone", None),
]


class EncodedTask(SourceTask):
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        self.topic = config["topic"]
        self.bad = config.get("bad") == "true"
        self.polls = 0

    async def poll(self) -> Sequence[SourceRecord] | None:
        self.polls += 1
        if self.polls == 1:
            return [
                SourceRecord({"blob": "good"}, {"i": i + 1}, self.topic, value, key, encoded=True)
                for i, (key, value) in enumerate(ENCODED_RECORDS)
            ]
        if self.polls == 2 and self.bad:
            return [
                SourceRecord({"blob": "good"}, {"i": 5}, self.topic, b"fine", encoded=True),
                SourceRecord({"blob": "bad"}, {"i": 1}, self.topic, "a str", encoded=True),
            ]
        await anyio.sleep(0.1)
        return None

    async def stop(self) -> None:
        pass
