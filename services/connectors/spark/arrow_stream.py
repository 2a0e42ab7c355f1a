"""Streaming a DataFrame to Python one partition at a time, as Arrow batches.

PySpark's public ``toLocalIterator`` already fetches one partition at a time, but
as pickled rows (about half the speed); ``toArrow`` is Arrow but collects
everything. :func:`open_arrow_stream` combines the two: the DataFrame's Arrow
batch RDD (``Dataset.toArrowBatchRdd``) is served through the same local-iterator
socket protocol ``toLocalIterator`` uses, so the driver holds one partition (two
with prefetch) and Python one Arrow batch (``spark.sql.execution.arrow.maxRecordsPerBatch``
rows) at a time.

The protocol is PySpark's (``pyspark.util._local_iterator_from_socket``), spoken
by :class:`_LocalIterator` here so that the stream owns its socket and closes it
(PySpark 4.1's own iterable leaves the socket to the garbage collector). These are
PySpark internals (pinned pyspark version); if they are missing,
:func:`open_arrow_stream` falls back to ``toLocalIterator`` with the same
interface, so only speed changes.

Every method blocks: call it through ``resources.run_blocking``.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


Columns = dict[str, list[Any]]
"""Rows column by column: name → values (every list as long as the others)."""


class RowStream(Protocol):
    def next_rows(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` rows as dicts; an empty list once the stream is exhausted."""

    def next_columns(self, limit: int) -> Columns:
        """Up to ``limit`` rows as :data:`Columns` (cheaper than dicts: no object per
        row); no rows once the stream is exhausted."""

    def prefetch(self) -> bool:
        """Wait for the next rows without handing them over; False if there are none."""

    def close(self) -> None:
        """Stop the stream (tells Spark to stop serving partitions)."""


class _LocalIterator:
    """The Python end of ``PythonRDD.toLocalIteratorAndServe``: asks for one partition
    at a time and yields its messages (Arrow IPC batches)."""

    def __init__(self, sock_info: Any, serializer: Any) -> None:
        util: Any = importlib.import_module("pyspark.util")
        self._io: Any = importlib.import_module("pyspark.serializers")  # read_int, write_int
        port, secret, self._server = sock_info
        self._file, self._sock = util.local_connect_and_auth(port, secret)
        self._sock.settimeout(None)  # partitions take what they take (SPARK-18281)
        self._serializer = serializer
        self._partition: Iterator[bytes] = iter(())
        self._status = 1

    def messages(self) -> Iterator[bytes]:
        while self._status == 1:
            self._io.write_int(1, self._file)  # the next partition, please
            self._file.flush()
            self._status = self._io.read_int(self._file)
            if self._status == 1:
                self._partition = self._serializer.load_stream(self._file)
                yield from self._partition
            elif self._status == -1:
                self._server.getResult()  # raises the JVM's error

    def close(self) -> None:
        try:
            if self._status == 1:  # not consumed: finish this partition, then say stop
                for _ in self._partition:
                    pass
                self._io.write_int(0, self._file)
                self._file.flush()
        except Exception:  # the JVM side went away: nothing to tell it
            pass
        finally:
            self._status = 0
            self._file.close()
            self._sock.close()


class _ArrowRowStream:
    def __init__(self, df: DataFrame) -> None:
        from pyspark.serializers import NoOpSerializer
        from pyspark.sql.pandas import types

        session = df.sparkSession
        large = session.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
        to_arrow_schema: Any = types.to_arrow_schema
        # PySpark 4.1 says timestamp_utc=True where later releases say timezone="UTC"
        utc = (
            {"timezone": "UTC"}
            if "timezone" in inspect.signature(to_arrow_schema).parameters
            else {"timestamp_utc": True}
        )
        self._schema = to_arrow_schema(df.schema, prefers_large_types=large == "true", **utc)
        jvm = session.sparkContext._jvm
        assert jvm is not None
        sock_info = jvm.PythonRDD.toLocalIteratorAndServe(df._jdf.toArrowBatchRdd(), True)
        self._iterator = _LocalIterator(sock_info, NoOpSerializer())
        self._messages: Iterator[bytes] = self._iterator.messages()
        self._pa: Any = importlib.import_module("pyarrow")  # untyped
        self._pending: Any = None  # the rest of the current Arrow batch
        self._done = False

    def _next_batch(self, limit: int) -> Any:
        """Up to ``limit`` rows as an Arrow record batch (zero-copy slice), or None."""
        while (self._pending is None or self._pending.num_rows == 0) and not self._done:
            message = next(self._messages, None)
            if message is None:
                self._done = True
                break
            self._pending = self._pa.ipc.read_record_batch(
                self._pa.py_buffer(message), self._schema
            )
        pending = self._pending
        if pending is None or pending.num_rows == 0 or limit == 0:
            return None
        self._pending = pending.slice(limit)
        return pending.slice(0, limit)

    def prefetch(self) -> bool:
        self._next_batch(0)
        return self._pending is not None and self._pending.num_rows > 0

    def next_rows(self, limit: int) -> list[dict[str, Any]]:
        batch = self._next_batch(limit)
        return [] if batch is None else list(batch.to_pylist())

    def next_batch(self, limit: int) -> Any:
        return self._next_batch(limit)

    def next_columns(self, limit: int) -> Columns:
        batch = self._next_batch(limit)
        if batch is None:
            return {name: [] for name in self._schema.names}
        return {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}

    def close(self) -> None:
        self._pending = None
        self._done = True
        messages, self._messages = self._messages, iter(())
        close = getattr(messages, "close", None)
        if close is not None:
            close()
        # drains the current partition, tells Spark to stop serving, closes the socket
        self._iterator.close()


class _PickledRowStream:
    def __init__(self, df: DataFrame) -> None:
        self._rows = df.toLocalIterator(prefetchPartitions=True)
        self._names = df.columns
        self._ahead: Any = None  # a row taken by prefetch()
        self._done = False

    def next_rows(self, limit: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        while len(rows) < limit and self.prefetch():
            row, self._ahead = self._ahead, None
            rows.append(row.asDict(recursive=True))
        return rows

    def prefetch(self) -> bool:
        if self._ahead is None and not self._done:
            self._ahead = next(self._rows, None)
            self._done = self._ahead is None
        return self._ahead is not None

    def next_columns(self, limit: int) -> Columns:
        rows = self.next_rows(limit)
        return {name: [row[name] for row in rows] for name in self._names}

    def next_batch(self, limit: int) -> Any:
        rows = self.next_rows(limit)
        if not rows:
            return None
        pa: Any = importlib.import_module("pyarrow")
        return pa.RecordBatch.from_pylist(rows)

    def close(self) -> None:
        self._done = True
        self._ahead = None
        self._rows = iter(())


def next_batch(stream: RowStream, limit: int) -> Any:
    """Up to ``limit`` rows of ``stream`` as a ``pyarrow`` record batch (None once it is
    exhausted): the streams here have ``next_batch``."""
    return getattr(stream, "next_batch")(limit)  # noqa: B009 (not part of RowStream)


def open_arrow_stream(df: DataFrame) -> RowStream:
    """A stream of ``df``'s rows, partition by partition, in partition order."""
    try:
        return _ArrowRowStream(df)
    except Exception as exc:  # PySpark internals moved; real errors recur in the fallback
        log.warning("Arrow partition streaming unavailable (%r); using toLocalIterator", exc)
        return _PickledRowStream(df)
