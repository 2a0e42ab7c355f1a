"""The connector actor: runs one :class:`~eos.api.SourceConnector` and turns its
task configurations into requests to the coordinator.

On start and whenever the connector calls ``request_task_reconfiguration``, it
asks the connector for ``task_configs(tasks.max)`` and hands them to the
coordinator, which writes them to the config topic only if they changed.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable, Mapping

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.api import SourceConnector

TaskConfigsSink = Callable[[str, list[dict[str, str]]], None]
StatusSink = Callable[[str, str | None], Awaitable[None]]


class ConnectorActor:
    def __init__(
        self,
        name: str,
        connector: SourceConnector,
        config: Mapping[str, str],
        max_tasks: int,
        *,
        on_task_configs: TaskConfigsSink,
        status: StatusSink,
    ) -> None:
        self.name = name
        self.connector = connector
        self.config = dict(config)
        self.max_tasks = max_tasks
        self._on_task_configs = on_task_configs
        self._status = status
        self._reconfigure = anyio.Event()
        self._failure: BaseException | None = None
        self.stopped = anyio.Event()
        self.log = structlog.get_logger(__name__).bind(connector=name)

    # ConnectorContext -----------------------------------------------------
    def request_task_reconfiguration(self) -> None:
        self._reconfigure.set()

    def raise_error(self, error: BaseException) -> None:
        self._failure = error
        self._reconfigure.set()

    # ---------------------------------------------------------------------
    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.connector.context = self
        task_status.started()
        try:
            await self.connector.start(self.config)
            await self._status("RUNNING", None)
            while True:
                self._reconfigure = anyio.Event()
                configs = self.connector.task_configs(self.max_tasks)[: self.max_tasks]
                self._on_task_configs(self.name, [dict(c) for c in configs])
                await self._reconfigure.wait()
                if self._failure is not None:
                    raise self._failure
        except Exception as exc:
            self.log.error("connector failed", error=repr(exc))
            trace = "".join(traceback.format_exception(exc))
            with anyio.CancelScope(shield=True):
                await self._status("FAILED", f"{exc}\n\n{trace}")
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.connector.stop()
                except Exception as exc:
                    self.log.warning("connector stop raised", error=repr(exc))
            self.stopped.set()
