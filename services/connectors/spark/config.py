"""SparkSource settings: the definition (for validation) and the parsed, typed form.

Cross-setting rules that a single key cannot express (files mode needs ``path``;
table mode needs exactly one of ``table``, ``path`` or ``query`` and an
``incrementing.column``; a record needs a ``topic`` or a ``topic.column``) live in
:func:`problems`, which both validation and :meth:`SparkSourceSettings.parse` use,
so an error always names the setting to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos.api import (
    ConfigDef,
    ConfigError,
    Importance,
    OneOf,
    Range,
    Type,
    config_class,
    definition_of,
    fill,
    setting,
)
from services.connectors.spark.jdbc_settings import JDBC_DEF, jdbc_problems

FILE_FORMATS = ("parquet", "csv", "json", "orc")
OPTIONS_PREFIX = "options."
TASK_INDEX = "task.index"
TASK_COUNT = "task.count"
TABLE_SOURCES = ("table", "path", "query")
CHANGE_MODES = {"delta-changes": "delta", "iceberg-changes": "iceberg"}
"""Modes that read a table's changes, and the table format each needs."""
CHANGE_SOURCES = ("table", "path", "tables")
TABLES = "tables.assigned"
"""Task setting: the tables (names or paths) one task of a changes mode reads."""

_COMBINED = (
    ConfigDef()
    .define(
        "tables",
        Type.LIST,
        "",
        None,
        Importance.HIGH,
        "Changes modes: several tables (names or paths), spread over the tasks; "
        "each table is read by one task.",
    )
    .define(
        "starting.version",
        Type.STRING,
        "earliest",
        None,
        Importance.HIGH,
        "mode=delta-changes: the first table version to read when there is no offset: "
        "a version number, `earliest` (the oldest version in the table's history) or "
        "`latest` (only versions committed after the task starts).",
    )
    .define(
        "start.snapshot.id",
        Type.STRING,
        "earliest",
        None,
        Importance.HIGH,
        "mode=iceberg-changes: where to start when there is no offset: `earliest` (the "
        "first snapshot), `latest` (only snapshots committed after the task starts) or a "
        "snapshot id (its changes are read, and those of every later snapshot).",
    )
)
"""Changes-mode settings that are combined with others into one field
(:attr:`SparkSourceSettings.tables`, :attr:`SparkSourceSettings.starting`)."""


def _seconds(ms: int) -> float:
    return ms / 1000


def _is_fields(value: str) -> bool:
    return value.lower() == "fields"


def _is_tombstone(value: str) -> bool:
    return value.lower() == "tombstone"


