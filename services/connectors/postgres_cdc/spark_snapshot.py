"""``snapshot.reader=spark``: the snapshot's rows read by Spark's JDBC reader, a table in
key ranges across Spark tasks, every connection joined to the exported snapshot
(blocking calls, run in the worker's thread pool).

**Joining the snapshot.** Each JDBC connection Spark opens runs, before its query
(Spark's ``sessionInitStatement``), the session settings the texts depend on
(:data:`~.column_types.SESSION_SETTINGS`) and ``BEGIN ISOLATION LEVEL REPEATABLE READ
READ ONLY; SET TRANSACTION SNAPSHOT '<id>'``: every partition reads the table as of the
same point as the task's own reader (:class:`~.snapshot.SnapshotReader`), which keeps the
exporting connection's snapshot alive and answers the table's key range.

**The same texts.** Every column is read as ``format('%s', column)``, its type's output
function (``char(n)`` keeps its padding, ``inet`` its form), so a row built from them is
the row the one-connection reader and the stream build.

**Key ranges, key order.** A table whose primary key is one integer column is read in
partitions of contiguous key ranges (at least two once it holds more than a chunk, about
:data:`PARTITION_ROWS` rows each), sorted by key within each, and streamed to Python
partition by partition (:mod:`services.connectors.spark.arrow_stream`: the partition
handed over and the next one are read at once): rows arrive in key order, so a chunk's
last key is its progress exactly as with one connection, and a crash resumes after it.
A partition reaches Python only once Spark has read it whole (a failed Spark task is
run again, or fails the read and so the task, which resumes from its offset). Any other
table (a text or composite key, or none) is read by the task's own connection; the task
logs which.
"""

from __future__ import annotations

import logging
import math
import shlex
from typing import TYPE_CHECKING, Any

from services.connectors.postgres_cdc.catalog import CdcSetupError
from services.connectors.postgres_cdc.column_types import SESSION_SETTINGS
from services.connectors.postgres_cdc.snapshot import KeyTexts, SnapshotReader, quote, quoted_table
from services.connectors.spark.jdbc_drivers import driver_not_loaded, missing_driver

if TYPE_CHECKING:
    from eos.api import WorkerResources
    from services.connectors.postgres_cdc.envelope import TableShape
    from services.connectors.postgres_cdc.settings import CdcSettings
    from services.connectors.spark.arrow_stream import RowStream

log = logging.getLogger(__name__)

PARTITION_ROWS = 100_000
"""Rows per Spark partition (about): one Spark job each, two at a time."""
SPLIT_KEY_TYPES = ("smallint", "integer", "bigint")
"""Key types Spark's order and the database's agree on, so ranges split them."""
_KEY = "__eos_key"


def session_statement(snapshot: str) -> str:
    """What every Spark connection runs first: the texts' session settings, then a
    transaction that imports ``snapshot``."""
    sets = []
    words = shlex.split(SESSION_SETTINGS)
    for flag, assignment in zip(words[::2], words[1::2], strict=True):
        assert flag == "-c", SESSION_SETTINGS
        name, _, value = assignment.partition("=")
        sets.append(f"SET {name} = '{value}'")
    if not snapshot.replace("-", "").isalnum():
        raise ValueError(f"not a snapshot id: {snapshot!r}")
    return "; ".join(
        [*sets, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
         f"SET TRANSACTION SNAPSHOT '{snapshot}'"]
    )  # fmt: skip


def splits(shape: TableShape) -> bool:
    """Whether Spark reads this table in key ranges."""
    return len(shape.key_names) == 1 and shape.key_types[shape.key_names[0]] in SPLIT_KEY_TYPES


