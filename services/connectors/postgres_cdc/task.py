"""PostgresCdcTask: the snapshot, then the stream, exactly once.

**Start.** The task checks the server and the user (:mod:`.catalog`), finds the tables
through the publication (creating it as ``publication.autocreate.mode`` says), reads its
offset and decides: a snapshot is due on a first start (``snapshot.mode=initial``,
``initial_only``, ``when_needed``), to finish one a crash interrupted, or
(``when_needed``) when the slot is gone. A missing slot is created with an exported
snapshot; a snapshot due while the slot exists (a resumed one) reads at a temporary
slot's exported snapshot instead (see :mod:`.position`).

**Snapshot.** Each poll returns one chunk (:mod:`.snapshot`) as ``r`` records; its last
record carries the progress, so the chunk is one Kafka transaction with its offset and a
crash resumes at the next chunk.

**Stream.** Each poll reads what the slot has (:mod:`.replication`), decodes it
(:mod:`.pgoutput`) and returns only whole database transactions: a transaction's records
are held until its Commit arrives, so with ``transaction.boundary`` ``poll`` or
``connector`` a database transaction is never spread over two Kafka transactions (several
may share one). One of more than ``transaction.max.events`` changes is the exception:
written in parts, each part's records marked with the ``eos.cdc.transaction.part`` header
(``<txId>:<part>``, the last part ``<txId>:<part>:last``). A change already written
(its transaction's commit LSN at or below the offset's) is skipped.

**The slot** is confirmed in :meth:`PostgresCdcTask.commit_record`: only a record whose
Kafka transaction committed moves it, to that record's ``lsn`` (the commit LSN of the
last database transaction it holds). When the captured tables
are quiet, a heartbeat record (``heartbeat.interval.ms``) carries the server's WAL
position so the slot moves on too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from eos.api import (
    RecordBlock,
    RecordMetadata,
    SchemaBuilder,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    Struct,
)
from services.connectors.postgres_cdc import catalog, pgoutput
from services.connectors.postgres_cdc.column_types import UNAVAILABLE
from services.connectors.postgres_cdc.envelope import Change, TableShape, sequence
from services.connectors.postgres_cdc.position import Position
from services.connectors.postgres_cdc.replication import NewSlot, ReplicationStream, SlotInUse
from services.connectors.postgres_cdc.settings import VERSION, CdcSettings
from services.connectors.postgres_cdc.snapshot import SnapshotReader, key_after
from services.connectors.postgres_cdc.spark_snapshot import SparkSnapshotReader

log = logging.getLogger(__name__)

PART_HEADER = "eos.cdc.transaction.part"
HEARTBEAT_KEY = (
    SchemaBuilder.struct().name("io.debezium.connector.common.ServerNameKey").version(1)
    .field("serverName", SchemaBuilder.string().build()).build()
)  # fmt: skip
HEARTBEAT_VALUE = (
    SchemaBuilder.struct().name("io.debezium.connector.common.Heartbeat").version(1)
    .field("ts_ms", SchemaBuilder.int64().build()).build()
)  # fmt: skip


def _texts(relation: pgoutput.Relation, columns: Sequence[pgoutput.Column]) -> dict[str, Any]:
    """Column name → text (None for NULL; the placeholder for an unsent TOASTed value)."""
    texts: dict[str, Any] = {}
    for meta, (kind, text) in zip(relation.columns, columns, strict=False):
        texts[meta.name] = UNAVAILABLE if kind == "u" else text
    return texts


@dataclasses.dataclass
class _Transaction:
    begin: pgoutput.Begin
    skip_events: int
    """Changes already written (a split transaction resumed); -1: all of them."""
    events: int = 0
    part: int = 0
    records: list[SourceRecord] = dataclasses.field(default_factory=list)
    snapshot_signals: list[str] = dataclasses.field(default_factory=list)
    """Captured tables an execute-snapshot signal of this transaction asks for."""


def signalled_tables(texts: Mapping[str, Any], captured: Sequence[str]) -> list[str]:
    """The captured tables a signal-table row asks to snapshot (Debezium's
    ``execute-snapshot``: ``data-collections`` names or regular expressions of
    ``<schema>.<table>``), in capture order; [] for another signal or a bad one."""
    if texts.get("type") != "execute-snapshot":
        return []
    try:
        data = json.loads(texts.get("data") or "{}")
        wanted = [str(name) for name in data.get("data-collections") or []]
        kind = str(data.get("type") or "incremental").lower()
    except (ValueError, AttributeError, TypeError):
        log.warning("snapshot signal %s ignored: its data is not JSON with "
                    "data-collections", texts.get("id"))  # fmt: skip
        return []
    if kind != "incremental":
        log.warning("snapshot signal %s ignored: only incremental snapshots are taken "
                    "(type %s)", texts.get("id"), kind)  # fmt: skip
        return []
    chosen = [t for t in captured if any(t == w or _fullmatch(w, t) for w in wanted)]
    if not chosen:
        log.warning("snapshot signal %s ignored: it names no captured table (%s)",
                    texts.get("id"), ", ".join(wanted))  # fmt: skip
    return chosen


def _fullmatch(pattern: str, name: str) -> bool:
    try:
        return re.fullmatch(pattern, name) is not None
    except re.error:
        return False


class PostgresCdcTask(SourceTask):
    def __init__(self) -> None:
        self._settings: CdcSettings | None = None
        self._context: SourceTaskContext | None = None
        self._position = Position()
        self._catalog: Any = None
        self._stream: ReplicationStream | None = None
        self._exporter: ReplicationStream | None = None
        self._reader: SnapshotReader | SparkSnapshotReader | None = None
        self._shapes: dict[str, TableShape] = {}
        self._relations: dict[int, pgoutput.Relation] = {}
        self._txn: _Transaction | None = None
        self._ready: list[SourceRecord] = []
        self._phase = "stream"
        self._last_commit_lsn: int | None = None
        self._last_heartbeat = time.monotonic()
        self._tables: list[str] = []
        self._snapshot_asked = False
        """A signal's incremental snapshot is to start once its transaction is written."""

    def version(self) -> str:
        return VERSION

    # ------------------------------------------------------------------ start

    async def _blocking(self, func: Any, *args: Any) -> Any:
        assert self._context is not None
        return await self._context.resources.run_blocking(func, *args)

    async def start(self, config: Mapping[str, str], context: SourceTaskContext) -> None:
        settings = self._settings = CdcSettings.parse(config)
        self._context = context
        offset = await context.offset_reader.offset(settings.partition)
        found = Position.from_offset(offset)
        self._catalog = await self._blocking(catalog.connect, settings)
        self._catalog.autocommit = True
        await self._blocking(catalog.check_server, self._catalog, settings)
        await self._blocking(catalog.check_privileges, self._catalog, settings)
        self._tables = await self._blocking(catalog.ensure_publication, self._catalog, settings)
        slot = await self._blocking(catalog.slot_state, self._catalog, settings.slot)
        mode = settings.snapshot_mode
        if slot.exists and (slot.plugin != "pgoutput" or slot.database != settings.dbname):
            raise catalog.CdcSetupError(
                f"replication slot {settings.slot} decodes database {slot.database} with "
                f"{slot.plugin}; this connector needs one of its own, for database "
                f"{settings.dbname} with pgoutput: choose another slot.name"
            )
        if found is not None and not slot.exists and mode != "when_needed":
            raise catalog.CdcSetupError(
                f"the replication slot {settings.slot} is gone: the changes since the last "
                "offset are lost. Set snapshot.mode=when_needed to take a new snapshot, or "
                "reset the connector's offsets"
            )
        fresh = found is None or (not slot.exists and mode == "when_needed")
        resuming = found is not None and not found.snapshot_done and slot.exists
        snapshot = (fresh and mode in ("initial", "initial_only", "when_needed")) or resuming
        self._position = Position() if fresh or found is None else found
        self._stream = ReplicationStream(settings)
        await self._blocking(self._stream.open)
        exported: str | None = None
        if not slot.exists:
            new = await self._blocking(self._stream.create_slot, settings.slot, snapshot)
            exported, lsn = new.snapshot, new.consistent_lsn
            log.info("replication slot %s created at %s", settings.slot, pgoutput.lsn_text(lsn))
            self._position.lsn = max(self._position.lsn, lsn)  # the slot starts there
        elif snapshot:
            new = await self._export_snapshot()
            exported, lsn = new.snapshot, new.consistent_lsn
        if snapshot:
            assert exported is not None
            self._position.start_snapshot(self._tables, lsn)
            log.info(
                "snapshot of %d tables from table %d as of %s", len(self._tables),
                self._position.table, pgoutput.lsn_text(lsn),
            )  # fmt: skip
            self._reader = await self._open_reader(exported)
            self._phase = "snapshot"
        elif mode == "initial_only" and found is not None:
            self._phase = "idle"
        else:
            await self._start_stream()

    async def _start_stream(self) -> None:
        assert self._settings is not None
        assert self._stream is not None
        settings = self._settings
        if self._stream.closed:  # stopped for an incremental snapshot
            await self._blocking(self._stream.open)
        for attempt in range(settings.slot_max_retries + 1):
            try:
                await self._blocking(self._stream.start, settings.slot, self._position.lsn)
                break
            except SlotInUse as exc:
                if attempt == settings.slot_max_retries:
                    raise catalog.CdcSetupError(
                        f"{exc}: another connection streams from replication slot "
                        f"{settings.slot} (another connector with the same slot.name, or "
                        "a predecessor that has not let go); give each connector its own "
                        "slot.name"
                    ) from None
                log.warning("%s; trying again in %.1f s", exc, settings.slot_retry_delay)
                await anyio.sleep(settings.slot_retry_delay)
        self._phase = "stream"
        log.info("streaming from slot %s after %s", settings.slot,
                 pgoutput.lsn_text(self._position.lsn))  # fmt: skip

    async def _shape(self, table: str, *, refresh: bool = False) -> TableShape:
        assert self._settings is not None
        shape = self._shapes.get(table)
        if shape is None or refresh:
            columns = await self._blocking(catalog.table_columns, self._catalog, table)
            relation = next(
                (r for r in self._relations.values() if f"{r.schema}.{r.table}" == table), None
            )
            if relation is not None:  # the columns the stream sends, not the catalog's now
                by_name = {c.name: c for c in columns}
                columns = [by_name[c.name] for c in relation.columns if c.name in by_name]
            shape = TableShape(
                self._settings.prefix,
                self._settings.dbname,
                table,
                columns,
                VERSION,
                avro_names=self._settings.name_adjustment == "avro",
            )
            if shape.unmapped:
                log.warning("table %s: columns of types Debezium does not map are left "
                            "out: %s", table, ", ".join(shape.unmapped))  # fmt: skip
            self._shapes[table] = shape
        return shape

    # ------------------------------------------------------------------ poll

    async def poll(self) -> Sequence[SourceRecord | RecordBlock] | None:
        if self._phase == "snapshot":
            return await self._snapshot_chunk()
        if self._phase == "idle":
            await anyio.sleep(1)
            return None
        return await self._stream_poll()

    async def _snapshot_chunk(self) -> list[SourceRecord | RecordBlock] | None:
        assert self._settings is not None
        assert self._reader is not None
        position, settings = self._position, self._settings
        records: list[SourceRecord] = []
        while not records and not position.snapshot_done:
            table = position.tables[position.table]
            shape = await self._shape(table)
            rows = await self._blocking(
                self._reader.chunk, shape, position.after, settings.snapshot_fetch_size
            )
            lsn = position.reads[-1].lsn
            read_us = time.time_ns() // 1000
            if len(rows) < settings.snapshot_fetch_size or not shape.key_names:
                done = position.snapshot_moved(position.table + 1, None)
            else:
                done = position.snapshot_moved(position.table, shape.key_texts(rows[-1]))
            change = Change(read_us, None, lsn, "incremental" if position.incremental else "true")
            records = [
                shape.record("r", None, shape.row(row), change, settings.partition, None)
                for row in rows
            ]
            if records and done and not position.incremental:
                last = dataclasses.replace(change, snapshot="last")
                records[-1] = shape.record(
                    "r", None, shape.row(rows[-1]), last, settings.partition, None
                )
        if position.snapshot_done:
            await self._end_snapshot()
        if not records:
            return None
        records[-1] = dataclasses.replace(records[-1], source_offset=position.to_offset())
        assert self._context is not None
        if self._context.transaction_context is not None:
            self._context.transaction_context.commit_transaction(records[-1])
        self._context.count("snapshot_rows", len(records))
        self._context.count("snapshot_chunks")
        self._context.gauge("snapshot_tables", len(position.tables))
        self._context.gauge("snapshot_tables_done", min(position.table, len(position.tables)))
        return list(records)

    async def _start_incremental_snapshot(self) -> None:
        """The snapshot a signal asked for: the stream stops at the signal's transaction
        (already written); the tables are read as of a temporary slot's exported snapshot
        (position ``Y``), chunk by chunk; the stream then starts again from the signal's
        transaction and skips, for the rows read, the changes committed before ``Y``."""
        assert self._settings is not None
        assert self._stream is not None
        self._snapshot_asked = False
        await self._blocking(self._stream.close)  # a server would time out an idle stream
        new = await self._export_snapshot()
        self._position.start_snapshot(self._position.tables, new.consistent_lsn)
        log.info("incremental snapshot of %s as of %s", ", ".join(self._position.tables),
                 pgoutput.lsn_text(new.consistent_lsn))  # fmt: skip
        assert new.snapshot is not None
        self._reader = await self._open_reader(new.snapshot)
        self._phase = "snapshot"

    async def _open_reader(self, snapshot: str) -> SnapshotReader | SparkSnapshotReader:
        """The reader of exported snapshot ``snapshot`` that ``snapshot.reader`` names."""
        assert self._settings is not None
        assert self._context is not None
        own: SnapshotReader = await self._blocking(SnapshotReader, self._settings, snapshot)
        if self._settings.snapshot_reader != "spark":
            return own
        return SparkSnapshotReader(self._settings, snapshot, own, self._context.resources)

    async def _export_snapshot(self) -> NewSlot:
        """A temporary slot whose exported snapshot the reader imports (held by
        ``self._exporter``'s connection until the snapshot ends): where the slot itself
        already exists, a snapshot's starting point ``Y``."""
        assert self._settings is not None
        self._exporter = ReplicationStream(self._settings)
        await self._blocking(self._exporter.open)
        name = f"{self._settings.slot}_snapshot_{os.getpid()}"
        new: NewSlot = await self._blocking(self._exporter.create_slot, name, True, True)
        return new

    async def _end_snapshot(self) -> None:
        assert self._settings is not None
        assert self._reader is not None
        await self._blocking(self._reader.close)
        self._reader = None
        if self._exporter is not None:
            await self._blocking(self._exporter.close)
            self._exporter = None
        log.info("snapshot done")
        if self._settings.snapshot_mode == "initial_only" and not self._position.incremental:
            self._phase = "idle"
        else:
            await self._start_stream()

    async def _stream_poll(self) -> list[SourceRecord | RecordBlock] | None:
        assert self._settings is not None
        assert self._stream is not None
        settings = self._settings
        if self._snapshot_asked and not self._ready:
            await self._start_incremental_snapshot()
            return await self._snapshot_chunk()
        messages = await self._blocking(
            self._stream.read, settings.max_batch_size, settings.poll_interval
        )
        for lsn, payload in messages:
            await self._handle(lsn, pgoutput.decode(payload))
            if self._snapshot_asked:  # the rest comes again when the stream starts again
                break
        if self._context is not None:
            lag_bytes, lag_seconds = self._stream.lag(time.monotonic())
            self._context.gauge("slot_lag_bytes", lag_bytes)
            self._context.gauge("slot_lag_seconds", lag_seconds)
        if not self._ready:
            heartbeat = self._heartbeat()
            return None if heartbeat is None else [heartbeat]
        ready, self._ready = self._ready, []
        if self._context is not None:
            self._context.count("changes", len(ready))
            if self._context.transaction_context is not None:
                self._context.transaction_context.commit_transaction(ready[-1])
        return list(ready)

    def _heartbeat(self) -> SourceRecord | None:
        settings, stream = self._settings, self._stream
        assert settings is not None
        assert stream is not None
        now = time.monotonic()
        if (
            not settings.heartbeat_interval
            or self._txn is not None
            or now - self._last_heartbeat < settings.heartbeat_interval
            or stream.wal_end <= self._position.lsn
        ):
            return None
        self._last_heartbeat = now
        self._position.lsn = stream.wal_end
        return SourceRecord(
            settings.partition, self._position.to_offset(),
            f"__debezium-heartbeat.{settings.prefix}",
            Struct(HEARTBEAT_VALUE, {"ts_ms": time.time_ns() // 1_000_000}),
            key=Struct(HEARTBEAT_KEY, {"serverName": settings.prefix}),
            key_schema=HEARTBEAT_KEY, value_schema=HEARTBEAT_VALUE,
        )  # fmt: skip

    async def _handle(self, lsn: int, message: pgoutput.Message) -> None:
        if isinstance(message, pgoutput.Begin):
            self._begin(message)
        elif isinstance(message, pgoutput.Commit):
            self._commit(message)
        elif isinstance(message, pgoutput.Relation):
            self._relations[message.oid] = message
            name = f"{message.schema}.{message.table}"
            if name in self._shapes:  # the stream's columns now (a snapshot's were older)
                await self._shape(name, refresh=True)
        elif isinstance(message, pgoutput.Insert | pgoutput.Update | pgoutput.Delete):
            await self._change(lsn, message)
        elif isinstance(message, pgoutput.Truncate):
            await self._truncate(lsn, message)

    def _begin(self, begin: pgoutput.Begin) -> None:
        position = self._position
        skip = 0
        if begin.final_lsn < position.lsn_commit or (
            begin.final_lsn == position.lsn_commit and position.events is None
        ):
            skip = -1  # written before
        elif begin.final_lsn == position.lsn_commit:
            skip = position.events or 0
        self._txn = _Transaction(begin, skip)

    def _commit(self, commit: pgoutput.Commit) -> None:
        txn, self._txn = self._txn, None
        assert txn is not None, "a Commit without its Begin"
        position = self._position
        if txn.skip_events < 0:
            return
        # the slot is confirmed at the commit record's start, not its end: psycopg2 moves a
        # slot confirmed at (or past) the last message it received on to each keepalive's
        # WAL end by itself, ahead of Kafka's offsets; a restart gets this transaction
        # again and skips it (its commit LSN is the offset's)
        position.lsn_commit = position.lsn = commit.commit_lsn
        position.tx_id, position.events = txn.begin.xid, None
        position.stream_moved(commit.commit_lsn)
        self._last_commit_lsn = commit.commit_lsn
        if txn.snapshot_signals:
            tables = [t for t in self._tables if t in txn.snapshot_signals]
            if position.request_snapshot(tables):
                self._snapshot_asked = True
                log.info("incremental snapshot of %s asked for by a signal", ", ".join(tables))
            else:
                log.warning("snapshot signal for %s ignored: a snapshot is still under way",
                            ", ".join(tables))  # fmt: skip
        if txn.records:
            if txn.part:
                self._mark_part(txn, last=True)
            txn.records[-1] = dataclasses.replace(
                txn.records[-1], source_offset=position.to_offset()
            )
            self._ready += txn.records

    def _mark_part(self, txn: _Transaction, *, last: bool) -> None:
        txn.part += 1
        mark = f"{txn.begin.xid}:{txn.part}" + (":last" if last else "")
        txn.records = [
            dataclasses.replace(r, headers=(*r.headers, (PART_HEADER, mark))) for r in txn.records
        ]

    async def _change(
        self, lsn: int, message: pgoutput.Insert | pgoutput.Update | pgoutput.Delete
    ) -> None:
        txn = self._txn
        assert txn is not None, "a change outside a transaction"
        assert self._settings is not None
        txn.events += 1
        if txn.skip_events < 0 or txn.events <= txn.skip_events:
            return
        relation = self._relations[message.oid]
        name = f"{relation.schema}.{relation.table}"
        if name == self._settings.signal_table and isinstance(message, pgoutput.Insert):
            txn.snapshot_signals += signalled_tables(_texts(relation, message.new), self._tables)
        if name not in self._tables:
            return
        shape = await self._shape(name)
        change = Change(
            txn.begin.commit_us, txn.begin.xid, lsn, "false",
            sequence(self._last_commit_lsn, lsn),
        )  # fmt: skip
        partition, skipped = self._settings.partition, self._settings.skipped_operations
        if isinstance(message, pgoutput.Insert):
            after_texts = _texts(relation, message.new)
            if await self._in_snapshot(shape, after_texts) or "c" in skipped:
                return
            txn.records.append(
                shape.record("c", None, shape.row(after_texts), change, partition, None)
            )
        elif isinstance(message, pgoutput.Update):
            await self._update(txn, shape, relation, message, change)
        else:
            old = _texts(relation, message.old)
            if await self._in_snapshot(shape, old) or "d" in skipped:
                return
            self._delete(txn, shape, _old_row(shape, old, message.old_is_key), change)
        self._split_if_large(txn)

    async def _update(
        self, txn: _Transaction, shape: TableShape, relation: pgoutput.Relation,
        message: pgoutput.Update, change: Change,
    ) -> None:  # fmt: skip
        assert self._settings is not None
        partition = self._settings.partition
        new = _texts(relation, message.new)
        if await self._in_snapshot(shape, new):
            return
        old = None if message.old is None else _texts(relation, message.old)
        before = None if old is None else _old_row(shape, old, message.old_is_key)
        if old is not None and shape.key_names and shape.key_texts(old) != shape.key_texts(new):
            # the key changed: Debezium's delete of the old key, then a create of the new
            if "d" not in self._settings.skipped_operations:
                self._delete(txn, shape, before, change)
            if "c" not in self._settings.skipped_operations:
                txn.records.append(shape.record("c", None, shape.row(new), change, partition, None))
            return
        if "u" in self._settings.skipped_operations:
            return
        before = before if not message.old_is_key else None
        txn.records.append(shape.record("u", before, shape.row(new), change, partition, None))

    def _delete(
        self, txn: _Transaction, shape: TableShape, before: Struct | None, change: Change
    ) -> None:
        assert self._settings is not None
        deleted = shape.record("d", before, None, change, self._settings.partition, None)
        txn.records.append(deleted)
        if self._settings.tombstones_on_delete and deleted.key is not None:
            txn.records.append(shape.tombstone(deleted, None))

    async def _truncate(self, lsn: int, message: pgoutput.Truncate) -> None:
        txn = self._txn
        assert txn is not None
        assert self._settings is not None
        txn.events += 1
        if (txn.skip_events < 0 or txn.events <= txn.skip_events
                or "t" in self._settings.skipped_operations):  # fmt: skip
            return
        change = Change(txn.begin.commit_us, txn.begin.xid, lsn)
        for oid in message.oids:
            relation = self._relations[oid]
            name = f"{relation.schema}.{relation.table}"
            if name in self._tables:
                shape = await self._shape(name)
                record = shape.record("t", None, None, change, self._settings.partition, None)
                txn.records.append(dataclasses.replace(record, key=None))

    def _split_if_large(self, txn: _Transaction) -> None:
        assert self._settings is not None
        if len(txn.records) < self._settings.transaction_max_events:
            return
        self._mark_part(txn, last=False)
        position = self._position
        position.lsn_commit, position.tx_id = txn.begin.final_lsn, txn.begin.xid
        position.events = txn.events
        txn.records[-1] = dataclasses.replace(txn.records[-1], source_offset=position.to_offset())
        self._ready += txn.records
        txn.records = []

    async def _in_snapshot(self, shape: TableShape, texts: Mapping[str, Any]) -> bool:
        """Whether this change of the current transaction is already in a snapshot row."""
        position, txn = self._position, self._txn
        assert txn is not None
        if not position.filtering or txn.begin.final_lsn >= position.last_read_lsn():
            return False
        reads = position.reads_of(shape.name)
        if not reads:
            return False
        read_lsn = reads[0].lsn
        key = shape.key_texts(texts)
        for read in reads[1:]:
            assert read.after is not None
            if await self._blocking(key_after, self._catalog, shape, key, read.after):
                read_lsn = read.lsn
        return txn.begin.final_lsn < read_lsn

    # ------------------------------------------------------------------ commit, stop

    async def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        offset = record.source_offset
        if offset is not None and self._stream is not None and offset.get("lsn"):
            self._stream.confirm(int(offset["lsn"]))

    async def stop(self) -> None:
        settings = self._settings
        for part in (self._reader, self._exporter, self._stream):
            if part is not None:
                await self._blocking(part.close)
        self._reader = self._exporter = self._stream = None
        if self._catalog is not None:
            if settings is not None and settings.slot_drop_on_stop:
                if await self._blocking(catalog.drop_slot, self._catalog, settings.slot):
                    log.info("replication slot %s dropped (slot.drop.on.stop=true)", settings.slot)
                else:
                    log.warning("replication slot %s not dropped: it is missing or still in "
                                "use (slot.drop.on.stop=true)", settings.slot)  # fmt: skip
            await self._blocking(self._catalog.close)
            self._catalog = None


def _old_row(shape: TableShape, texts: Mapping[str, Any], key_only: bool) -> Struct:
    """A row's old image: with the default replica identity the server sends its key
    columns only (NULL elsewhere), and the others get Debezium's fallbacks."""
    if key_only:
        return shape.row({k: texts.get(k) for k in shape.key_names}, missing=True)
    return shape.row(texts)
