"""A task's own JDBC connection to the database, opened in the Spark driver's JVM.

Rows are read by Spark (:mod:`.jdbc_read`); what a task must know before it reads is
asked here, over one connection made the way Spark makes its own (the dialect's
connection factory, so the driver class, ``connection.user`` and
``connection.password`` and the connection providers are Spark's): the tables
(``DatabaseMetaData.getTables``), a table's primary key, the columns a source
returns, the database's product name and identifier quote, and the short probe of
:func:`~.jdbc_sql.probe_sql` that tells whether there is anything new to read.

Values come back as the database's own text (``ResultSet.getString``), so a clock or
bound read here is written back into SQL exactly as the database printed it.

Errors become :class:`JdbcError`: one line naming the setting to fix, the URL without
its secrets, never the password. Every method blocks (py4j): call it through
``resources.run_blocking``. One lock serialises the calls of a task's threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.connectors.spark.jdbc_drivers import (
    driver_class,
    driver_not_loaded,
    missing_driver,
    redact_url,
    spark_url,
)
from services.connectors.spark.jdbc_settings import JdbcSettings
from services.connectors.spark.jdbc_sql import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_AUTH_STATES = ("28",)  # SQLSTATE class 28: invalid authorization
_CONNECT_STATES = ("08", "3D")  # connection exceptions; invalid catalog (database) name


class JdbcError(RuntimeError):
    """The database cannot be reached or read; the message names the setting to fix."""


@dataclass(frozen=True)
class Table:
    schema: str | None
    name: str
    catalog: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def matches(self, entry: str) -> bool:
        """Whether a table.whitelist / table.blacklist entry names this table."""
        return entry in (self.name, self.qualified)

    def sql(self, quote_string: str) -> str:
        parts = [self.schema, self.name] if self.schema else [self.name]
        return quote(parts, quote_string)


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    jdbc_type: int  # java.sql.Types
    type_name: str
    precision: int
    scale: int


def connection_options(settings: JdbcSettings, options: Mapping[str, str]) -> dict[str, str]:
    """The options of Spark's JDBC reader for this connection (``options.*`` win)."""
    out = {"url": spark_url(settings.url), "fetchsize": str(settings.fetch_size)}
    if settings.user:
        out["user"] = settings.user
    if settings.password:
        out["password"] = settings.password
    known = driver_class(settings.url)
    if known:
        out["driver"] = known
    out["preferTimestampNTZ"] = "true"
    out.update(options)
    return out


