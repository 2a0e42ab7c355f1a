"""Transaction boundary policies (``transaction.boundary``): when the exactly-once
task loop commits or aborts its open transaction.

- ``poll``: commit after every batch returned by ``poll`` (if anything was sent).
- ``interval``: commit once the transaction has been open for the interval.
- ``connector``: the task decides through its :class:`~eos.api.TransactionContext`.

The loop asks a policy at three points: before each poll, after each record is
sent, and after each batch. A policy answers ``"commit"``, ``"abort"`` or None.
"""

from __future__ import annotations

from typing import Literal, Protocol

import structlog

from eos.api import RecordBlock, SourceRecord
from eos.errors import TransactionRequestError
from eos.runtime.clock import Clock

Action = Literal["commit", "abort"]
log = structlog.get_logger(__name__)


class BoundaryPolicy(Protocol):
    def before_poll(self, open_since: float | None) -> Action | None: ...

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None: ...

    def after_batch(self, open_since: float | None) -> Action | None: ...


class PollBoundary:
    def before_poll(self, open_since: float | None) -> Action | None:
        return None

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return None

    def after_batch(self, open_since: float | None) -> Action | None:
        return "commit"


class IntervalBoundary:
    def __init__(self, interval_ms: int, clock: Clock) -> None:
        self.interval = interval_ms / 1000
        self.clock = clock

    def _due(self, open_since: float | None) -> Action | None:
        if open_since is not None and self.clock.monotonic() - open_since >= self.interval:
            return "commit"
        return None

    def before_poll(self, open_since: float | None) -> Action | None:
        return self._due(open_since)

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return None

    def after_batch(self, open_since: float | None) -> Action | None:
        return self._due(open_since)


class TransactionRequests:
    """The :class:`~eos.api.TransactionContext` given to tasks with connector boundaries.

    Requests are remembered until the loop reaches the record (or the end of the
    batch) they apply to. Asking for both outcomes of one record or one batch
    raises :class:`TransactionRequestError`, which fails the task.
    """

    def __init__(self) -> None:
        self._batch: Action | None = None
        self._records: dict[int, Action] = {}

    def _request(self, action: Action, record: SourceRecord | RecordBlock | None) -> None:
        if record is None:
            if self._batch not in (None, action):
                raise TransactionRequestError(
                    "the task asked to both commit and abort the transaction of the same batch"
                )
            self._batch = action
            return
        previous = self._records.get(id(record))
        if previous not in (None, action):
            raise TransactionRequestError(
                f"the task asked to both commit and abort the transaction at the record of "
                f"source partition {dict(record.source_partition)} offset "
                f"{dict(record.source_offset or {})}"
            )
        self._records[id(record)] = action

    def commit_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None:
        self._request("commit", record)

    def abort_transaction(self, record: SourceRecord | RecordBlock | None = None) -> None:
        self._request("abort", record)

    def take_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return self._records.pop(id(record), None)

    def take_batch(self) -> Action | None:
        action, self._batch = self._batch, None
        self._records.clear()  # requests for records never dispatched lapse with their batch
        return action


class ConnectorBoundary:
    def __init__(self, requests: TransactionRequests) -> None:
        self.requests = requests

    def before_poll(self, open_since: float | None) -> Action | None:
        return None

    def after_record(self, record: SourceRecord | RecordBlock) -> Action | None:
        return self.requests.take_record(record)

    def after_batch(self, open_since: float | None) -> Action | None:
        return self.requests.take_batch()
