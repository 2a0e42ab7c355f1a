"""Task configs larger than the leader accepts (``rest.max.request.bytes``): the 413
is not retried for ever; the connector fails with what to change."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import httpx

from eos.api import SourceConnector, SourceTask
from eos.errors import RequestTooLargeError
from eos.runtime.cluster.leader_client import _error
from eos.runtime.connector_actor import ConnectorActor
from eos.state import State


def test_a_413_from_the_leader_is_not_retriable_and_names_the_setting() -> None:
    answer = httpx.Response(
        413,
        json={"error_code": 413, "message": "Request body is larger than 1024 bytes "
              "(rest.max.request.bytes)"},
    )  # fmt: skip
    error = _error(answer, "POST", "/connectors/c/tasks")
    assert isinstance(error, RequestTooLargeError)
    assert not error.retriable
    assert "raise rest.max.request.bytes on every worker" in str(error)
    assert "POST /connectors/c/tasks → 413" in str(error)


class Wide(SourceConnector):
    """Task configs of 2 kB each."""

    async def start(self, config: Mapping[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{"big": "x" * 2000}] * max_tasks

    async def stop(self) -> None:
        pass


async def test_the_connector_fails_with_the_message() -> None:
    calls: list[int] = []
    statuses: list[tuple[State, str | None]] = []

    async def leader(name: str, configs: list[dict[str, str]]) -> None:
        calls.append(len(configs))
        raise RequestTooLargeError("POST /connectors/c/tasks → 413: too large; raise it")

    async def status(state: State, trace: str | None) -> None:
        statuses.append((state, trace))

    actor = ConnectorActor(
        "c", Wide(), {"name": "c"}, 3, on_task_configs=leader, status=status, retry_backoff=0.01
    )
    with anyio.fail_after(10):
        await actor.run()
    assert calls == [3]  # once: no retry can help
    assert actor.failed
    state, trace = statuses[-1]
    assert state is State.FAILED
    assert trace is not None
    assert "raise it" in trace
