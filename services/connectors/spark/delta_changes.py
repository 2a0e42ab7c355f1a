"""``mode=delta-changes``: a Delta table's change data feed (``readChangeFeed``), one
commit version at a time. Source partition ``{"delta": <table>}`` (name or path as
configured); the version is the Delta version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.connectors.spark.changes_feed import (
    METADATA,
    ChangeFeed,
    ChangesUnavailable,
    Position,
    is_path,
    quoted,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_DELTA_CDF_OFF = ("DELTA_MISSING_CHANGE_DATA", "change data was not recorded")
_DELTA_GONE = (
    "FileNotFoundException",
    "FILE_NOT_EXIST",
    "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
    "VersionNotFound",
    "DELTA_VERSIONS_NOT_CONTIGUOUS",
    "DELTA_CANNOT_TIME_TRAVEL",
    "Cannot time travel",
)


class DeltaFeed(ChangeFeed):
    kind = "delta"
    setting = "starting.version"

    def _ident(self) -> str:
        if is_path(self.table):
            return "delta." + quoted(self.table)
        return self.table

    def _versions(self, session: SparkSession) -> tuple[int, int]:
        from pyspark.sql import functions as F

        row = (
            session.sql(f"DESCRIBE HISTORY {self._ident()}")
            .agg(F.min("version").alias("lo"), F.max("version").alias("hi"))
            .collect()[0]
        )
        return int(row["lo"]), int(row["hi"])

    def _check_feed_on(self, session: SparkSession) -> None:
        properties = {
            r["key"]: r["value"]
            for r in session.sql(f"SHOW TBLPROPERTIES {self._ident()}").collect()
        }
        if str(properties.get("delta.enableChangeDataFeed", "false")).lower() != "true":
            raise ChangesUnavailable(
                f"delta table {self.table} does not have the change data feed enabled: run "
                f"ALTER TABLE {self._ident()} SET TBLPROPERTIES "
                "(delta.enableChangeDataFeed = true); changes are recorded from the version "
                "that sets it on, so set starting.version to that version (or `latest`)"
            )

    def start(self, session: SparkSession, position: Position | None) -> Position | None:
        from pyspark.errors import AnalysisException

        try:
            self._check_feed_on(session)
            _, latest = self._versions(session)
        except AnalysisException as exc:
            raise ChangesUnavailable(
                f"delta table {self.table} cannot be read ({exc.getMessage()}): check "
                "`table` / `path` / `tables` and that it is a Delta table"
            ) from exc
        if position is None and self.settings.starting.lower() == "latest":
            return Position(latest, 0, done=True)
        return position

    def pending(self, session: SparkSession, position: Position | None) -> list[int]:
        oldest, latest = self._versions(session)
        if position is None:
            start = self.settings.starting.lower()
            first = oldest if start == "earliest" else int(start)
        else:
            first = position.version + 1 if position.done else position.version
        if first < oldest and first <= latest:
            raise self.unavailable(
                f"version {first} is no longer in the table's history (the oldest version "
                f"left is {oldest}: older log entries were cleaned up)",
                first,
            )
        return list(range(first, latest + 1))

    def changes(self, session: SparkSession, version: int) -> DataFrame:
        reader = (
            session.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", version)
            .option("endingVersion", version)
        )
        df = reader.load(self.table) if is_path(self.table) else reader.table(self.table)
        # The feed has the table's schema of today; a version's rows get the columns the
        # table had at that version (a column added later is not in older rows).
        then = session.read.format("delta").option("versionAsOf", version)
        table = then.load(self.table) if is_path(self.table) else then.table(self.table)
        columns = [c for c in table.columns if c in df.columns and c not in METADATA]
        return df.select(*(quoted(c) for c in columns), *METADATA)

    def explain(self, exc: Exception, version: int) -> ChangesUnavailable | None:
        text = str(exc)
        if any(marker in text for marker in _DELTA_CDF_OFF):
            return self.unavailable(
                f"the change data feed was not enabled at version {version} (changes of a "
                "version are recorded only while delta.enableChangeDataFeed is true)",
                version,
            )
        if any(marker in text for marker in _DELTA_GONE):
            return self.unavailable(
                f"the changes of version {version} are gone: their files were removed by "
                "VACUUM (or the log was cleaned up) before they were read",
                version,
            )
        return None
