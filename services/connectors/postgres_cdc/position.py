"""How far the connector has written, as its source offset, and the one rule that keeps a
row from appearing twice across a snapshot and the stream.

The stream part is Debezium's (``lsn_commit``: the commit LSN of the last database
transaction written, ``lsn``: where the slot may be confirmed — that commit LSN, or a
heartbeat's WAL position — and ``txId``) plus ``events``
when only the first ``events`` changes of that transaction are written (a transaction
split at ``transaction.max.events``).

The snapshot part records the tables in snapshot order, how far the snapshot got (a
table and the key of its last row written) and the *reads*: ``[table, after, lsn]``, the
rows from ``(table, after)`` on were read as of the slot position ``lsn``. The first read
uses the slot's own exported snapshot; a read resumed after a crash uses a temporary
slot's (the first one died with its connection). A change from the stream whose commit
LSN is below the read position of its row's key is already in the row's ``r`` record,
and is skipped (:meth:`Position.read_lsn`); every later change is written, after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KeyTexts = tuple[str | None, ...]


@dataclass
class Read:
    table: int
    after: KeyTexts | None
    lsn: int

    def as_json(self) -> list[Any]:
        return [self.table, None if self.after is None else list(self.after), self.lsn]

    @classmethod
    def from_json(cls, value: list[Any]) -> Read:
        table, after, lsn = value
        return cls(int(table), None if after is None else tuple(after), int(lsn))


@dataclass
class Position:
    lsn_commit: int = 0
    lsn: int = 0
    tx_id: int | None = None
    events: int | None = None
    tables: list[str] = field(default_factory=list)
    snapshot_done: bool = True
    table: int = 0
    after: KeyTexts | None = None
    reads: list[Read] = field(default_factory=list)
    incremental: bool = False
    """The snapshot under way was asked for by a signal while streaming (Debezium's
    incremental snapshot): its rows say ``snapshot=incremental``."""

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | None) -> Position | None:
        if offset is None:
            return None
        snapshot = offset.get("snapshot") or {}
        after = snapshot.get("after")
        return cls(
            lsn_commit=int(offset.get("lsn_commit", 0)),
            lsn=int(offset.get("lsn", 0)),
            tx_id=offset.get("txId"),
            events=offset.get("events"),
            tables=list(snapshot.get("tables", [])),
            snapshot_done=bool(snapshot.get("done", True)),
            table=int(snapshot.get("table", 0)),
            after=None if after is None else tuple(after),
            reads=[Read.from_json(r) for r in snapshot.get("reads", [])],
            incremental=bool(snapshot.get("incremental", False)),
        )

    def to_offset(self) -> dict[str, Any]:
        offset: dict[str, Any] = {"lsn_commit": self.lsn_commit, "lsn": self.lsn}
        if self.tx_id is not None:
            offset["txId"] = self.tx_id
        if self.events is not None:
            offset["events"] = self.events
        if self.reads or not self.snapshot_done:
            offset["snapshot"] = {
                "tables": self.tables, "done": self.snapshot_done, "table": self.table,
                "after": None if self.after is None else list(self.after),
                "reads": [r.as_json() for r in self.reads],
            }  # fmt: skip
            if self.incremental:
                offset["snapshot"]["incremental"] = True
        return offset

    def request_snapshot(self, tables: list[str]) -> bool:
        """A signal asks for ``tables`` again while streaming: an incremental snapshot
        from their start, to be read (:meth:`start_snapshot`) once this transaction is
        written; carried in the offset, so a restart takes it. False while a snapshot is
        under way or its rows still filter the stream (the signal is then ignored)."""
        if not self.snapshot_done or self.reads or not tables:
            return False
        self.tables, self.table, self.after = list(tables), 0, None
        self.snapshot_done, self.incremental = False, True
        return True

    def start_snapshot(self, tables: list[str], lsn: int) -> None:
        """A new snapshot of ``tables`` as of slot position ``lsn`` (or the rest of one
        whose exported snapshot died: from where it got, as of ``lsn``)."""
        if not self.tables or self.snapshot_done:
            self.tables, self.table, self.after, self.reads = list(tables), 0, None, []
        self.snapshot_done = False
        self.reads.append(Read(self.table, self.after, lsn))

    def snapshot_moved(self, table: int, after: KeyTexts | None) -> bool:
        """The snapshot got to ``(table, after)``; whether it is done."""
        self.table, self.after = table, after
        self.snapshot_done = table >= len(self.tables)
        return self.snapshot_done

    @property
    def filtering(self) -> bool:
        """Whether some change still to come may already be in a snapshot row."""
        return bool(self.reads)

    def last_read_lsn(self) -> int:
        return max((r.lsn for r in self.reads), default=0)

    def stream_moved(self, commit_lsn: int) -> None:
        """A transaction committed at ``commit_lsn`` was handled: once past every read's
        position, nothing can be in a snapshot row any more and the reads are dropped."""
        if self.snapshot_done and self.reads and commit_lsn >= self.last_read_lsn():
            self.reads, self.tables, self.table, self.after = [], [], 0, None
            self.incremental = False

    def reads_of(self, table: str) -> list[Read]:
        """The reads that cover rows of ``table`` (the one that covers its start first)."""
        if table not in self.tables:
            return []
        index = self.tables.index(table)
        covering = [r for r in self.reads if r.table <= index]
        if not covering:
            return []
        starting_before = [r for r in covering if r.table < index or r.after is None]
        first = starting_before[-1] if starting_before else covering[0]
        inside = [r for r in covering if r.table == index and r.after is not None]
        return [first, *(r for r in inside if r is not first)]
