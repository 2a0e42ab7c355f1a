"""The connector actor: runs one :class:`~eos.api.SourceConnector` and hands its
task configurations to the leader.

On start and whenever the connector calls ``request_task_reconfiguration``, it
asks the connector for ``task_configs(tasks.max)`` and hands them over (the
leader writes them to the config topic only if they changed). A handover that
fails (no leader yet, the leader moving) is retried with backoff until it
succeeds or the connector stops: task configs are never dropped. Task configs
larger than the leader accepts (``rest.max.request.bytes``) fail the connector
with a message saying so, as no retry can help.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable, Mapping

import anyio
import structlog
from anyio.abc import TaskStatus

from eos.api import SourceConnector
from eos.errors import EosError, RequestTooLargeError
from eos.state import State

TaskConfigsSink = Callable[[str, list[dict[str, str]]], Awaitable[None]]
StatusSink = Callable[[State, str | None], Awaitable[None]]

_MAX_BACKOFF = 10.0


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
        retry_backoff: float = 0.1,
    ) -> None:
        self.name = name
        self.connector = connector
        self.config = dict(config)
        self.max_tasks = max_tasks
        self._on_task_configs = on_task_configs
        self._status = status
        self._retry_backoff = retry_backoff
        self._reconfigure = anyio.Event()
        self._failure: BaseException | None = None
        self.failed = False
        self.failure: BaseException | None = None
        """What failed the connector (with ``trace``), once it has failed."""
        self.trace: str | None = None
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
            await self._status(State.RUNNING, None)
            while True:
                self._reconfigure = anyio.Event()
                configs = self.connector.task_configs(self.max_tasks)[: self.max_tasks]
                await self._hand_over([dict(c) for c in configs])
                await self._reconfigure.wait()
                if self._failure is not None:
                    raise self._failure
        except Exception as exc:
            self.failed, self.failure = True, exc
            self.log.error("connector failed", error=repr(exc))
            self.trace = f"{exc}\n\n{''.join(traceback.format_exception(exc))}"
            with anyio.CancelScope(shield=True):
                await self._status(State.FAILED, self.trace)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.connector.stop()
                except Exception as exc:
                    self.log.warning("connector stop raised", error=repr(exc))
            self.stopped.set()

    async def _hand_over(self, configs: list[dict[str, str]]) -> None:
        backoff = self._retry_backoff
        while True:
            try:
                await self._on_task_configs(self.name, configs)
                return
            except RequestTooLargeError:
                raise  # the connector fails with what to change
            except EosError as exc:
                self.log.info("task configs not handed over yet; retrying", error=str(exc))
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)
