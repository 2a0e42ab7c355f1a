"""The replication connection (psycopg2's ``LogicalReplicationConnection``; blocking calls,
run in the worker's thread pool one at a time, never two at once).

The slot's confirmed position moves only when :meth:`ReplicationStream.confirm` was told
so — the task does it after the Kafka transaction holding the changes committed — and
is sent to the server at the next :meth:`ReplicationStream.read`. psycopg2 answers the
server's keepalives with the last position given, never one of its own.
"""

from __future__ import annotations

import contextlib
import select
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.connectors.postgres_cdc.catalog import CdcSetupError, connect
from services.connectors.postgres_cdc.pgoutput import parse_lsn

if TYPE_CHECKING:
    from services.connectors.postgres_cdc.settings import CdcSettings


@dataclass(frozen=True)
class NewSlot:
    consistent_lsn: int
    snapshot: str | None
    """The exported snapshot's name: valid while this connection runs no other command."""


class SlotInUse(RuntimeError):
    """Another connection streams from the slot (a predecessor not yet gone, or another
    consumer)."""


class ReplicationStream:
    def __init__(self, settings: CdcSettings) -> None:
        self._settings = settings
        self._conn: Any = None
        self._cur: Any = None
        self._to_confirm = 0
        self._confirmed = 0
        self.wal_end = 0
        self._behind_since: float | None = None
        """When the server's WAL first went past what Kafka holds (None: it has not)."""

    @property
    def closed(self) -> bool:
        return self._conn is None

    def open(self) -> None:
        from psycopg2.extras import LogicalReplicationConnection

        self._conn = connect(self._settings, connection_factory=LogicalReplicationConnection)
        self._cur = self._conn.cursor()

    def create_slot(self, name: str, export: bool, temporary: bool = False) -> NewSlot:
        """Create a pgoutput slot; with ``export``, its snapshot stays importable until
        this connection's next command."""
        import psycopg2

        kind = "TEMPORARY LOGICAL" if temporary else "LOGICAL"
        mode = "EXPORT_SNAPSHOT" if export else "NOEXPORT_SNAPSHOT"
        try:
            self._cur.execute(f'CREATE_REPLICATION_SLOT "{name}" {kind} pgoutput {mode}')
        except psycopg2.errors.DuplicateObject:
            raise SlotInUse(f"replication slot {name} was created meanwhile") from None
        except psycopg2.Error as exc:
            raise CdcSetupError(
                f"cannot create replication slot {name}: {_first_line(exc)} (check "
                "max_replication_slots and max_wal_senders in postgresql.conf)"
            ) from None
        _, lsn, snapshot, _ = self._cur.fetchone()
        return NewSlot(parse_lsn(lsn), snapshot)

    def start(self, slot: str, start_lsn: int) -> None:
        """Stream ``slot``'s changes from ``start_lsn`` (the server starts at the slot's
        confirmed position if that is later)."""
        import psycopg2

        options = {"proto_version": "1", "publication_names": self._settings.publication}
        try:
            self._cur.start_replication(
                slot_name=slot, decode=False, start_lsn=start_lsn, options=options,
                status_interval=10,
            )  # fmt: skip
        except psycopg2.errors.ObjectInUse as exc:
            raise SlotInUse(_first_line(exc)) from None
        except psycopg2.errors.UndefinedObject as exc:
            raise CdcSetupError(
                f"{_first_line(exc)}: the replication slot {slot} is gone (dropped by "
                "someone, or never created); its changes since the last offset are lost. "
                "Set snapshot.mode=when_needed to take a new snapshot"
            ) from None
        self._confirmed = self._to_confirm = max(self._to_confirm, start_lsn)

    def confirm(self, lsn: int) -> None:
        """Let the slot move to ``lsn`` (sent with the next :meth:`read`)."""
        self._to_confirm = max(self._to_confirm, lsn)

    def lag(self, now: float) -> tuple[int, float]:
        """(bytes, seconds): the WAL the server has beyond what Kafka holds (what the
        slot keeps), and how long there has been some (0 when none)."""
        behind = max(0, self.wal_end - self._to_confirm)
        if behind == 0:
            self._behind_since = None
            return 0, 0.0
        if self._behind_since is None:
            self._behind_since = now
        return behind, now - self._behind_since

    def read(self, limit: int, timeout: float) -> list[tuple[int, bytes]]:
        """Up to ``limit`` messages ``(wal start, payload)``, waiting at most ``timeout``
        seconds for the first one; sends the position to confirm first."""
        cur = self._cur
        if self._to_confirm > self._confirmed:
            cur.send_feedback(flush_lsn=self._to_confirm, force=True)
            self._confirmed = self._to_confirm
        messages: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(messages) < limit:
            message = cur.read_message()
            if message is not None:
                messages.append((message.data_start, bytes(message.payload)))
                continue
            self.wal_end = max(self.wal_end, cur.wal_end)
            left = deadline - time.monotonic()
            if messages or left <= 0:
                break
            select.select([self._conn], [], [], min(left, 0.5))
        self.wal_end = max(self.wal_end, cur.wal_end)
        return messages

    def close(self) -> None:
        """Close, having first sent the position to confirm if it moved since the last
        :meth:`read`."""
        if self._conn is not None:
            if self._to_confirm > self._confirmed and self._conn.closed == 0:
                with contextlib.suppress(Exception):  # the server may be gone
                    self._cur.send_feedback(flush_lsn=self._to_confirm, force=True)
            self._conn.close()
            self._conn = self._cur = None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
