"""The at-least-once source task (``exactly.once.source.support`` = disabled or
preparing): the template of :mod:`eos.runtime.task.source_task` with an idempotent producer and
periodic offset flushes, no transactions."""

from __future__ import annotations

import time

from eos.runtime.observer import AbortReason
from eos.runtime.task.source_task import SourceTaskRunner


class AtLeastOnceTask(SourceTaskRunner):
    """Idempotent producer; offsets flushed every ``offset.flush.interval.ms``
    after every record they cover was acknowledged. A crash between a send and
    the next flush replays records (duplicates, never gaps)."""

    _last_flush: float = 0.0

    async def startup(self) -> bool:
        if self.deps.gate is not None:
            await self.deps.gate.offsets_topic()
        await self._start_producer(enable_idempotence=True, transactional_id=None)
        self._last_flush = self.deps.clock.monotonic()
        return True

    async def prepare_to_poll(self) -> None:
        interval = self.deps.flush_interval_ms / 1000
        if self.deps.clock.monotonic() - self._last_flush >= interval:
            await self._flush()

    async def batch_dispatched(self) -> None:
        pass

    async def final_commit(self) -> None:
        await self._flush()

    async def abandon(self, reason: AbortReason) -> None:
        self._inflight = self.new_inflight()

    async def _flush(self) -> None:
        self._last_flush = self.deps.clock.monotonic()
        batch, self._inflight = self._inflight, self.new_inflight()
        if not batch.count and not batch.offsets:  # records a transform dropped commit too
            return
        assert self._producer is not None
        started = time.perf_counter()
        try:
            await self.wait_sent()
            await self._producer.send_offsets(self.deps.offsets_topic, batch.offsets.records())
            await self.wait_sent()
        except Exception:
            self.deps.observer.offset_commit_failed()
            raise
        assert batch.opened_at is not None
        open_for = self.deps.clock.monotonic() - batch.opened_at
        self.deps.observer.transaction_committed(
            len(batch), time.perf_counter() - started, open_for
        )
        await self.notify_committed(batch)