class Database:
    """One JDBC connection in the driver's JVM, opened on first use, reopened after a failure."""

    def __init__(
        self, session: SparkSession, settings: JdbcSettings, options: Mapping[str, str]
    ) -> None:
        self._session = session
        self._settings = settings
        self._options = connection_options(settings, options)
        self._lock = threading.Lock()
        self._connection: Any = None
        self.product = ""
        self.quote_string = '"'

    # ------------------------------------------------------------------ errors

    def scrub(self, text: str) -> str:
        """``text`` without the password and with the URL's secrets masked."""
        if self._settings.password:
            text = text.replace(self._settings.password, "***")
        for url in (self._options["url"], self._settings.url):
            text = text.replace(url, redact_url(url))
        return text

    def error(self, exc: Exception, doing: str) -> JdbcError:
        """A :class:`JdbcError` for ``exc`` (a py4j or SQL error) met while ``doing``."""
        java = getattr(exc, "java_exception", None)
        text = str(java.toString()) if java is not None else str(exc)
        state = ""
        if java is not None:
            try:
                state = str(java.getSQLState() or "")
            except Exception:  # not an SQLException
                state = ""
        url = redact_url(self._settings.url)
        first = self.scrub(text.strip().splitlines()[0] if text.strip() else repr(exc))
        if driver_not_loaded(text):
            return JdbcError(missing_driver(self._settings.url))
        if state.startswith(_AUTH_STATES):
            return JdbcError(
                f"cannot log in to {url} as connection.user={self._settings.user!r} ({first}): "
                "check connection.user and connection.password"
            )
        if state.startswith(_CONNECT_STATES) or "Connection refused" in text:
            return JdbcError(
                f"cannot connect to the database at connection.url={url} ({first}): check "
                "connection.url (host, port, database) and that the database accepts "
                "connections from the Spark driver and executors"
            )
        return JdbcError(f"{doing} failed on {url}: {first}")

    # ------------------------------------------------------------------ connection

    def _connect(self) -> Any:
        if self._connection is not None:
            return self._connection
        jvm: Any = self._session.sparkContext._jvm
        try:
            scala_map = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(
                {**self._options, "dbtable": "eos_connection"}
            )
            jdbc = jvm.org.apache.spark.sql.execution.datasources.jdbc
            options = jdbc.JDBCOptions(scala_map)
            dialect = jvm.org.apache.spark.sql.jdbc.JdbcDialects.get(self._options["url"])
            connection = dialect.createConnectionFactory(options).apply(-1)
            meta = connection.getMetaData()
            self.product = str(meta.getDatabaseProductName())
            self.quote_string = str(meta.getIdentifierQuoteString() or "").strip() or '"'
        except Exception as exc:
            raise self.error(exc, "connecting") from None
        self._connection = connection
        return connection

    def _run(self, doing: str, work: Any) -> Any:
        with self._lock:
            try:
                return work(self._connect())
            except JdbcError:
                raise
            except Exception as exc:
                self._drop()
                raise self.error(exc, doing) from None

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # already broken
                connection.close()

    def check(self) -> None:
        """Connect now (so that a wrong URL or password fails the task at start)."""
        self._run("connecting", lambda connection: None)

    def close(self) -> None:
        with self._lock:
            self._drop()

    # ------------------------------------------------------------------ metadata

    def tables(self, schema_pattern: str, types: Sequence[str]) -> list[Table]:
        """The tables of the connection's catalog (database), sorted by qualified name."""

        def work(connection: Any) -> list[Table]:
            gateway: Any = self._session.sparkContext._gateway
            kinds = gateway.new_array(gateway.jvm.String, len(types))
            for n, kind in enumerate(types):
                kinds[n] = kind
            catalog = connection.getCatalog()
            rows = connection.getMetaData().getTables(catalog, schema_pattern or None, "%", kinds)
            found = []
            try:
                while rows.next():
                    schema = rows.getString("TABLE_SCHEM")
                    found.append(Table(schema or None, str(rows.getString("TABLE_NAME")), catalog))
            finally:
                rows.close()
            return sorted(found, key=lambda t: t.qualified)

        result: list[Table] = self._run("listing the tables", work)
        return result

    def primary_key(self, table: Table) -> list[str]:
        def work(connection: Any) -> list[str]:
            rows = connection.getMetaData().getPrimaryKeys(table.catalog, table.schema, table.name)
            columns = []
            try:
                while rows.next():
                    sequence, name = rows.getInt("KEY_SEQ"), rows.getString("COLUMN_NAME")
                    columns.append((int(sequence), str(name)))
            finally:
                rows.close()
            return [name for _, name in sorted(columns)]

        result: list[str] = self._run(f"reading the primary key of {table.qualified}", work)
        return result

    def columns(self, source: str) -> list[ColumnInfo]:
        """The columns ``SELECT * FROM <source>`` returns, with their JDBC types."""

        def work(connection: Any) -> list[ColumnInfo]:
            statement = connection.createStatement()
            try:
                rows = statement.executeQuery(f"SELECT * FROM {source} WHERE 1=0")
                meta = rows.getMetaData()
                return [
                    ColumnInfo(
                        str(meta.getColumnLabel(i)),
                        int(meta.getColumnType(i)),
                        str(meta.getColumnTypeName(i)),
                        int(meta.getPrecision(i)),
                        int(meta.getScale(i)),
                    )
                    for i in range(1, int(meta.getColumnCount()) + 1)
                ]
            finally:
                statement.close()

        result: list[ColumnInfo] = self._run(f"reading the columns of {source}", work)
        return result

    def row(self, sql: str) -> list[str | None]:
        """The first row of ``sql``, every value as the database's text."""

        def work(connection: Any) -> list[str | None]:
            statement = connection.createStatement()
            try:
                rows = statement.executeQuery(sql)
                count = int(rows.getMetaData().getColumnCount())
                if not rows.next():
                    return [None] * count
                values = [rows.getString(i) for i in range(1, count + 1)]
                return [None if v is None else str(v) for v in values]
            finally:
                statement.close()

        result: list[str | None] = self._run("probing for new rows", work)
        return result
