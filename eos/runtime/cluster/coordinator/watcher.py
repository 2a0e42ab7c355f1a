"""The config watcher: every worker reads the config topic as it grows, not only at
rebalances (docs/cluster.md, "Changes without a rebalance").

Every ``heartbeat.interval.ms`` (and at once when the leader has just written)
it asks how far the topic is ahead of what was read, reports that lag, reads on
if it is behind, and tells the coordinator when the snapshot moved (whoever read
it: a REST request reads the topic too). The coordinator then brings what this
worker runs in line with it: restart requests, pauses, resumes and stops, new
task generations of its tasks. New work (a connector, more tasks) still needs the
leader's rebalance to be placed.
"""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.runtime.observer import WorkerObserver
from eos.storage.config_log import ConfigLog

log = structlog.get_logger(__name__)


class ConfigWatcher:
    def __init__(self, config_log: ConfigLog, observer: WorkerObserver, *, interval: float) -> None:
        self._config_log = config_log
        self._observer = observer
        self._interval = interval
        self._poked = anyio.Event()
        self._moved = anyio.Event()
        self._seen = -1
        """The snapshot offset last handed to :meth:`next_change`."""

    def poke(self) -> None:
        """Look now (the leader has just written the topic)."""
        self._poked.set()

    async def next_change(self) -> None:
        """Until the snapshot moved since the last call returned."""
        await self._moved.wait()
        self._moved = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._seen = self._config_log.snapshot.offset
        task_status.started()
        while True:
            with anyio.move_on_after(self._interval):
                await self._poked.wait()
            self._poked = anyio.Event()
            await self._look()
            offset = self._config_log.snapshot.offset
            if offset != self._seen:
                self._seen = offset
                self._moved.set()

    async def _look(self) -> None:
        try:
            with anyio.fail_after(self._interval):
                lag = await self._config_log.lag()
            self._observer.config_read_lag(lag)
            if lag > 0:
                await self._config_log.refresh()
        except Exception as exc:  # the next look tries again; REST reads still work
            log.debug("config topic not read", error=repr(exc))
