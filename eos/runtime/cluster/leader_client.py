"""Requests from this worker to the leader over REST (docs/cluster.md).

Internal requests are signed with the cluster's session key
(:mod:`eos.runtime.cluster.signatures`): a fencing round for a connector about to start
tasks here, and the task configs of a connector running here. If the leader
refuses the signature because the key rotated meanwhile, the config topic is
read again and the request retried once with the new key.

The leader's answers become eos errors: 409 → :class:`~eos.errors.ConflictError`
(the round was cancelled, the connector is gone, or that worker is no longer the
leader); 500 → :class:`~eos.errors.TaskError` with the leader's message (e.g.
what to fix for fencing to work); no answer, 503, or a signature refusal →
:class:`~eos.errors.RetriableError`.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Awaitable, Callable
from urllib.parse import quote

import httpx
import structlog

from eos.errors import ConflictError, EosError, RequestTooLargeError, RetriableError, TaskError
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.cluster.signatures import sign
from eos.storage.config_log import SessionKey

log = structlog.get_logger(__name__)

KeySource = Callable[[bool], Awaitable[SessionKey | None]]
"""The cluster's session key; ``True`` reads the config topic first."""


class LeaderClient:
    def __init__(
        self,
        keys: KeySource,
        *,
        timeout: float,
        clock: Clock | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        """``verify``: how the leader's certificate is checked when its URL is https
        (the cluster's CA, :meth:`~eos.config.rest_security.RestTls.client_context`)."""
        self._keys = keys
        self._timeout = timeout
        self._clock = clock or SystemClock()
        self._verify = verify

    async def fence(self, leader_url: str, connector: str) -> None:
        await self._signed("PUT", leader_url, f"/connectors/{quote(connector, safe='')}/fence", b"")

    async def put_task_configs(
        self, leader_url: str, connector: str, configs: list[dict[str, str]]
    ) -> None:
        body = json.dumps(configs).encode()
        path = f"/connectors/{quote(connector, safe='')}/tasks"
        await self._signed("POST", leader_url, path, body)

    async def put_connector_config(
        self, leader_url: str, connector: str, config: dict[str, str]
    ) -> bool:
        """A user's connector config (from the command line), sent to the leader.
        True if it created the connector."""
        path = f"/connectors/{quote(connector, safe='')}/config"
        response = await self._send("PUT", leader_url, path, json.dumps(config).encode(), {})
        return response.status_code == 201

    async def _signed(self, method: str, base: str, path: str, body: bytes) -> None:
        key = await self._keys(False) or await self._keys(True)
        if key is None:
            raise RetriableError("the cluster has no session key yet")
        for attempt in (1, 2):
            now = self._clock.wall_ms()
            headers = sign(key.key, key.algorithm, method, path, body, now)
            try:
                await self._send(method, base, path, body, headers)
                return
            except _Refused as refused:
                fresh = await self._keys(True)
                if attempt == 2 or fresh is None or fresh == key:
                    raise RetriableError(f"the leader refused the signature: {refused}") from None
                log.info("session key rotated; retrying with the new one", path=path)
                key = fresh

    async def _send(
        self, method: str, base: str, path: str, body: bytes, headers: dict[str, str]
    ) -> httpx.Response:
        url = f"{base.rstrip('/')}{path}"
        headers = {**headers, "Content-Type": "application/json"}
        try:
            async with httpx.AsyncClient(timeout=self._timeout, verify=self._verify) as http:
                response = await http.request(
                    method, url, content=body, headers=headers, params={"forward": "true"}
                )
        except httpx.HTTPError as exc:
            raise RetriableError(
                f"the leader at {base} did not answer {method} {path}: {exc!r}"
            ) from exc
        if response.is_success:
            return response
        raise _error(response, method, path)


class _Refused(EosError):
    """403: the signature was refused (maybe the session key rotated)."""


def _error(response: httpx.Response, method: str, path: str) -> EosError:
    try:
        message = str(response.json().get("message", response.text))
    except ValueError:
        message = response.text
    status = response.status_code
    what = f"{method} {path} → {status}: {message}"
    if status == 403:
        return _Refused(what)
    if status == 409:
        return ConflictError(message)
    if status == 413:
        return RequestTooLargeError(
            f"{what}; raise rest.max.request.bytes on every worker (it must exceed the body)"
        )
    if status == 500:
        return TaskError(f"the leader could not do {method} {path}: {message}")
    return RetriableError(what)
