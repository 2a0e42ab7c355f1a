"""What the worker gives a source task actor: its identity (:class:`TaskSpec`), its frozen
settings and collaborators (:class:`TaskDeps`), and the ports those collaborators
implement (status sink, start-up gate, offset reader, boundary policy, producer factory).

Everything a task runner uses comes through here, built by the worker once per task:
nothing is looked up or patched on afterwards, so a unit test builds the same object with
fakes (a scripted producer, a :class:`~eos.runtime.clock.ManualClock`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

import anyio

from eos.api import OffsetStorageReader, RecordBlock, SourceRecord
from eos.config.converters import SIMPLE_HEADER_CONVERTER
from eos.config.error_handling import DEFAULTS, ErrorHandling
from eos.converters import Converter, SchemaConverter
from eos.converters.simple import SimpleHeaderConverter
from eos.runtime.clock import Clock, SystemClock
from eos.runtime.observer import NullTaskObserver, TaskObserver
from eos.runtime.resources import SharedResources
from eos.runtime.task.producers import ProducerClient, ProducerFactory, make_task_producer
from eos.runtime.task.producers.base import Outgoing
from eos.state import State

if TYPE_CHECKING:
    from eos.api import TransactionContext
    from eos.kafka.clients import ClientConfig
    from eos.transforms import TransformChain

StatusSink = Callable[[State, str | None], Awaitable[None]]
"""Writes this task's status: (state, trace)."""

Explain = Callable[[BaseException], Awaitable[BaseException]]
"""Turns a task's failure into the error its status shows."""

OffsetsCommitted = Callable[[list[tuple[bytes, bytes | None]]], None]
"""Receives the offset records of each commit (the offset mirror); must not block."""

CreateTopic = Callable[[str, int], Awaitable[object]]
"""Creates a topic (name, replication factor; one partition) unless it exists, on the
cluster the task's producer writes to (the dead-letter topic)."""

TopicDiscovered = Callable[[str], None]
"""Receives each topic the task writes to, the first time it does (KIP-558 active
topics); must not block (it is called on the send path)."""


@dataclass(frozen=True)
class TaskSpec:
    connector: str
    task_id: int
    generation: int
    config: Mapping[str, str]

    @property
    def transactional_id_suffix(self) -> str:
        return f"{self.connector}-{self.task_id}"


class StartGate(Protocol):
    """The start-up checks of an exactly-once task (docs/exactly-once.md, "Starting a
    task"), done by the worker."""

    async def before_producer(self, connector: str, generation: int) -> bool:
        """Fencing round, config read, task-count check, offsets topic. False: abandon."""

    async def after_producer(self, connector: str, generation: int) -> bool:
        """Config read after the producer exists: False if a new generation appeared."""

    async def offsets_topic(self) -> None:
        """Create the connector's own offsets topic, if it has one and it is missing."""


class OffsetReader(OffsetStorageReader, Protocol):
    """The task's view of its committed offsets (the worker's
    :class:`~eos.storage.offset_log.CombinedOffsetReader`)."""

    async def refresh(self, timeout: float | None = None) -> None:
        """Read the offsets topics to their ends (before the connector task starts)."""


Action = Literal["commit", "abort"]
"""What a boundary policy asks of the open transaction."""


class BoundaryPolicy(Protocol):
    """``transaction.boundary`` as an object (:mod:`eos.runtime.task.exactly_once_task` has the
    three): asked before each poll, after each record (only if ``per_record``) and after
    each batch; answers ``"commit"``, ``"abort"`` or None."""

    per_record: bool
    """Whether :meth:`after_record` may answer (else the loop does not ask)."""
    context: TransactionContext | None
    """What the connector's task gets as ``context.transaction_context``."""

    def before_poll(self, open_since: float | None) -> Action | None: ...

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None: ...

    def after_batch(self, open_since: float | None) -> Action | None: ...

    def forget(self) -> None:
        """Drop what the connector asked for (its task instance is being replaced)."""

    def hold(self, segment: Sequence[Outgoing]) -> Sequence[Outgoing]:
        """What of a polled segment to write now; the rest waits for :meth:`release`
        (docs/sizing.md: the interval boundary holds records until the commit)."""

    def release(self) -> list[Outgoing]:
        """The records held, to write before the offsets that cover them."""

    def drop(self) -> int:
        """Forget the records held (the transaction is aborted); how many there were."""


@dataclass
class TaskDeps:
    """What the worker gives a task actor (frozen settings and its collaborators)."""

    client_config: ClientConfig
    group_id: str
    offsets_topic: str
    offset_reader: OffsetReader
    key_converter: Converter
    value_converter: Converter
    status: StatusSink
    resources: SharedResources
    graceful_timeout: float
    flush_interval_ms: int
    transaction_timeout_ms: int
    producer_client: ProducerClient = "aiokafka"
    boundary: BoundaryPolicy | None = None
    """Exactly-once only: when transactions end (None: after every poll batch)."""
    gate: StartGate | None = None
    offsets_committed: OffsetsCommitted | None = None
    topic_discovered: TopicDiscovered | None = None
    observer: TaskObserver = field(default_factory=NullTaskObserver)
    clock: Clock = field(default_factory=SystemClock)
    startup_slots: anyio.CapacityLimiter | None = None
    """Shared by the worker's tasks: how many go through start-up at once."""
    batch_size: int = 524288
    """The producer's ``batch.size`` unless the user set one (sized by the worker from
    its task count: docs/sizing.md)."""
    explain: Explain | None = None
    """Turns a failure into the error the status shows (an authorization error becomes
    the ACLs that are missing: :func:`eos.acls.denied.explain`)."""
    make_producer: ProducerFactory = make_task_producer
    transforms: TransformChain | None = None
    """The connector's ``transforms`` (None: none), run before the converters."""
    errors: ErrorHandling = DEFAULTS
    """The connector's ``errors.*`` settings."""
    header_converter: SchemaConverter = field(default_factory=SimpleHeaderConverter)
    """Converts header values a connector gives as Connect values (bytes pass as they are)."""
    converter_names: tuple[str, str, str] = ("json", "json", SIMPLE_HEADER_CONVERTER)
    """``key.converter``, ``value.converter`` and ``header.converter`` as configured (named
    by dead letters)."""
    create_topic: CreateTopic | None = None
    """Creates the dead-letter topic (None: it must exist)."""
