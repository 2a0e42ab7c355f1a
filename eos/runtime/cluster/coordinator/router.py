"""The coordinator actor: the single owner of cluster state on a worker
(docs/cluster.md). It decides nothing itself: it serves the mailbox its duties
share and routes between them.

- :mod:`~eos.runtime.cluster.coordinator.group_listener`: each rebalance (the membership
  calls it);
- :mod:`~eos.runtime.cluster.coordinator.config_writes`: the leader's writes (the REST
  API calls them);
- :mod:`~eos.runtime.cluster.coordinator.fencing`: the leader's fencing rounds (starting
  tasks ask for them, here or over an internal request);
- :mod:`~eos.runtime.cluster.coordinator.session_keys`: the leader's session key;
- :mod:`~eos.runtime.cluster.coordinator.offset_changes`: a stopped connector's offsets
  altered or reset (KIP-875; the REST API calls it, on the leader);
- :mod:`~eos.runtime.cluster.coordinator.reconcile` and
  :mod:`~eos.runtime.cluster.coordinator.restart_requests`: what this worker runs, after each
  assignment and each time the config watcher
  (:mod:`~eos.runtime.cluster.coordinator.watcher`) saw the config topic move;
- :mod:`~eos.runtime.cluster.coordinator.auto_restarts`: failed connectors and tasks of
  this worker restarted with backoff;
- :mod:`~eos.runtime.cluster.coordinator.timers`: delayed rebalances, key rotation,
  background fencing.

As **leader** it alone writes the config topic and runs the fencing rounds; as
**follower** it answers users' writes with a :class:`~eos.errors.NotLeaderError`
naming the leader, and hands its connectors' task configs and its tasks' fencing
requests to the leader (:mod:`~eos.runtime.cluster.coordinator.leader_requests`).

All state changes run in the actor's mailbox, one at a time. Nothing in the
mailbox waits for another worker: requests to the leader and the wait for a
fencing round happen outside it.
"""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.errors import ConflictError
from eos.runtime.cluster.coordinator.auto_restarts import AutoRestarts
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.reconcile import Reconciler
from eos.runtime.cluster.coordinator.watcher import ConfigWatcher

log = structlog.get_logger(__name__)


class Coordinator:
    def __init__(
        self,
        shared: Shared,
        *,
        watcher: ConfigWatcher,
        reconciler: Reconciler,
        auto_restarts: AutoRestarts,
    ) -> None:
        self._state, self._inbox, self._timers = shared.state, shared.inbox, shared.timers
        self._watcher, self._reconciler = watcher, reconciler
        self._auto_restarts = auto_restarts

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read the config topic, then serve the mailbox until :meth:`close` (queued
        calls still run)."""
        await self._state.config_log.refresh()
        self._state.serving = True
        async with anyio.create_task_group() as tg:
            await tg.start(self._timers.run)
            await tg.start(self._watcher.run)
            await tg.start(self._auto_restarts.run)
            tg.start_soon(self._follow_config)
            task_status.started()
            await self._inbox.serve()
            tg.cancel_scope.cancel()

    def close(self) -> None:
        self._timers.close()
        self._inbox.close()

    async def _follow_config(self) -> None:
        """Each time the config topic moved: reconcile (once this worker has joined)."""
        while True:
            await self._watcher.next_change()
            if self._state.joined_once.is_set():
                try:
                    await self._inbox.ask(self._reconciler.reconcile)
                except ConflictError:
                    return  # the worker is stopping
                except Exception as exc:  # the next change or assignment tries again
                    log.error("reconcile failed", error=repr(exc), exc_info=exc)
