"""``mode=iceberg-changes``: an Iceberg table one snapshot at a time: the rows each
``append`` snapshot added (incremental append scan), or with ``changelog=true``
Iceberg's changelog (inserts, deletes and updates, carry-over rows removed, updates
paired by ``key.columns``). Source partition ``{"iceberg": <table>}`` (name or path
as configured); the version is the snapshot id.
"""

from __future__ import annotations

import datetime
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.connectors.spark.changes_feed import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    ChangeFeed,
    ChangesUnavailable,
    Position,
    is_path,
)
from services.connectors.spark.config import SparkSourceSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_ICEBERG_TYPES = {
    "INSERT": "insert",
    "DELETE": "delete",
    "UPDATE_BEFORE": "update_preimage",
    "UPDATE_AFTER": "update_postimage",
}


@dataclass(frozen=True)
class _Snapshot:
    id: int
    parent: int | None
    operation: str
    committed_at: datetime.datetime


class IcebergFeed(ChangeFeed):
    kind = "iceberg"
    setting = "start.snapshot.id"

    def __init__(self, table: str, settings: SparkSourceSettings, connector: str) -> None:
        super().__init__(table, settings, connector)
        self._snapshots: dict[int, _Snapshot] = {}

    def _metadata(self, name: str) -> str:
        return f"{self.table}#{name}" if is_path(self.table) else f"{self.table}.{name}"

    def _chain(self, session: SparkSession) -> list[int]:
        """The current snapshot's ancestors, oldest first (expired ones are gone)."""
        rows = (
            session.read.format("iceberg")
            .load(self._metadata("snapshots"))
            .select("snapshot_id", "parent_id", "operation", "committed_at")
            .collect()
        )
        self._snapshots = {
            int(r["snapshot_id"]): _Snapshot(
                int(r["snapshot_id"]),
                None if r["parent_id"] is None else int(r["parent_id"]),
                str(r["operation"]),
                r["committed_at"],
            )
            for r in rows
        }
        history = (
            session.read.format("iceberg")
            .load(self._metadata("history"))
            .filter("is_current_ancestor")
            .orderBy("made_current_at")
            .select("snapshot_id")
            .collect()
        )
        chain: list[int] = []
        for r in history:
            snapshot = int(r["snapshot_id"])
            if snapshot in self._snapshots and snapshot not in chain:
                chain.append(snapshot)
        return chain

    def start(self, session: SparkSession, position: Position | None) -> Position | None:
        try:
            chain = self._chain(session)
        except Exception as exc:
            raise ChangesUnavailable(
                f"iceberg table {self.table} cannot be read ({exc}): check `table` / `path` / "
                "`tables`, the catalog settings of the worker (spark.sql.catalog.*, "
                "spark.lakehouse.iceberg.warehouse) and that it is an Iceberg table"
            ) from exc
        if position is None and self.settings.starting.lower() == "latest":
            return Position(chain[-1], 0, done=True) if chain else Position(0, 0, done=True)
        return position

    def pending(self, session: SparkSession, position: Position | None) -> list[int]:
        chain = self._chain(session)
        if position is None:
            start = self.settings.starting.lower()
            if start == "earliest":
                return chain
            first = int(start)
            if first not in chain:
                raise self.unavailable(
                    f"start.snapshot.id={first} is not a snapshot of the table's current "
                    "history (expired, or never one of its snapshots)",
                    first,
                )
            return chain[chain.index(first) :]
        if position.version == 0 and position.done:  # `latest` on a table without snapshots
            return chain
        if position.version not in chain:
            raise self.unavailable(
                f"snapshot {position.version}, where this connector's offset points, has "
                "expired (expire_snapshots) or is no longer an ancestor of the current "
                "snapshot (rollback), so the changes after it cannot be read",
                position.version,
            )
        at = chain.index(position.version)
        return chain[at + 1 :] if position.done else chain[at:]

    def changes(self, session: SparkSession, version: int) -> DataFrame:
        from pyspark.sql import functions as F

        snapshot = self._snapshots[version]
        stamp = F.lit(snapshot.committed_at).cast("timestamp")
        if self.settings.changelog:
            df = self._changelog(session, snapshot)
            change = F.col(CHANGE_TYPE)
            for iceberg, ours in _ICEBERG_TYPES.items():
                change = F.when(F.col(CHANGE_TYPE) == iceberg, F.lit(ours)).otherwise(change)
            iceberg_columns = ("_change_type", "_change_ordinal", "_commit_snapshot_id")
            data = [c for c in df.columns if c not in iceberg_columns]
            return df.select(
                *data,
                change.alias(CHANGE_TYPE),
                F.lit(version).cast("long").alias(COMMIT_VERSION),
                stamp.alias(COMMIT_TIMESTAMP),
            )
        reader = session.read.format("iceberg")
        if snapshot.operation != "append":
            reader = reader.option("versionAsOf", version)
            df = reader.load(self.table).limit(0)  # appends only: nothing to read
        elif snapshot.parent is None:
            df = reader.option("versionAsOf", version).load(self.table)
        else:
            reader = reader.option("start-snapshot-id", snapshot.parent)
            df = reader.option("end-snapshot-id", version).load(self.table)
        return df.select(
            "*",
            F.lit("insert").alias(CHANGE_TYPE),
            F.lit(version).cast("long").alias(COMMIT_VERSION),
            stamp.alias(COMMIT_TIMESTAMP),
        )

    def _changelog(self, session: SparkSession, snapshot: _Snapshot) -> DataFrame:
        parts = self.table.split(".")
        catalog, name = (parts[0], ".".join(parts[1:])) if len(parts) > 2 else ("", self.table)
        if not catalog:
            catalog = session.catalog.currentCatalog()
        view = f"eos_changes_{uuid.uuid4().hex[:12]}"
        options = [f"'end-snapshot-id', '{snapshot.id}'"]
        if snapshot.parent is not None:
            options.append(f"'start-snapshot-id', '{snapshot.parent}'")
        keys = self.settings.key_columns
        updates = ""
        if keys:
            columns = ", ".join("'" + k.replace("'", "''") + "'" for k in keys)
            updates = f", compute_updates => true, identifier_columns => array({columns})"
        session.sql(
            f"CALL {catalog}.system.create_changelog_view(table => '{name}', "
            f"options => map({', '.join(options)}), changelog_view => '{view}'{updates})"
        )
        return session.table(view)

    def explain(self, exc: Exception, version: int) -> ChangesUnavailable | None:
        text = str(exc)
        if "Cannot find snapshot" in text or "expired" in text.lower():
            return self.unavailable(f"snapshot {version} has expired", version)
        if re.search(r"delete files|merge-on-read|position delete", text, re.IGNORECASE):
            return ChangesUnavailable(
                f"iceberg table {self.table}: snapshot {version} has delete files, which "
                f"Iceberg's changelog cannot read ({text[:300]}): write the table with "
                "'write.delete.mode', 'write.update.mode' and 'write.merge.mode' = "
                "'copy-on-write'"
            )
        return None
