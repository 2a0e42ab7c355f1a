"""SparkSource ``mode=jdbc`` settings: their definitions (merged into
:data:`~.config.CONFIG_DEF`), the rules across them, and the parsed form.

Names follow Kafka Connect's JDBC source where it has one (``connection.url``,
``table.whitelist``, ``incrementing.column.name``, ...); Connect's ``mode`` is
``jdbc.mode`` here, since SparkSource's ``mode`` says what kind of source it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eos.api import ConfigDef, ConfigError, Importance, OneOf, Range, Type

JDBC_MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")
TIMESTAMP_MODES = ("timestamp", "timestamp+incrementing")

JDBC_DEF = (
    ConfigDef()
    .define(
        "connection.url",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "mode=jdbc: the JDBC URL of the database (jdbc:postgresql://host:5432/db, "
        "jdbc:mariadb://host:3306/db, jdbc:sqlserver://host:1433;databaseName=db). Its "
        "driver must be loaded by the worker setting spark.jdbc.drivers.",
    )
    .define(
        "connection.user", Type.STRING, "", None, Importance.HIGH, "mode=jdbc: the database user."
    )
    .define(
        "connection.password",
        Type.PASSWORD,
        "",
        None,
        Importance.HIGH,
        "mode=jdbc: the database user's password.",
    )
    .define(
        "jdbc.mode",
        Type.STRING,
        "",
        OneOf("", *JDBC_MODES),
        Importance.HIGH,
        "mode=jdbc (Kafka Connect JDBC source's `mode`): bulk (the whole table every "
        "poll.interval.ms), incrementing (new rows, by a strictly increasing column), "
        "timestamp (new and updated rows, by a timestamp column), timestamp+incrementing "
        "(both: the one that is safe for updates). See docs/databases.md.",
    )
    .define(
        "table.whitelist",
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "mode=jdbc: the tables to read (`table` or `schema.table`), dealt out in turn to the "
        "tasks. Unset: every table the user can see (see schema.pattern, table.types), each "
        "owned by one task by a hash of its name; new tables are picked up while running.",
    )
    .define(
        "table.blacklist",
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "mode=jdbc: tables never to read (`table` or `schema.table`); not with table.whitelist.",
    )
    .define(
        "schema.pattern",
        Type.STRING,
        "",
        None,
        Importance.MEDIUM,
        "mode=jdbc: only tables in schemas matching this JDBC pattern (`public`, `sales%`); "
        "unset: every schema.",
    )
    .define(
        "table.types",
        Type.LIST,
        "TABLE",
        None,
        Importance.LOW,
        "mode=jdbc: the kinds of table listed (JDBC table types: TABLE, VIEW, ...).",
    )
    .define(
        "table.poll.interval.ms",
        Type.LONG,
        60000,
        Range(at_least=1),
        Importance.LOW,
        "mode=jdbc: how often each task lists the tables to find new ones.",
    )
    .define(
        "incrementing.column.name",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "mode=jdbc, incrementing and timestamp+incrementing: a strictly increasing integer "
        "column (an identity or serial column). Unset: the table's primary key, when it is "
        "one integer column.",
    )
    .define(
        "timestamp.column.name",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "mode=jdbc, timestamp and timestamp+incrementing: the timestamp column set on every "
        "insert and update (e.g. updated_at).",
    )
    .define(
        "timestamp.delay.interval.ms",
        Type.LONG,
        0,
        Range(at_least=0),
        Importance.HIGH,
        "mode=jdbc, timestamp modes: read a row only once its timestamp is this much older "
        "than the database's clock, so that a transaction that commits late (with a "
        "timestamp from before its commit) is still read. Set it above your longest "
        "writing transaction.",
    )
    .define(
        "topic.prefix",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "mode=jdbc: each table's rows go to the topic <prefix><table name> (a query's to "
        "<prefix>); or set `topic` for one topic.",
    )
    .define(
        "jdbc.fetch.size",
        Type.INT,
        10000,
        Range(at_least=1),
        Importance.LOW,
        "mode=jdbc: rows fetched per round trip to the database (Spark's `fetchsize`).",
    )
)


def jdbc_problems(props: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors per setting that need more than one key to find (``mode=jdbc``)."""
    found: dict[str, list[str]] = {}

    def add(key: str, message: str) -> None:
        found.setdefault(key, []).append(message)

    def text(key: str) -> str:
        return str(props.get(key) or "").strip()

    url = text("connection.url")
    if not url:
        add("connection.url", "required setting 'connection.url' is missing (mode=jdbc)")
    elif not url.lower().startswith("jdbc:"):
        add("connection.url", "invalid value for 'connection.url': a JDBC URL starts with jdbc:")
    mode = text("jdbc.mode").lower()
    if not mode:
        add(
            "jdbc.mode",
            f"required setting 'jdbc.mode' is missing: one of {', '.join(JDBC_MODES)} (mode=jdbc)",
        )
    if mode in TIMESTAMP_MODES and not text("timestamp.column.name"):
        add(
            "timestamp.column.name",
            f"required setting 'timestamp.column.name' is missing (jdbc.mode={mode})",
        )
    if text("table.whitelist") and text("table.blacklist"):
        add("table.blacklist", "set table.whitelist or table.blacklist, not both")
    if text("query") and (text("table.whitelist") or text("table.blacklist")):
        add("query", "set `query` or table.whitelist / table.blacklist, not both")
    if text("query") and mode == "bulk" and not text("key.columns"):
        add(
            "key.columns",
            "jdbc.mode=bulk over a `query` needs `key.columns`: a snapshot is read in key "
            "order so that a restarted task goes on after the last key delivered",
        )
    return found


@dataclass(frozen=True)
class JdbcSettings:
    url: str
    user: str
    password: str = field(repr=False)
    mode: str
    whitelist: tuple[str, ...]
    blacklist: tuple[str, ...]
    schema_pattern: str
    table_types: tuple[str, ...]
    table_poll_interval: float  # seconds
    query: str
    incrementing_column: str
    timestamp_column: str
    delay_ms: int
    topic_prefix: str
    fetch_size: int

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> JdbcSettings:
        """Typed settings; raises :class:`ConfigError` naming the first bad setting."""
        values = JDBC_DEF.parse(props)
        for key, messages in jdbc_problems(props).items():
            raise ConfigError(key, None, messages[0])
        return cls(
            url=values["connection.url"],
            user=values["connection.user"],
            password=values["connection.password"],
            mode=values["jdbc.mode"].lower(),
            whitelist=tuple(values["table.whitelist"]),
            blacklist=tuple(values["table.blacklist"]),
            schema_pattern=values["schema.pattern"],
            table_types=tuple(t.upper() for t in values["table.types"]),
            table_poll_interval=values["table.poll.interval.ms"] / 1000,
            query=str(props.get("query") or "").strip(),
            incrementing_column=values["incrementing.column.name"],
            timestamp_column=values["timestamp.column.name"],
            delay_ms=values["timestamp.delay.interval.ms"],
            topic_prefix=values["topic.prefix"],
            fetch_size=values["jdbc.fetch.size"],
        )

    @property
    def uses_timestamp(self) -> bool:
        return self.mode in TIMESTAMP_MODES

    @property
    def uses_incrementing(self) -> bool:
        return self.mode in ("incrementing", "timestamp+incrementing")
