"""What the changes modes share: a table's change feed, version by version, as the
Delta module (:mod:`.delta_changes`) and the Iceberg module (:mod:`.iceberg_changes`)
read it, and the positions and errors of reading it (see :mod:`.changes_mode`).

Every change row has the data columns of the table at its version and the columns
``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``),
``_commit_version`` (Delta version or Iceberg snapshot id) and ``_commit_timestamp``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.connectors.spark.config import SparkSourceSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
METADATA = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)


class ChangesUnavailable(RuntimeError):
    """The changes a task must read next cannot be read (change feed off, versions
    vacuumed, snapshots expired); the message says which and how to go on."""


def is_path(table: str) -> bool:
    return "/" in table


@dataclass(frozen=True)
class Position:
    version: int
    row: int = 0
    done: bool = False


def _skip_instructions(connector: str, partition: dict[str, Any], what: str) -> str:
    quoted = str(partition).replace("'", '"')
    return (
        f"To go on without them: PUT /connectors/{connector}/stop, then either "
        f"DELETE /connectors/{connector}/offsets (start again from {what}) or "
        f'PATCH /connectors/{connector}/offsets with {{"offsets": [{{"partition": {quoted}, '
        f'"offset": {{"version": <a version that can still be read>, "row": 0}}}}]}}, '
        f"then PUT /connectors/{connector}/resume"
    )


class ChangeFeed(ABC):
    """One table's versions and their change rows (every method blocks); a table
    format implements :meth:`start`, :meth:`pending` and :meth:`changes`."""

    kind = ""
    setting = ""  # the setting that says where to start

    def __init__(self, table: str, settings: SparkSourceSettings, connector: str) -> None:
        self.table = table
        self.settings = settings
        self.connector = connector
        self.partition: dict[str, Any] = {self.kind: table}

    def unavailable(self, what: str, version: int) -> ChangesUnavailable:
        return ChangesUnavailable(
            f"{self.kind} table {self.table}: {what}. "
            + _skip_instructions(self.connector, self.partition, self.setting)
        )

    @abstractmethod
    def start(self, session: SparkSession, position: Position | None) -> Position | None:
        """Check the table; resolve ``latest`` into a position when there is none."""
        raise NotImplementedError

    @abstractmethod
    def pending(self, session: SparkSession, position: Position | None) -> list[int]:
        """The versions to read next, in order (the one of ``position`` first unless done)."""
        raise NotImplementedError

    @abstractmethod
    def changes(self, session: SparkSession, version: int) -> DataFrame:
        """The change rows of ``version``, with the :data:`METADATA` columns."""
        raise NotImplementedError

    def explain(self, exc: Exception, version: int) -> ChangesUnavailable | None:
        return None


def quoted(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"
