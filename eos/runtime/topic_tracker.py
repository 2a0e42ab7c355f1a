"""Active topics (KIP-558): the topics each connector's tasks have written to since the
last reset, kept in the status topic (docs/rest.md, "Active topics").

A task reports a topic the first time it writes to it in its run (on its send
path: :meth:`TopicTracker.discovered` only schedules the write). A reset removes
the connector's records; the tasks of this worker forget those topics at once (so
they report them again as they write), the tasks of other workers when their
worker next reads the status topic, at the latest after
``topic.tracking.refresh.interval.ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from eos.config.worker import WorkerConfig
from eos.errors import EosError
from eos.runtime.clock import Clock
from eos.runtime.task.source_task import TaskSpec
from eos.storage.config_log import ConfigLog
from eos.storage.status_log import ActiveTopic, StatusLog

log = structlog.get_logger(__name__)

Forget = Callable[[Callable[[str], bool]], None]
"""A running task's ``forget_topics``: it forgets the topics the predicate keeps."""


class TopicTracker:
    def __init__(
        self, settings: WorkerConfig, status_log: StatusLog, config_log: ConfigLog, clock: Clock
    ) -> None:
        self.settings = settings
        self.status_log = status_log
        self.config_log = config_log
        self.clock = clock
        self._tasks: dict[tuple[str, int], Forget] = {}
        self._status_lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._closing = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write reports and watch for resets until cancelled (with the worker)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.settings.topic_tracking:
                tg.start_soon(self._watch_topic_resets)
            task_status.started()
            await anyio.sleep_forever()

    def close(self) -> None:
        """Report nothing more (the worker is stopping)."""
        self._closing = True

    def track(self, key: tuple[str, int], forget: Forget) -> None:
        """A task started here: it forgets reset topics through ``forget``."""
        self._tasks[key] = forget

    def untrack(self, key: tuple[str, int]) -> None:
        self._tasks.pop(key, None)

    async def read_status(self) -> StatusLog:
        """The status topic read to its end."""
        async with self._status_lock:
            await self.status_log.refresh()
        self._forget_reset_topics()
        return self.status_log

    async def active_topics(self, name: str) -> list[str]:
        """The topics the connector's tasks have written to since the last reset
        (KIP-558; empty for a connector that never wrote, or does not exist)."""
        return sorted((await self.read_status()).active_topics(name))

    async def reset(self, name: str) -> None:
        """Forget the connector's active topics: its tasks report them again as they
        write (those of this worker at once, the others' within
        ``topic.tracking.refresh.interval.ms``)."""
        status = await self.read_status()
        removed = await status.remove_topics(name)
        for (connector, _), forget in self._tasks.items():
            if connector == name:
                forget(lambda topic: topic not in removed)

    def discovered(self, spec: TaskSpec, topic: str) -> None:
        """A task wrote to ``topic`` for the first time in its run (called on its send
        path): the report is written by the tracker's own task group."""
        if self._tg is not None and not self._closing:
            self._tg.start_soon(self._record_topic, spec, topic)

    async def _record_topic(self, spec: TaskSpec, topic: str) -> None:
        name = spec.connector
        if self.status_log.has_topic(name, topic):  # as of the last read: maybe twice
            return
        if name not in self.config_log.snapshot.connectors:  # deleted meanwhile
            return
        active = ActiveTopic(topic, name, spec.task_id, self.clock.wall_ms())
        try:
            await self.status_log.put_topic(active)
        except Exception as exc:  # the next status read lets the task report it again
            log.warning("active topic not recorded", connector=name, error=repr(exc))

    def _forget_reset_topics(self) -> None:
        """Tasks forget the topics that have no record (any more): they report them again."""
        status = self.status_log
        for (name, _), forget in self._tasks.items():
            forget(partial(status.has_topic, name))

    async def _watch_topic_resets(self) -> None:
        """While tasks run here, read the status topic now and then: a reset made through
        another worker reaches this one's tasks."""
        interval = self.settings.topic_tracking_refresh_ms / 1000
        while True:
            await anyio.sleep(interval)
            if self._tasks:
                try:
                    await self.read_status()
                except EosError as exc:
                    log.info("status topic not read", error=str(exc))
