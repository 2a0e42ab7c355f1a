"""Kafka's group membership protocol, for a group of eos's own protocol type.

A thin layer over aiokafka's protocol classes (aiokafka's consumer coordinator
is consumer-specific): FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and DescribeGroups, each one request to the group's coordinator.
Answers come back as plain values with the broker's error code; deciding what
an error means for the member is :mod:`eos.runtime.cluster.membership`'s job.

A request that cannot reach the coordinator (connection refused, timed out,
coordinator not known) raises :class:`~eos.errors.CoordinatorNotAvailable`
and forgets the coordinator, so the next request looks it up again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import structlog
from aiokafka import errors as kerrors
from aiokafka.client import AIOKafkaClient, ConnectionGroup, CoordinationType
from aiokafka.protocol.admin import DescribeGroupsRequest
from aiokafka.protocol.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

from eos.errors import CoordinatorNotAvailable
from eos.kafka.clients import ClientConfig, make_client

log = structlog.get_logger(__name__)

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
GROUP_AUTHORIZATION_FAILED = 30
MEMBER_ID_REQUIRED = 79
"""The group error codes the membership protocol handles by name."""

_UNREACHABLE = (
    kerrors.KafkaConnectionError,
    kerrors.NodeNotReadyError,
    kerrors.RequestTimedOutError,
    kerrors.CoordinatorNotAvailableError,
    kerrors.NotCoordinatorError,
    kerrors.CoordinatorLoadInProgressError,
    kerrors.StaleMetadata,
    TimeoutError,
)


def error_name(code: int) -> str:
    """The broker's name of an error code, e.g. ``REBALANCE_IN_PROGRESS``."""
    error = kerrors.for_code(code)
    return str(getattr(error, "message", error.__name__))


@dataclass(frozen=True)
class JoinResponse:
    error: int
    generation: int = -1
    protocol: str = ""
    leader_id: str = ""
    member_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()
    """(member id, metadata) of every member; filled in for the leader only."""


@dataclass(frozen=True)
class SyncResponse:
    error: int
    assignment: bytes = b""


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    client_host: str
    metadata: bytes


@dataclass(frozen=True)
class GroupDescription:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...]


class GroupClient:
    """Requests to the coordinator of one group, over one aiokafka client.

    ``request_timeout`` (seconds) bounds JoinGroup and SyncGroup, which may wait
    a whole rebalance; heartbeats and the rest use ``short_timeout``.
    """

    def __init__(
        self,
        config: ClientConfig,
        group_id: str,
        *,
        client_id: str,
        request_timeout: float,
        short_timeout: float,
    ) -> None:
        self.group_id = group_id
        self._client: AIOKafkaClient = make_client(
            config, client_id=client_id, request_timeout_ms=int(request_timeout * 1000)
        )
        self._bootstrap_servers = config.bootstrap_servers
        self._request_timeout = request_timeout
        self._short_timeout = short_timeout
        self._coordinator: int | None = None
        self._versions_logged: set[str] = set()

    async def start(self) -> None:
        try:
            await self._client.bootstrap()
        except kerrors.KafkaError as exc:
            raise CoordinatorNotAvailable(
                f"cannot reach the Kafka cluster at {self._bootstrap_servers}: {exc}"
            ) from exc

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._client.close()

    @property
    def coordinator(self) -> int | None:
        """The node id of the group coordinator, if known."""
        return self._coordinator

    def forget_coordinator(self) -> None:
        self._coordinator = None

    async def find_coordinator(self) -> int:
        if self._coordinator is None:
            try:
                with anyio.fail_after(self._short_timeout):
                    node = await self._client.coordinator_lookup(
                        CoordinationType.GROUP, self.group_id
                    )
            except _UNREACHABLE as exc:
                raise CoordinatorNotAvailable(
                    f"no coordinator for group {self.group_id!r} yet: {exc!r}"
                ) from exc
            self._coordinator = int(node)
            log.info("group coordinator found", group=self.group_id, node=self._coordinator)
        return self._coordinator

    async def join(
        self,
        *,
        member_id: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
    ) -> JoinResponse:
        request = JoinGroupRequest(
            self.group_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            member_id,
            None,
            protocol_type,
            list(protocols),
        )
        r = await self._send(request, self._request_timeout)
        members = tuple((m[0], bytes(m[-1])) for m in r.members)
        return JoinResponse(
            r.error_code, r.generation_id, r.group_protocol or "", r.leader_id, r.member_id, members
        )

    async def sync(
        self, *, generation: int, member_id: str, assignments: Sequence[tuple[str, bytes]]
    ) -> SyncResponse:
        request = SyncGroupRequest(self.group_id, generation, member_id, None, list(assignments))
        r = await self._send(request, self._request_timeout)
        return SyncResponse(r.error_code, bytes(r.member_assignment or b""))

    async def heartbeat(self, *, generation: int, member_id: str) -> int:
        r = await self._send(HeartbeatRequest(self.group_id, generation, member_id))
        return int(r.error_code)

    async def leave(self, *, member_id: str) -> int:
        r = await self._send(LeaveGroupRequest(self.group_id, member_id))
        return int(r.error_code)

    async def describe(self) -> GroupDescription:
        """The group as the coordinator describes it (who is in it, with which protocol)."""
        r = await self._send(DescribeGroupsRequest([self.group_id]))
        group = r.groups[0]
        members = tuple(DescribedMember(m[0], m[2], bytes(m[3] or b"")) for m in group[5])
        return GroupDescription(group[2], group[3], group[4], members)

    async def _send(self, request: Any, timeout: float | None = None) -> Any:
        node = await self.find_coordinator()
        try:
            with anyio.fail_after(timeout or self._short_timeout):
                response = await self._client.send(
                    node, request, group=ConnectionGroup.COORDINATION
                )
        except _UNREACHABLE as exc:
            self.forget_coordinator()
            raise CoordinatorNotAvailable(
                f"group coordinator (node {node}) did not answer {type(request).__name__}: {exc!r}"
            ) from exc
        self._log_version(response)
        code = getattr(response, "error_code", NONE)
        if code in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
            self.forget_coordinator()
        return response

    def _log_version(self, response: Any) -> None:
        name = type(response).__name__
        if name not in self._versions_logged:
            self._versions_logged.add(name)
            log.debug("group protocol version in use", response=name)
