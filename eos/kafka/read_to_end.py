"""Reading a topic to its end, the way exactly-once needs it (docs/exactly-once.md,
"Resuming").

"The end" is what a read_uncommitted client sees: the high watermark of every
partition, listed when the read begins. The records are consumed with
``isolation.level=read_committed`` until every partition's position has
reached that offset. Aborted records and transaction markers are skipped but
still move the position forward, so a read ends exactly when every transaction
that was open when it began has committed or aborted. An open transaction holds
the read back (read_committed cannot pass the last stable offset): the read
then fails after its timeout with :class:`~eos.errors.ReadToEndTimeout`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from eos.errors import ReadToEndTimeout
from eos.kafka import aiokafka_private as private
from eos.kafka.async_service import AsyncService
from eos.kafka.clients import STOP_SECONDS, ClientConfig, make_consumer

_POLL_MS = 100


class TopicReader(AsyncService):
    """A read_committed reader of every partition of one topic, from its beginning.

    ``read_to_end`` returns the records that arrived since the previous call, so
    a store can keep a snapshot up to date by calling it again and again.
    """

    def __init__(self, config: ClientConfig, topic: str, *, client_id: str = "eos-log") -> None:
        self._config = config
        self.topic = topic
        self._client_id = client_id
        self._reader: AIOKafkaConsumer | None = None
        self._lister: AIOKafkaConsumer | None = None
        self._partitions: list[TopicPartition] = []

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:  # e.g. not authorized to read the topic: no consumer left open
            with anyio.CancelScope(shield=True):
                await self.close()
            raise

    async def _start(self) -> None:
        common: dict[str, Any] = {"enable_auto_commit": False, "group_id": None}
        self._reader = make_consumer(
            self._config,
            **common,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            client_id=f"{self._client_id}-reader",
        )
        self._lister = make_consumer(
            self._config,
            **common,
            isolation_level="read_uncommitted",
            client_id=f"{self._client_id}-lister",
        )
        await self._reader.start()
        await self._lister.start()
        partitions = await self._partitions_of(self.topic)
        self._partitions = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self._reader.assign(self._partitions)
        await self._reader.seek_to_beginning(*self._partitions)

    async def _partitions_of(self, topic: str) -> set[int]:
        assert self._reader is not None
        for _ in range(20):
            partitions = await private.topic_partitions(self._reader, topic)
            if partitions:
                return set(partitions)
            await anyio.sleep(0.1)
        raise ReadToEndTimeout(f"topic {topic!r} does not exist (no partitions in metadata)")

    async def close(self) -> None:
        """Stop both consumers, each even if the other's stop fails, and even when the
        caller is being cancelled (shielded, at most STOP_SECONDS each): a consumer left
        unstopped is collected later with an "Unclosed AIOKafkaConsumer" warning that
        fails whichever test is running then."""
        reader, lister = self._reader, self._lister
        self._reader = self._lister = None
        with anyio.CancelScope(shield=True):
            try:
                if reader is not None:
                    with anyio.move_on_after(STOP_SECONDS):
                        await reader.stop()
            finally:
                if lister is not None:
                    with anyio.move_on_after(STOP_SECONDS):
                        await lister.stop()

    async def end_offsets(self) -> dict[TopicPartition, int]:
        """High watermarks, as a read_uncommitted client sees them."""
        assert self._lister is not None, "start() first"
        ends: Mapping[TopicPartition, int] = await self._lister.end_offsets(self._partitions)
        return dict(ends)

    async def positions(self) -> dict[TopicPartition, int]:
        assert self._reader is not None, "start() first"
        return {tp: await self._reader.position(tp) for tp in self._partitions}

    async def read_to_end(self, timeout: float) -> list[ConsumerRecord[bytes, bytes]]:
        """Consume (read_committed) until each partition reaches the end offsets
        listed now. Raises :class:`ReadToEndTimeout` after ``timeout`` seconds."""
        assert self._reader is not None, "start() first"
        records: list[ConsumerRecord[bytes, bytes]] = []
        ends: dict[TopicPartition, int] = {}
        lagging: list[TopicPartition] = list(self._partitions)
        try:
            with anyio.fail_after(timeout):
                ends = await self.end_offsets()
                lagging = await self._lagging(ends)
                while lagging:
                    batches = await self._reader.getmany(*lagging, timeout_ms=_POLL_MS)
                    for tp in lagging:
                        records.extend(batches.get(tp, ()))
                    lagging = await self._lagging(ends)
        except TimeoutError:
            raise ReadToEndTimeout(await self._describe_lag(ends, lagging, timeout)) from None
        return records

    async def _lagging(self, ends: Mapping[TopicPartition, int]) -> list[TopicPartition]:
        assert self._reader is not None
        return [tp for tp in self._partitions if await self._reader.position(tp) < ends[tp]]

    async def _describe_lag(
        self, ends: Mapping[TopicPartition, int], lagging: list[TopicPartition], timeout: float
    ) -> str:
        assert self._reader is not None
        with anyio.move_on_after(2):
            where = ", ".join(
                [
                    f"partition {tp.partition} at {await self._reader.position(tp)} of {ends[tp]}"
                    for tp in lagging
                ]
            )
            return (
                f"could not read topic {self.topic!r} to its end within {timeout:g}s ({where}); "
                "a transaction that stays open on it holds read_committed readers back until it "
                "commits, aborts or times out (transaction.timeout.ms)"
            )
        return f"could not read topic {self.topic!r} to its end within {timeout:g}s"


async def read_to_end(
    config: ClientConfig, topic: str, *, timeout: float = 30.0
) -> list[ConsumerRecord[bytes, bytes]]:
    """Every committed record of ``topic``, read as described in this module."""
    async with TopicReader(config, topic) as reader:
        return await reader.read_to_end(timeout)