def problems(props: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors per setting that need more than one key to find (empty when fine)."""
    found: dict[str, list[str]] = {}

    def add(key: str, message: str) -> None:
        found.setdefault(key, []).append(message)

    def text(key: str) -> str:
        return str(props.get(key) or "").strip()

    mode = text("mode").lower() or "files"
    if mode == "jdbc":
        if not text("topic") and not text("topic.column") and not text("topic.prefix"):
            add(
                "topic",
                "required setting 'topic' is missing: set `topic.prefix` (each table to "
                "<prefix><table>), `topic` or `topic.column`",
            )
        for key, messages in jdbc_problems(props).items():
            found.setdefault(key, []).extend(messages)
    elif not text("topic") and not text("topic.column"):
        add("topic", "required setting 'topic' is missing: set `topic` or `topic.column`")
    fmt = text("format").lower() or "parquet"
    if mode == "files":
        if not text("path"):
            add("path", "required setting 'path' is missing: the files to read (mode=files)")
        if fmt not in FILE_FORMATS:
            add(
                "format",
                f"invalid value {fmt!r} for setting 'format': "
                f"must be one of: {', '.join(FILE_FORMATS)} (mode=files)",
            )
    elif mode == "table":
        given = [k for k in TABLE_SOURCES if text(k)]
        if len(given) != 1:
            add(
                "table",
                "mode=table needs exactly one of `table`, `path` (with `format`) or `query`; "
                f"got {', '.join(given) or 'none'}",
            )
        if not text("incrementing.column"):
            add(
                "incrementing.column",
                "required setting 'incrementing.column' is missing: the column whose values "
                "increase with every new row (mode=table)",
            )
    elif mode in CHANGE_MODES:
        given = [k for k in CHANGE_SOURCES if text(k)]
        if len(given) != 1:
            add(
                "table",
                f"mode={mode} needs exactly one of `table`, `path` or `tables`; "
                f"got {', '.join(given) or 'none'}",
            )
        start_key = "start.snapshot.id" if mode == "iceberg-changes" else "starting.version"
        start = text(start_key).lower() or "earliest"
        if start not in ("earliest", "latest") and not start.isdigit():
            add(
                start_key,
                f"invalid value {start!r} for setting {start_key!r}: a "
                f"{'snapshot id' if mode == 'iceberg-changes' else 'version number'}, "
                "`earliest` or `latest`",
            )
        if text("deletes").lower() == "tombstone" and not text("key.columns"):
            add("deletes", "deletes=tombstone needs `key.columns`: a tombstone is a key")
        if mode == "iceberg-changes" and text("changelog").lower() == "true" and text("path"):
            add(
                "path",
                "changelog=true reads Iceberg's changelog through a catalog: name the table "
                "(`table=<catalog>.<db>.<table>`, e.g. a Hadoop catalog set up with the worker "
                "setting spark.lakehouse.iceberg.warehouse) instead of its path",
            )
    return found


@config_class
class SparkSourceSettings:
    mode: str = setting(
        "mode",
        Type.STRING,
        "files",
        OneOf("files", "table", *CHANGE_MODES, "jdbc"),
        Importance.HIGH,
        "files: every row of every file under `path`, each file once; "
        "table: rows of a table, path or query above the last `incrementing.column` value; "
        "delta-changes / iceberg-changes: every change of a Delta / Iceberg table, "
        "version by version (docs/lakehouse.md); "
        "jdbc: tables or a query of a database, through Spark's JDBC reader "
        "(docs/databases.md).",
        convert=str.lower,
    )
    topic: str = setting(
        "topic",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "Topic to write to.",
    )
    topic_column: str = setting(
        "topic.column",
        Type.STRING,
        "",
        None,
        Importance.MEDIUM,
        "Column whose value names each row's topic (instead of `topic`).",
    )
    key_columns: tuple[str, ...] = setting(
        "key.columns",
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "Columns forming the record key: one column gives its value, several an object.",
        convert=tuple,
    )
    timestamp_column: str = setting(
        "timestamp.column",
        Type.STRING,
        "",
        None,
        Importance.LOW,
        "Timestamp or date column (or epoch milliseconds) used as the record timestamp.",
    )
    path: str = setting(
        "path",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "Files mode: a Hadoop/Spark path (local dir, file:, s3a:, hdfs:; globs allowed). "
        "Table mode: a path read with `format`.",
    )
    format: str = setting(
        "format",
        Type.STRING,
        "parquet",
        None,
        Importance.HIGH,
        "Files mode: parquet, csv, json or orc. Table mode with `path`: any Spark format.",
        convert=str.lower,
    )
    schema: str = setting(
        "schema",
        Type.STRING,
        "",
        None,
        Importance.MEDIUM,
        "Optional DDL schema (e.g. `id BIGINT, name STRING`); recommended for csv and json "
        "so that every file is read with the same types.",
    )
    poll_interval: float = setting(
        "poll.interval.ms",
        Type.LONG,
        5000,
        Range(at_least=1),
        Importance.MEDIUM,
        "How often to look for new files (files mode) or new rows (table mode).",
        convert=_seconds,
    )
    """Seconds."""
    batch_rows: int = setting(
        "batch.rows",
        Type.INT,
        10000,
        Range(at_least=1),
        Importance.MEDIUM,
        "Most rows returned by one poll (one transaction with transaction.boundary=poll).",
    )
    max_buffered_rows: int = setting(
        "max.buffered.rows",
        Type.INT,
        100000,
        Range(at_least=4),
        Importance.MEDIUM,
        "Most rows a task holds in Python at once; Spark hands a file over in pieces of "
        "about this many rows.",
    )
    lineage_headers: bool = setting(
        "lineage.headers",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Add headers saying where each row came from: eos.spark.file and eos.spark.row "
        "(files mode), eos.spark.table (table and jdbc modes).",
    )
    max_open_files: int = setting(
        "max.open.files",
        Type.INT,
        2,
        Range(at_least=1),
        Importance.LOW,
        "Files mode: how many of its files a task streams at once (each one Spark job at a "
        "time); they share max.buffered.rows.",
    )
    table: str = setting(
        "table",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "Table mode: a Spark table name.",
    )
    query: str = setting(
        "query",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "Table mode: a Spark SQL query. mode=jdbc: a query in the database's SQL, read "
        "instead of tables.",
    )
    incrementing_column: str = setting(
        "incrementing.column",
        Type.STRING,
        "",
        None,
        Importance.HIGH,
        "Table mode: the column whose values increase with every new row.",
    )
    incrementing_unique: bool = setting(
        "incrementing.column.unique",
        Type.BOOLEAN,
        False,
        None,
        Importance.HIGH,
        "Table mode: declare that `incrementing.column` is unique and strictly increasing "
        "(a new row never gets a value at or below one already present); "
        "only then is exactly-once delivery guaranteed.",
    )
    changelog: bool = setting(
        "changelog",
        Type.BOOLEAN,
        False,
        None,
        Importance.HIGH,
        "mode=iceberg-changes: false reads appended rows only (incremental append scan); "
        "true reads Iceberg's changelog: inserts, deletes and updates.",
    )
    metadata_in_value: bool = setting(
        "change.metadata",
        Type.STRING,
        "headers",
        OneOf("headers", "fields"),
        Importance.MEDIUM,
        "Changes modes: `_change_type`, `_commit_version`, `_commit_timestamp` as record "
        "headers or as fields of the value.",
        convert=_is_fields,
    )
    preimages: bool = setting(
        "update.preimages",
        Type.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Changes modes: also write `update_preimage` rows (the row before an update).",
    )
    tombstones: bool = setting(
        "deletes",
        Type.STRING,
        "row",
        OneOf("row", "tombstone"),
        Importance.MEDIUM,
        "Changes modes: a deleted row becomes a record with the row (`row`) or a "
        "tombstone, a null value for its key (`tombstone`, needs `key.columns`).",
        convert=_is_tombstone,
    )
    transaction_max_rows: int = setting(
        "transaction.max.rows",
        Type.INT,
        100000,
        Range(at_least=1),
        Importance.MEDIUM,
        "Changes modes with transaction.boundary=connector: a table version is one Kafka "
        "transaction unless it has more rows than this; then one per this many rows.",
    )
    # What no single setting gives:
    options: dict[str, str]
    """``options.*`` without the prefix."""
    task_index: int
    task_count: int
    tables: tuple[str, ...]
    """Changes modes: the tables this task reads (from ``table``, ``path`` or ``tables``;
    a task's share with :data:`TABLES`)."""
    starting: str
    """``starting.version`` or ``start.snapshot.id``, by mode."""
    json_converters: bool
    """Both the connector's ``key.converter`` and ``value.converter`` are ``json``:
    Spark may write the records' JSON itself (see :mod:`.mapping`)."""
    typed_converters: bool
    """A converter writes a typed format: rows come with Connect schemas (:mod:`.typed`)."""

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> SparkSourceSettings:
        """Typed settings; raises :class:`ConfigError` naming the first bad setting."""
        values = CONFIG_DEF.parse(props)
        for key, messages in problems(props).items():
            raise ConfigError(key, props.get(key), messages[0])
        options = {
            k[len(OPTIONS_PREFIX) :]: str(v)
            for k, v in props.items()
            if k.startswith(OPTIONS_PREFIX) and len(k) > len(OPTIONS_PREFIX)
        }
        iceberg = values["mode"].lower() == "iceberg-changes"
        start_key = "start.snapshot.id" if iceberg else "starting.version"
        return fill(
            cls,
            values,
            options=options,
            task_index=int(props.get(TASK_INDEX, 0)),
            task_count=int(props.get(TASK_COUNT, 1)),
            tables=_tables(props, values),
            starting=str(values[start_key]).strip(),
            json_converters=json_converters(props),
            typed_converters=wants_schemas(props),
        )

    @property
    def table_format(self) -> str:
        """``delta`` or ``iceberg`` for a changes mode, else empty."""
        return CHANGE_MODES.get(self.mode, "")

    @property
    def rows_per_poll(self) -> int:
        """Rows one poll hands over: a quarter of the buffer, since up to two Arrow
        batches (a quarter each) and two chunks are held at the same time (files mode
        reads ahead, see :class:`~.files_mode.FilesReader`)."""
        return max(1, min(self.batch_rows, self.max_buffered_rows // 4))

    @property
    def file_batch_rows(self) -> int:
        """Files mode: the most rows of an Arrow batch (a chunk has at most
        ``min(batch.rows, this)``). With ``max.open.files`` = k, Python holds up to k + 1
        Arrow batches (the open files' and the next file's) and k + 1 chunks (one per
        open file and the one a poll returned): each one 1 / (2k + 2) of the buffer."""
        return max(1, self.max_buffered_rows // (2 * (self.max_open_files + 1)))


CONFIG_DEF = definition_of(SparkSourceSettings).merged(_COMBINED).merged(JDBC_DEF)
"""Every SparkSource setting."""


TYPED_CONVERTERS = frozenset({
    "org.apache.kafka.connect.json.JsonConverter",
    "io.confluent.connect.avro.AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
})  # fmt: skip
"""Converters that write typed formats: SparkSource hands them rows with schemas."""


def wants_schemas(props: Mapping[str, Any]) -> bool:
    """A key or value converter of these settings writes a typed format."""
    for which in ("key", "value"):
        name = str(props.get(f"{which}.converter", "json")).strip()
        schemas = str(props.get(f"{which}.converter.schemas.enable", "false")).strip().lower()
        if name in TYPED_CONVERTERS or (name.lower() == "json" and schemas == "true"):
            return True
    return False


def _tables(props: Mapping[str, Any], values: Mapping[str, Any]) -> tuple[str, ...]:
    assigned = str(props.get(TABLES) or "").strip()
    if assigned:
        return tuple(t for t in assigned.split("\n") if t)
    if values["tables"]:
        return tuple(str(t).strip() for t in values["tables"] if str(t).strip())
    single = str(values["table"] or values["path"]).strip()
    return (single,) if single else ()


def json_converters(props: Mapping[str, Any]) -> bool:
    """Both the connector's ``key.converter`` and ``value.converter`` are ``json``."""
    return all(
        str(props.get(f"{which}.converter", "json")).strip().lower() == "json"
        for which in ("key", "value")
    )
