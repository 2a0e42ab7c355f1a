"""The offset mirror actor (docs/exactly-once.md, step 4 of the loop): copies the
offsets committed to a connector's own offsets topic into the worker's global
offsets topic.

It runs off the tasks' path: tasks hand it the committed offset records and
never wait. Pending records are coalesced by key (latest wins), so the backlog
is bounded by the number of source partitions. Writes use a plain idempotent
producer and are retried forever with backoff; a failure never fails a task.
This keeps downgrades possible: an older worker finds recent offsets in the
global topic.
"""

from __future__ import annotations

import anyio
import structlog
from aiokafka import AIOKafkaProducer
from anyio.abc import TaskStatus

from eos.kafka.clients import ClientConfig, make_producer, started
from eos.runtime.observer import NullObserver, WorkerObserver

log = structlog.get_logger(__name__)


class OffsetMirror:
    def __init__(
        self,
        client_config: ClientConfig,
        topic: str,
        *,
        observer: WorkerObserver | None = None,
        retry_backoff: float = 1.0,
    ) -> None:
        self._config = client_config
        self._topic = topic
        self._observer = observer or NullObserver()
        self._backoff = retry_backoff
        self._pending: dict[bytes, bytes | None] = {}
        self._wake = anyio.Event()
        self.mirrored = 0

    def submit(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Queue committed offset records (never blocks)."""
        for key, value in records:
            self._pending[key] = value
        self._observer.offset_mirror_backlog(len(self._pending))
        self._wake.set()

    @property
    def backlog(self) -> int:
        return len(self._pending)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        producer: AIOKafkaProducer | None = None  # created on first use: most workers need none
        try:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                while self._pending:
                    try:
                        if producer is None:
                            producer = await started(
                                make_producer(self._config, enable_idempotence=True)
                            )
                        await self._flush(producer)
                    except Exception as exc:
                        log.warning("offset mirror write failed; retrying", error=repr(exc))
                        await anyio.sleep(self._backoff)
        finally:
            if producer is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await producer.stop()

    async def _flush(self, producer: AIOKafkaProducer) -> None:
        batch, self._pending = self._pending, {}
        try:
            futures = [await producer.send(self._topic, key=k, value=v) for k, v in batch.items()]
            for future in futures:
                await future
        except BaseException:
            for key, value in batch.items():  # put back what a newer submit did not replace
                self._pending.setdefault(key, value)
            raise
        self.mirrored += len(batch)
        self._observer.offset_mirror_backlog(len(self._pending))
