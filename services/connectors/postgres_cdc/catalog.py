"""What the connector asks of the database over an ordinary connection (blocking calls,
run in the worker's thread pool): the server and the user can do logical replication,
the publication and the tables it captures, each table's columns and key, the slot.

Every refusal is a :class:`CdcSetupError` whose message names the setting or the SQL
that fixes it, never the password.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.connectors.postgres_cdc.column_types import SESSION_SETTINGS, ColumnType

if TYPE_CHECKING:
    from services.connectors.postgres_cdc.settings import CdcSettings


class CdcSetupError(RuntimeError):
    """The database is not set up for this connector (fatal: a restart will not help)."""


@dataclass(frozen=True)
class CatalogColumn:
    name: str
    type: ColumnType
    nullable: bool
    key_position: int
    """1-based position in the primary key; 0 when not part of it."""
    sql_type: str = "text"
    """The type as SQL names it (``format_type``), for casts."""
    default: str | None = None
    """The column's DEFAULT expression as the server prints it (``pg_get_expr``), if any
    (a generated column's expression is not a default)."""


@dataclass(frozen=True)
class SlotState:
    exists: bool
    active_pid: int | None = None
    confirmed_flush: int | None = None
    database: str | None = None
    plugin: str | None = None


def dsn(settings: CdcSettings) -> dict[str, Any]:
    """psycopg2 connection keywords (the password among them: never logged)."""
    return {
        "host": settings.hostname,
        "port": settings.port,
        "user": settings.user,
        "password": settings.password,
        "dbname": settings.dbname,
        "options": SESSION_SETTINGS,
        "application_name": f"eos-cdc {settings.prefix}",
        "connect_timeout": max(1, round(settings.connect_timeout)),
    }


def connect(settings: CdcSettings, **extra: Any) -> Any:
    """A psycopg2 connection; a refusal becomes one line saying which setting to check."""
    import psycopg2

    try:
        return psycopg2.connect(**dsn(settings), **extra)
    except psycopg2.OperationalError as exc:
        raise CdcSetupError(connect_problem(settings, str(exc))) from None


def connect_problem(settings: CdcSettings, error: str) -> str:
    """One line for a refused connection, without the password."""
    first = error.strip().splitlines()[0] if error.strip() else "refused"
    if settings.password:
        first = first.replace(settings.password, "****")
    where = f"{settings.hostname}:{settings.port}/{settings.dbname} as {settings.user}"
    if "password authentication failed" in first:
        return (f"cannot log in to PostgreSQL at {where}: wrong database.user or "
                "database.password")  # fmt: skip
    if "replication connection" in first or "pg_hba.conf" in first:
        return (f"PostgreSQL at {where} refuses the connection ({first}): allow it in "
                "pg_hba.conf (a 'replication' line for the replication connection)")  # fmt: skip
    if "must have the replication attribute" in first or "permission denied to start" in first:
        return (f"database.user {settings.user} may not replicate: ALTER ROLE "
                f'"{settings.user}" REPLICATION (or use a user that has it)')  # fmt: skip
    return (f"cannot connect to PostgreSQL at {where}: {first} (check database.hostname "
            "and database.port)")  # fmt: skip


def check_server(conn: Any, settings: CdcSettings) -> None:
    """``wal_level=logical``."""
    with conn.cursor() as cur:
        cur.execute("SHOW wal_level")
        (level,) = cur.fetchone()
        if level != "logical":
            raise CdcSetupError(
                f"PostgreSQL runs with wal_level={level}: change data capture needs "
                "wal_level=logical (set it in postgresql.conf or with ALTER SYSTEM SET "
                "wal_level = logical, then restart the server)"
            )


def check_privileges(conn: Any, settings: CdcSettings) -> None:
    """Every privilege the user lacks to capture the selected tables, in one refusal with
    the statements that grant them (:mod:`~services.connectors.postgres_cdc.privileges`)."""
    from services.connectors.postgres_cdc.privileges import refusal, review

    missing = review(conn, settings).missing
    if missing:
        raise CdcSetupError(refusal(settings, missing))


def slot_state(conn: Any, name: str) -> SlotState:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT active_pid, confirmed_flush_lsn::text, database, plugin "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        )
        row = cur.fetchone()
    if row is None:
        return SlotState(False)
    from services.connectors.postgres_cdc.pgoutput import parse_lsn

    return SlotState(True, row[0], parse_lsn(row[1]) if row[1] else None, row[2], row[3])


DROP_WAIT_S = 10.0
"""How long a stopping task waits for its slot's WAL sender to end before dropping it."""


def drop_slot(conn: Any, name: str, wait: float = DROP_WAIT_S) -> bool:
    """Drop slot ``name`` once nobody streams from it: the server ends the WAL sender of a
    closed replication connection a moment later, so wait up to ``wait`` seconds for the
    slot to go inactive. False if there is none, or it stays in use (someone else
    streams from it)."""
    import psycopg2

    deadline = time.monotonic() + wait
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (name,))
            row = cur.fetchone()
            if row is None:
                return False
            if not row[0]:
                try:
                    cur.execute("SELECT pg_drop_replication_slot(%s)", (name,))
                except psycopg2.errors.ObjectInUse:  # taken again meanwhile: not ours
                    return False
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def _matches(patterns: Sequence[str], name: str) -> bool:
    return any(re.fullmatch(p, name) for p in patterns)


