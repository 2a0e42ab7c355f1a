"""What every assignor works with: the work of a cluster, its members, and the
answer — who should run what.

An assignor takes part in the rebalance protocol in four ways (the group protocol's own
parts): its :attr:`~Assignor.name` (workers list assignors in order of preference, and the
group uses the first every member lists); :meth:`~Assignor.subscription`, the user data
each member sends with its join (JSON, or bytes); :meth:`~Assignor.assign`, run on the
leader over every member's data; :meth:`~Assignor.on_assignment`, run on each member with
its share and the user data the leader gave it.

:meth:`Assignor.assign` is a pure function: it takes an
:class:`AssignmentRequest` and returns an :class:`AssignmentResult`, with no I/O
and no clock of its own (time comes in ``now_ms``). It computes the *target*:
which member should own each connector and task once the rebalance is over.
How the cluster gets there (eager: everyone drops everything first;
cooperative: revoke only what moves, hand it out in a second round) is not the
assignor's business (see :mod:`eos.runtime.cluster.rebalance`).

State an assignor wants to keep from one rebalance to the next (e.g. since
when a member has been missing) goes into ``AssignmentResult.memory`` and comes
back in the next ``AssignmentRequest.memory``. It lives in the leader's memory
only: a new leader starts with an empty one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple


class TaskId(NamedTuple):
    """A task of a connector; task numbers start at 0.

    A named tuple, not a dataclass: a leader hashes, compares and sorts tens of
    thousands of them a rebalance, and a tuple does that in C (at 10 000 tasks the
    dataclass's generated ``__hash__`` and ``__lt__`` took half the round; see
    ``bench/assignors.py``)."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


@dataclass(frozen=True)
class Assignment:
    """Connectors and tasks, as a member owns them or should own them."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    @classmethod
    def of(cls, connectors: Iterable[str] = (), tasks: Iterable[TaskId] = ()) -> Assignment:
        return cls(frozenset(connectors), frozenset(tasks))

    @classmethod
    def union(cls, assignments: Iterable[Assignment]) -> Assignment:
        """Everything any of ``assignments`` holds (one pass, not a chain of ``|``)."""
        listed = list(assignments)
        return cls(
            frozenset().union(*(a.connectors for a in listed)),
            frozenset().union(*(a.tasks for a in listed)),
        )

    def __len__(self) -> int:
        return len(self.connectors) + len(self.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def __or__(self, other: Assignment) -> Assignment:
        return Assignment(self.connectors | other.connectors, self.tasks | other.tasks)

    def __and__(self, other: Assignment) -> Assignment:
        return Assignment(self.connectors & other.connectors, self.tasks & other.tasks)

    def __sub__(self, other: Assignment) -> Assignment:
        return Assignment(self.connectors - other.connectors, self.tasks - other.tasks)


EMPTY = Assignment()


@dataclass(frozen=True)
class Member:
    """A member of the group as the leader sees it in its JoinGroup metadata."""

    member_id: str
    url: str = ""
    """The worker's REST URL."""
    priority: int = 0
    """``worker.priority``: the failover assignor gives everything to the highest."""
    tenure_ms: int = 0
    """How long the worker has been in the group without interruption, as it
    reported when it joined (0 for a worker that has just started)."""
    owned: Assignment = EMPTY
    """What the member runs now (cooperative) or ran before this rebalance (eager)."""
    user_data: Any = None
    """What the member's assignor returned from :meth:`Assignor.subscription` (JSON
    values, or bytes; None if nothing)."""


def _frozen() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class AssignmentRequest:
    members: tuple[Member, ...]
    """Every member of this generation, sorted by member id."""
    connectors: tuple[str, ...]
    """Every connector of the cluster, sorted."""
    tasks: tuple[TaskId, ...]
    """Every task of the cluster, sorted."""
    now_ms: int = 0
    """The leader's clock, in ms (monotonic: only differences mean anything)."""
    memory: Mapping[str, Any] = field(default_factory=_frozen)
    """What this assignor returned as ``memory`` last time on this leader ({} if none)."""

    def owners(self) -> dict[str | TaskId, list[str]]:
        """Each connector and task → the member ids that claim to own it now."""
        claims: dict[str | TaskId, list[str]] = {}
        for member in self.members:
            items: list[str | TaskId] = [*sorted(member.owned.connectors)]
            items.extend(sorted(member.owned.tasks))
            for item in items:
                claims.setdefault(item, []).append(member.member_id)
        return claims


@dataclass(frozen=True)
class AssignmentResult:
    assignments: Mapping[str, Assignment]
    """The target for every member id of the request (an empty Assignment for a
    member that gets nothing). Each connector and task appears at most once;
    one left out is held back (e.g. waiting for a lost member to return)."""
    next_rebalance_ms: int | None = None
    """Ask the leader for another rebalance after this many ms (held-back work,
    a settle time); None: no need."""
    memory: Mapping[str, Any] = field(default_factory=_frozen)
    """State to receive back in the next request (JSON-like values only)."""
    user_data: Mapping[str, Any] = field(default_factory=_frozen)
    """Member id → what its :meth:`Assignor.on_assignment` receives with its share
    (JSON values, or bytes); a member left out gets None."""


@dataclass(frozen=True)
class AssignorSettings:
    """The worker settings assignors use."""

    scheduled_rebalance_max_delay_ms: int = 300_000
    """How long work of a member that left is held for it to come back (cooperative)."""
    failover_settle_ms: int = 10_000
    """How long a returning higher-priority member must have been in the group
    before work moves back to it (failover)."""
    raw: Mapping[str, str] = field(default_factory=_frozen)
    """Every worker setting, for assignors plugged in by users."""


class Assignor(ABC):
    """Computes the target assignment. Subclasses set :attr:`name` (the value of
    the worker setting ``assignor`` that selects them, and the protocol name members
    agree on) and implement :meth:`assign`; :meth:`subscription` and
    :meth:`on_assignment` are optional."""

    name: ClassVar[str]

    def __init__(self, settings: AssignorSettings) -> None:
        self.settings = settings

    def subscription(self) -> Any:
        """This member's user data, sent with every join and given to the leader's
        :meth:`assign` as :attr:`Member.user_data`: JSON values, or bytes (None: none).
        Called before each join, on every member."""
        return None

    @abstractmethod
    def assign(self, request: AssignmentRequest) -> AssignmentResult:
        """The target assignment; must not raise for any well-formed request."""

    def on_assignment(self, assigned: Assignment, user_data: Any) -> None:
        """Called on every member once a rebalance that used this assignor completed:
        what the member runs from now on, and what :attr:`AssignmentResult.user_data`
        held for it. Must not raise (it is logged if it does) and must not block."""
