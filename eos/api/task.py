"""The task side of the API: :class:`SourceTask` and its context."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from eos.api.records import RecordBlock, RecordMetadata, SourcePartition, SourceRecord

T = TypeVar("T")


class OffsetStorageReader(Protocol):
    """Reads the committed offsets of this connector's source partitions.

    With a separate ``offsets.storage.topic`` the view is combined: the
    connector's own topic wins; partitions found only in the worker's global
    offsets topic come from there.
    """

    async def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        """The committed offset of ``partition``, or None if it has none."""

    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[dict[str, Any] | None]:
        """Committed offsets of ``partitions``, in the same order (None where none)."""


class TransactionContext(Protocol):
    """Lets a task define transaction boundaries (``transaction.boundary=connector``).

    Without a record, the request applies after the next batch returned by
    ``poll`` has been sent; with a record, right after that record. A
    record-level request wins over a batch-level one. Asking to commit and
    abort the same batch or record fails the task. Records of an aborted
    transaction never become visible, but their offsets still advance (abort
    means "drop these records", not "rewind").
    """

    def commit_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None: ...

    def abort_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None: ...


class WorkerResources(Protocol):
    """What the worker shares with every task it runs.

    ``settings`` are the worker settings under the prefixes that connector plugins
    reserve (:attr:`SourceConnector.worker_settings`).
    :meth:`shared` returns one object per worker and key, created on first use
    and closed (in a thread) when the worker stops — e.g. a Spark session.
    :meth:`run_blocking` runs a blocking call in the worker's bounded thread pool
    (``thread.pool.size``), never on the event loop.
    """

    @property
    def settings(self) -> Mapping[str, str]: ...

    def shared(self, key: str, factory: Callable[[], T], close: Callable[[T], None]) -> T: ...

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T: ...


class BackgroundTasks(Protocol):
    """Where :meth:`SourceTaskContext.start_soon` runs coroutines (an anyio task group
    has this method)."""

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any: ...


@dataclass(frozen=True)
class SourceTaskContext:
    """Given to :meth:`SourceTask.start`.

    ``transaction_context`` is present only when the connector runs with
    ``transaction.boundary=connector`` and exactly-once enabled. ``background`` is
    where :meth:`start_soon` runs coroutines (the runtime's task group for this task).
    """

    connector: str
    task_id: int
    offset_reader: OffsetStorageReader
    resources: WorkerResources
    transaction_context: TransactionContext | None = None
    background: BackgroundTasks | None = None
    events: Callable[[str, int], None] | None = None
    """Where :meth:`count` reports (the worker's metrics)."""
    values: Callable[[str, float], None] | None = None
    """Where :meth:`gauge` reports (the worker's metrics)."""

    def count(self, event: str, amount: int = 1) -> None:
        """Count ``amount`` occurrences of a connector-defined ``event`` (e.g.
        ``"changed_files"``): exported per task as ``eos_task_events_total{event=...}``.
        Use a few fixed event names, never values (each name is a Prometheus series)."""
        if self.events is not None:
            self.events(event, amount)

    def gauge(self, name: str, value: float) -> None:
        """Set a connector-defined value that goes up and down (e.g. ``"slot_lag_bytes"``):
        exported per task as ``eos_task_value{gauge=...}`` until the task is gone. Use a
        few fixed names, with the unit in the name."""
        if self.values is not None:
            self.values(name, value)

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``await func(*args)`` in the background while the task runs, e.g. to read
        ahead of :meth:`SourceTask.poll`. It is cancelled once :meth:`SourceTask.stop`
        has returned; an exception from it fails the task as one from ``poll`` would
        (the open transaction is aborted). Never start threads of your own: blocking
        work goes through ``resources.run_blocking``."""
        if self.background is None:
            raise RuntimeError(
                "this SourceTaskContext has no background task group: the eos runtime "
                "provides one; elsewhere pass background=<an anyio task group>"
            )
        self.background.start_soon(func, *args)


class SourceTask(ABC):
    """One task: reads its share of the source and returns records.

    :meth:`poll` may be cancelled when the task stops; records it had not yet
    returned are simply not delivered. Progress must be tracked only through
    the offsets the framework stores, never through :meth:`commit` or
    :meth:`commit_record` (they are not guaranteed to run before a crash).
    """

    def version(self) -> str:
        return "0.0.0"

    @abstractmethod
    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        """Start; read where to resume with ``context.offset_reader``."""

    @abstractmethod
    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        """The next records, or None/empty when there are none right now.
        May wait a little for data; should not wait for long. Rows already encoded
        go fastest as :class:`RecordBlock` s."""

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """Called after the transaction holding ``record`` committed (``metadata`` is
        None if a transform dropped the record)."""

    async def commit(self) -> None:
        """Called after each successful commit, after :meth:`commit_record` calls."""

    @abstractmethod
    async def stop(self) -> None:
        """Release resources. Called once, after the last poll."""