def key_ranges(low: int, high: int, rows: int, chunk: int) -> list[tuple[int | None, int | None]]:
    """Contiguous ranges ``[start, end)`` (None: open) covering ``low..high``: one for at
    most ``chunk`` rows, else at least two of about :data:`PARTITION_ROWS` rows."""
    count = 1 if rows <= chunk else max(2, math.ceil(rows / PARTITION_ROWS))
    count = min(count, high - low + 1)
    cuts = [low + (high - low + 1) * i // count for i in range(1, count)]
    starts: list[int | None] = [None, *cuts]
    ends: list[int | None] = [*cuts, None]
    return list(zip(starts, ends, strict=True))


def predicate(start: int | None, end: int | None) -> str:
    parts = [f"{_KEY} >= {start}" if start is not None else "",
             f"{_KEY} < {end}" if end is not None else ""]  # fmt: skip
    return " AND ".join(p for p in parts if p) or "TRUE"


class SparkSnapshotReader:
    """Chunks like :class:`~.snapshot.SnapshotReader`'s, read by Spark where a table's key
    splits (:func:`splits`), by ``own`` (the task's connection) elsewhere."""

    def __init__(
        self, settings: CdcSettings, snapshot: str, own: SnapshotReader,
        resources: WorkerResources,
    ) -> None:  # fmt: skip
        self._settings, self._snapshot, self._own = settings, snapshot, own
        self._resources = resources
        self._session: Any = None
        self._stream: RowStream | None = None
        self._table = ""
        self._last: KeyTexts | None = None
        """The key the open stream's last handed-over row had: a call after it goes on."""
        self._logged: set[str] = set()

    def chunk(
        self, shape: TableShape, after: KeyTexts | None, limit: int
    ) -> list[dict[str, str | None]]:
        if not splits(shape):
            self._close_stream()
            if shape.name not in self._logged:
                self._logged.add(shape.name)
                log.info("snapshot of %s read by the task's connection: its primary key is "
                         "not one integer column", shape.name)  # fmt: skip
            return self._own.chunk(shape, after, limit)
        if self._stream is None or shape.name != self._table or after != self._last:
            self._open(shape, after, limit)
        assert self._stream is not None
        names = [c.name for c in shape.columns]
        rows: list[dict[str, str | None]] = []
        while len(rows) < limit:
            columns = self._stream.next_columns(limit - len(rows))
            texts = [columns[f"c{i}"] for i in range(len(names))]
            got = len(texts[0]) if texts else 0
            if not got:
                break
            rows += [dict(zip(names, values, strict=True)) for values in zip(*texts, strict=True)]
        if rows:
            self._last = shape.key_texts(rows[-1])
        return rows

    def _open(self, shape: TableShape, after: KeyTexts | None, limit: int) -> None:
        self._close_stream()
        from services.connectors.spark.arrow_stream import open_arrow_stream

        key = shape.key_names[0]
        table = quoted_table(shape.name)
        where = (
            "" if after is None or after[0] is None else f" WHERE r.{quote(key)} > {int(after[0])}"
        )
        low, high, rows = self._own.key_range(shape, where)
        texts = ", ".join(
            f"CASE WHEN r.{quote(c.name)} IS NULL THEN NULL ELSE format('%s', r.{quote(c.name)}) "
            f"END AS c{i}"
            for i, c in enumerate(shape.columns)
        )
        query = f"(SELECT r.{quote(key)} AS {_KEY}, {texts} FROM {table} r{where}) s"
        ranges = (
            [(None, None)] if low is None or high is None else key_ranges(low, high, rows, limit)
        )
        session = self._spark(limit)
        try:
            frame = session.read.jdbc(
                self._url(), query, predicates=[predicate(*r) for r in ranges],
                properties=self._properties(),
            )  # fmt: skip
        except Exception as exc:
            if driver_not_loaded(str(exc)):
                raise CdcSetupError(
                    f"snapshot.reader=spark: {missing_driver(self._url())}"
                ) from None
            raise
        frame = frame.sortWithinPartitions(_KEY).drop(_KEY)
        log.info("snapshot of %s: %d rows read by Spark in %d key ranges", shape.name, rows,
                 len(ranges))  # fmt: skip
        self._stream = open_arrow_stream(frame)
        self._table, self._last = shape.name, after

    def _spark(self, batch_rows: int) -> Any:
        if self._session is None:
            try:
                from services.connectors.spark.session import SparkUnavailable, task_session
            except ImportError as exc:  # pragma: no cover (the slim image)
                raise CdcSetupError(
                    "snapshot.reader=spark needs Spark on the worker: install eos[spark] "
                    f"(or use the full image), or set snapshot.reader=connection ({exc})"
                ) from None
            try:
                self._session = task_session(self._resources, arrow_batch_rows=batch_rows)
            except SparkUnavailable as exc:
                raise CdcSetupError(f"snapshot.reader=spark: {exc}") from None
        return self._session

    def _url(self) -> str:
        s = self._settings
        return f"jdbc:postgresql://{s.hostname}:{s.port}/{s.dbname}"

    def _properties(self) -> dict[str, str]:
        s = self._settings
        return {
            "user": s.user,
            "password": s.password,
            "driver": "org.postgresql.Driver",
            "fetchsize": str(PARTITION_ROWS // 10),
            "sessionInitStatement": session_statement(self._snapshot),
            "ApplicationName": f"eos-cdc {s.prefix} snapshot",
            "connectTimeout": str(max(1, round(s.connect_timeout))),
        }

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def close(self) -> None:
        self._close_stream()
        self._own.close()
