"""Reading the captured tables as of an exported snapshot, a chunk at a time (blocking
calls, run in the worker's thread pool).

A chunk is up to ``snapshot.fetch.size`` rows of one table after a key, in key order
(keyset pagination on the primary key, so a chunk costs the same at any depth); a table
without a primary key is one chunk. Every column is read as its type's output text, the
very text ``pgoutput`` sends, so a row reads the same here and in the stream: psycopg2
is told to hand each column's type over as the server's text. (A cast to ``text`` would
not do: ``char(n)`` loses its padding and ``inet`` gains a netmask.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from services.connectors.postgres_cdc.catalog import connect

if TYPE_CHECKING:
    from services.connectors.postgres_cdc.envelope import TableShape
    from services.connectors.postgres_cdc.settings import CdcSettings

KeyTexts = tuple[str | None, ...]


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def quoted_table(name: str) -> str:
    schema, _, table = name.partition(".")
    return f"{quote(schema)}.{quote(table)}"


class SnapshotReader:
    """A REPEATABLE READ transaction that imported snapshot ``snapshot``."""

    def __init__(self, settings: CdcSettings, snapshot: str) -> None:
        import psycopg2.extensions

        self._conn: Any = connect(settings)
        self._conn.set_session(
            isolation_level=psycopg2.extensions.ISOLATION_LEVEL_REPEATABLE_READ, readonly=True
        )
        with self._conn.cursor() as cur:
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
        self._described: set[str] = set()
        self._text_oids: set[int] = set()

    def chunk(
        self, shape: TableShape, after: KeyTexts | None, limit: int
    ) -> list[dict[str, str | None]]:
        """Up to ``limit`` rows of ``shape``'s table after key ``after`` (None: from the
        start), each as column name → text."""
        names = [c.name for c in shape.columns]
        columns = ", ".join(f"r.{quote(n)}" for n in names)
        sql = f"SELECT {columns} FROM {quoted_table(shape.name)} r"
        params: list[Any] = []
        if shape.key_names:
            # qualified: an output column of the same name would sort as text
            keys = ", ".join(f"r.{quote(k)}" for k in shape.key_names)
            if after is not None:
                casts = ", ".join(f"%s::{shape.key_types[k]}" for k in shape.key_names)
                sql += f" WHERE ({keys}) > ({casts})"
                params += after
            sql += f" ORDER BY {keys} LIMIT {int(limit)}"
        with self._conn.cursor() as cur:
            if shape.name not in self._described:
                cur.execute(f"SELECT {columns} FROM {quoted_table(shape.name)} r LIMIT 0")
                self._as_text(column.type_code for column in cur.description or ())
                self._described.add(shape.name)
            cur.execute(sql, params)
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def key_range(self, shape: TableShape, where: str) -> tuple[int | None, int | None, int]:
        """The least and greatest value of the table's one integer key and its row count,
        of the rows ``where`` (a ``WHERE`` clause on alias ``r``, or "") selects."""
        key = f"r.{quote(shape.key_names[0])}"
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT min({key})::text, max({key})::text, count(*)::text "
                f"FROM {quoted_table(shape.name)} r{where}"
            )  # as text: this connection may read integers as text (see _as_text)
            low, high, rows = cur.fetchone()
        return (None if low is None else int(low), None if high is None else int(high), int(rows))

    def _as_text(self, oids: Iterable[int]) -> None:
        """Columns of these types come as the server's text (None for NULL)."""
        import psycopg2.extensions

        new = tuple(set(oids) - self._text_oids)
        if new:
            caster = psycopg2.extensions.new_type(new, "EOS_TEXT", _as_is)
            psycopg2.extensions.register_type(caster, self._conn)
            self._text_oids.update(new)

    def close(self) -> None:
        self._conn.rollback()
        self._conn.close()


def _as_is(value: str | bytes | None, cursor: Any) -> str | bytes | None:
    return value


def key_after(conn: Any, shape: TableShape, key: Sequence[str | None], start: KeyTexts) -> bool:
    """Whether ``key`` sorts after ``start`` in the table's key order (asked of the
    database, so its collations decide)."""
    left = ", ".join(f"%s::{shape.key_types[k]}" for k in shape.key_names)
    with conn.cursor() as cur:
        cur.execute(f"SELECT ({left}) > ({left})", [*key, *start])
        (answer,) = cur.fetchone()
    conn.rollback()
    return bool(answer)