def selected(names: Sequence[str], settings: CdcSettings) -> list[str]:
    """``schema.table`` names after ``table.include.list`` / ``table.exclude.list``
    (regular expressions matched against the whole name, as Debezium does)."""
    chosen = [n for n in names if not settings.include or _matches(settings.include, n)]
    return [n for n in chosen if not _matches(settings.exclude, n)]


def user_tables(cur: Any) -> list[str]:
    cur.execute(
        "SELECT n.nspname || '.' || c.relname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1"
    )
    return [row[0] for row in cur.fetchall()]


def ensure_publication(conn: Any, settings: CdcSettings) -> list[str]:
    """The tables to capture, in a stable order, after creating the publication as
    ``publication.autocreate.mode`` says when it is missing. A captured table the
    publication lacks is refused by name."""
    name = settings.publication
    with conn.cursor() as cur:
        cur.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
        found = cur.fetchone()
        if found is None:
            _create_publication(cur, settings)
        cur.execute(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables "
            "WHERE pubname = %s ORDER BY 1",
            (name,),
        )
        published = [row[0] for row in cur.fetchall()]
        wanted = selected(user_tables(cur), settings)
    signals = settings.signal_table
    if signals and signals not in published:
        raise CdcSetupError(
            f"publication {name} lacks the signal table {signals} "
            f"(signal.data.collection): ALTER PUBLICATION {name} ADD TABLE {signals}"
        )
    missing = [t for t in wanted if t not in published]
    if missing and settings.include:
        raise CdcSetupError(
            f"publication {name} lacks {', '.join(missing)} that table.include.list "
            f"selects: ALTER PUBLICATION {name} ADD TABLE {', '.join(missing)} "
            "(or leave them out of table.include.list)"
        )
    tables = [t for t in wanted if t in published]
    if not tables:
        raise CdcSetupError(
            f"publication {name} publishes none of the tables to capture "
            "(check table.include.list and the publication's tables)"
        )
    return tables


def _create_publication(cur: Any, settings: CdcSettings) -> None:
    import psycopg2

    name, mode = settings.publication, settings.autocreate
    if mode == "disabled":
        raise CdcSetupError(
            f"publication {name} does not exist and publication.autocreate.mode=disabled: "
            f"CREATE PUBLICATION {name} FOR TABLE <tables> (or set publication.name to an "
            "existing one)"
        )
    try:
        if mode == "all_tables":
            cur.execute(f'CREATE PUBLICATION "{name}" FOR ALL TABLES')
        else:
            tables = selected(user_tables(cur), settings)
            if not tables:
                raise CdcSetupError("table.include.list selects no table of the database")
            if settings.signal_table and settings.signal_table not in tables:
                tables.append(settings.signal_table)
            listed = ", ".join(quoted(t) for t in tables)
            cur.execute(f'CREATE PUBLICATION "{name}" FOR TABLE {listed}')
    except psycopg2.errors.InsufficientPrivilege as exc:
        hint = (
            "FOR ALL TABLES needs a superuser: use publication.autocreate.mode=filtered "
            "(the user must own the tables) or create the publication as a superuser"
            if mode == "all_tables"
            else "the user must own every captured table, or a superuser creates it"
        )
        raise CdcSetupError(
            f"database.user {settings.user} cannot create publication {name} "
            f"({str(exc).strip().splitlines()[0]}): {hint}"
        ) from None


def quoted(name: str) -> str:
    schema, _, table = name.partition(".")
    return f'"{schema}"."{table}"'


def table_columns(conn: Any, name: str) -> list[CatalogColumn]:
    """The columns of table ``schema.table`` in their order, with types and key."""
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT a.attname, coalesce(e.typname, t.typname), a.atttypmod,
                   NOT a.attnotnull, e.oid IS NOT NULL,
                   coalesce(array_position(i.indkey::int2[], a.attnum)
                        - array_lower(i.indkey::int2[], 1) + 1, 0),
                   (SELECT array_agg(enumlabel ORDER BY enumsortorder) FROM pg_enum
                     WHERE enumtypid = coalesce(e.oid, t.oid)),
                   format_type(a.atttypid, NULL),
                   CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END
            FROM pg_attribute a
            JOIN pg_type t ON t.oid = a.atttypid
            LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
            LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
            """,
            (quoted(name),),
        )
        rows = cur.fetchall()
    return [
        CatalogColumn(
            column,
            ColumnType(type_name, typmod, array, tuple(labels or ())),
            nullable,
            key,
            sql_type,
            default,
        )
        for column, type_name, typmod, nullable, array, key, labels, sql_type, default in rows
    ]
