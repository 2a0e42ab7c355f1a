"""What this worker knows of its cluster: the facts of the last rebalance and the config
topic as last read (docs/cluster.md).

:class:`ClusterState` is written only inside the coordinator's mailbox (by the group
listener, as assignments arrive); anyone may read it: the REST API, the supervisor
(for status writes and task start-ups), the requests to the leader. It is made first,
so that the coordinator's duties, the supervisor and the membership all get it at
construction and none needs the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from eos.errors import ConflictError, NotLeaderError, WorkerStartingError
from eos.runtime.cluster.assignors.base import EMPTY, Assignment
from eos.runtime.cluster.group_metadata import MemberInfo, Style
from eos.storage.config_log import ConfigLog, ConfigSnapshot, SessionKey


@dataclass(frozen=True)
class ClusterView:
    """The cluster as this worker sees it (``GET /``)."""

    generation: int
    member_id: str
    leader_id: str
    leader_url: str
    is_leader: bool
    members: tuple[MemberInfo, ...]
    protocol: str
    assignor: str
    error: str | None
    assigned: Assignment
    rebalancing: bool
    """A rebalance is pending or under way (the leader may change)."""


class ClusterState:
    def __init__(self, config_log: ConfigLog, rest_url: str) -> None:
        self.config_log = config_log
        self.rest_url = rest_url
        self.generation = -1
        self.member_id = ""
        self.leader_id = ""
        self.leader_url = ""
        self.members: tuple[MemberInfo, ...] = ()
        self.protocol = ""
        self.style: Style = "cooperative"
        self.assigned: Assignment = EMPTY
        self.error: str | None = None
        """Why this worker cannot join its group (None once it could)."""
        self.joined_once = anyio.Event()
        self.serving = False
        """True once the config topic was first read: requests may be answered."""
        self.closed = False
        """True once the worker is stopping: the coordinator takes no more calls."""

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    @property
    def leader_exactly_once(self) -> str:
        """The leader's ``exactly.once.source.support`` as its group metadata says
        ("": unknown, or a leader of an earlier release)."""
        leader = (m for m in self.members if m.member_id == self.leader_id)
        return next((m.exactly_once for m in leader), "")

    @property
    def config(self) -> ConfigSnapshot:
        """The config topic as last read (by anyone)."""
        return self.config_log.snapshot

    async def snapshot(self) -> ConfigSnapshot:
        """The config topic read to its end. Not through the mailbox: reads are
        serialised (and shared by concurrent callers) in the store, and a snapshot is
        immutable, so REST answers and task start-ups never queue behind the actor."""
        if self.closed:
            raise ConflictError("the worker is shutting down")
        if not self.serving:
            raise WorkerStartingError(
                "the worker is starting (creating its internal topics and reading the"
                " config topic); try again in a few seconds"
            )
        return await self.config_log.refresh()

    async def session_key(self, refresh: bool) -> SessionKey | None:
        """The cluster's session key (``refresh``: read the config topic first)."""
        if refresh:
            return (await self.snapshot()).session_key
        return self.config.session_key

    def require_leader(self) -> None:
        """Raise :class:`NotLeaderError` unless this worker leads the group."""
        if self.is_leader:
            return
        if not self.leader_url:
            raise NotLeaderError(
                "no leader is known yet (the worker is joining its group); retry shortly", None
            )
        raise NotLeaderError(
            f"this worker ({self.rest_url}) is not the leader of the cluster; "
            f"send the request to the leader at {self.leader_url}",
            self.leader_url,
        )

    def view(self, assignor: str, *, rebalancing: bool) -> ClusterView:
        return ClusterView(
            generation=self.generation,
            member_id=self.member_id,
            leader_id=self.leader_id,
            leader_url=self.leader_url,
            is_leader=self.is_leader,
            members=self.members,
            protocol=self.protocol,
            assignor=assignor,
            error=self.error,
            assigned=self.assigned,
            rebalancing=rebalancing,
        )
