"""PostgresCdcSource's settings: Debezium's names where Debezium has the setting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos.api import (
    NO_DEFAULT,
    Importance,
    NonEmpty,
    OneOf,
    Range,
    Type,
    config_class,
    definition_of,
    fill,
    setting,
)

VERSION = "1.0.0"
"""The connector's version (``source.version`` of its records)."""
SNAPSHOT_MODES = ("initial", "never", "initial_only", "when_needed", "no_data")
SNAPSHOT_READERS = ("connection", "spark")
AUTOCREATE_MODES = ("all_tables", "filtered", "disabled")
_CONNECTION = "Connection"
_CAPTURE = "Capture"


def _seconds(ms: int) -> float:
    return ms / 1000


@config_class
class CdcSettings:
    hostname: str = setting(
        "database.hostname", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.HIGH,
        "PostgreSQL's host.", _CONNECTION,
    )  # fmt: skip
    port: int = setting(
        "database.port", Type.INT, 5432, Range(1, 65535), Importance.HIGH,
        "PostgreSQL's port.", _CONNECTION,
    )  # fmt: skip
    user: str = setting(
        "database.user", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.HIGH,
        "The user: it needs the REPLICATION attribute, SELECT on the captured tables and, "
        "for the connector to create the publication, ownership of them (see docs/cdc.md).",
        _CONNECTION,
    )  # fmt: skip
    password: str = setting(
        "database.password", Type.PASSWORD, "", None, Importance.HIGH,
        "The user's password.", _CONNECTION,
    )  # fmt: skip
    dbname: str = setting(
        "database.dbname", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.HIGH,
        "The database to capture.", _CONNECTION,
    )  # fmt: skip
    connect_timeout: float = setting(
        "connect.timeout.ms", Type.LONG, 30000, Range(at_least=1000), Importance.LOW,
        "How long to wait for a connection to PostgreSQL.", _CONNECTION, convert=_seconds,
    )  # fmt: skip
    prefix: str = setting(
        "topic.prefix", Type.STRING, NO_DEFAULT, NonEmpty(), Importance.HIGH,
        "The name of this source: topics are <topic.prefix>.<schema>.<table>, and it names "
        "the source partition ({\"server\": <topic.prefix>}).", _CAPTURE,
    )  # fmt: skip
    slot: str = setting(
        "slot.name", Type.STRING, "debezium", NonEmpty(), Importance.MEDIUM,
        "The logical replication slot (created with the pgoutput plugin when missing).",
        _CAPTURE,
    )  # fmt: skip
    slot_drop_on_stop: bool = setting(
        "slot.drop.on.stop", Type.BOOLEAN, False, None, Importance.LOW,
        "Drop the slot when the task stops for good (the connector deleted or stopped); "
        "the next start snapshots again as snapshot.mode says.", _CAPTURE,
    )  # fmt: skip
    slot_max_retries: int = setting(
        "slot.max.retries", Type.INT, 6, Range(at_least=0), Importance.LOW,
        "How many times to try again for a slot another connection still holds (a "
        "predecessor the server has not yet seen go) before the task fails.", _CAPTURE,
    )  # fmt: skip
    slot_retry_delay: float = setting(
        "slot.retry.delay.ms", Type.LONG, 10000, Range(at_least=0), Importance.LOW,
        "How long to wait between those tries.", _CAPTURE, convert=_seconds,
    )  # fmt: skip
    publication: str = setting(
        "publication.name", Type.STRING, "dbz_publication", NonEmpty(), Importance.MEDIUM,
        "The publication whose tables are captured.", _CAPTURE,
    )  # fmt: skip
    autocreate: str = setting(
        "publication.autocreate.mode", Type.STRING, "all_tables", OneOf(*AUTOCREATE_MODES),
        Importance.MEDIUM,
        "When the publication is missing: all_tables creates it FOR ALL TABLES (needs a "
        "superuser), filtered for the tables table.include.list selects (needs their "
        "owner), disabled refuses to start.", _CAPTURE,
    )  # fmt: skip
    include: tuple[str, ...] = setting(
        "table.include.list", Type.LIST, "", None, Importance.HIGH,
        "Regular expressions matched against <schema>.<table>: the tables to capture "
        "(empty: every table of the publication).", _CAPTURE, convert=tuple,
    )  # fmt: skip
    exclude: tuple[str, ...] = setting(
        "table.exclude.list", Type.LIST, "", None, Importance.MEDIUM,
        "Regular expressions matched against <schema>.<table>: tables not to capture.",
        _CAPTURE, convert=tuple,
    )  # fmt: skip
    snapshot_mode: str = setting(
        "snapshot.mode", Type.STRING, "initial", OneOf(*SNAPSHOT_MODES), Importance.HIGH,
        "initial: the tables' rows first (op r), then their changes; never: changes "
        "only; initial_only: the rows and no changes; when_needed: a snapshot when there "
        "is no offset or the slot is gone; no_data: changes only, from the slot's start.",
        _CAPTURE,
    )  # fmt: skip
    snapshot_fetch_size: int = setting(
        "snapshot.fetch.size", Type.INT, 10240, Range(at_least=1), Importance.MEDIUM,
        "Rows per snapshot chunk: each chunk is one Kafka transaction, its progress in the "
        "source offset.", _CAPTURE,
    )  # fmt: skip
    snapshot_reader: str = setting(
        "snapshot.reader", Type.STRING, "connection", OneOf(*SNAPSHOT_READERS),
        Importance.MEDIUM,
        "connection: the snapshot is read by one PostgreSQL connection of the task; spark: "
        "by Spark's JDBC reader, each table whose primary key is one integer column in key "
        "ranges across Spark tasks, every connection joined to the same exported snapshot "
        "(needs Spark and spark.jdbc.drivers=postgresql on the worker; see docs/cdc.md).",
        _CAPTURE,
    )  # fmt: skip
    max_batch_size: int = setting(
        "max.batch.size", Type.INT, 2048, Range(at_least=1), Importance.LOW,
        "Most changes per poll.", _CAPTURE,
    )  # fmt: skip
    transaction_max_events: int = setting(
        "transaction.max.events", Type.INT, 100000, Range(at_least=1), Importance.LOW,
        "A database transaction with more changes than this is written in several Kafka "
        "transactions of at most this many; its records carry the eos.cdc.transaction.part "
        "header (see docs/cdc.md).", _CAPTURE,
    )  # fmt: skip
    heartbeat_interval: float = setting(
        "heartbeat.interval.ms", Type.INT, 0, Range(at_least=0), Importance.MEDIUM,
        "How often, while the captured tables are quiet, to write a heartbeat record to "
        "__debezium-heartbeat.<topic.prefix> so that the slot moves on with the server's "
        "WAL (0: never; the slot then holds WAL while the tables are quiet).", _CAPTURE,
        convert=_seconds,
    )  # fmt: skip
    skipped_operations: tuple[str, ...] = setting(
        "skipped.operations", Type.LIST, "t", None, Importance.LOW,
        "Operations not written: c, u, d, t (truncate) or none.", _CAPTURE, convert=tuple,
    )  # fmt: skip
    tombstones_on_delete: bool = setting(
        "tombstones.on.delete", Type.BOOLEAN, True, None, Importance.LOW,
        "Write a tombstone (the key, a null value) after each delete.", _CAPTURE,
    )  # fmt: skip
    name_adjustment: str = setting(
        "schema.name.adjustment.mode", Type.STRING, "none", OneOf("none", "avro"),
        Importance.LOW,
        "avro: characters an Avro name may not hold (a '-' in topic.prefix) become '_' in "
        "schema names, as the Avro converter needs; none: names as they are.", _CAPTURE,
    )  # fmt: skip
    poll_interval: float = setting(
        "poll.interval.ms", Type.LONG, 500, Range(at_least=1), Importance.LOW,
        "How long a poll waits for changes at most.", _CAPTURE, convert=_seconds,
    )  # fmt: skip
    signal_table: str = setting(
        "signal.data.collection", Type.STRING, "", None, Importance.LOW,
        "<schema>.<table> of Debezium's signal table (columns id, type, data; in the "
        "publication): a row of type execute-snapshot with data {\"data-collections\": "
        "[...]} snapshots those captured tables again while streaming goes on (an "
        "incremental snapshot, exactly once; see docs/cdc.md). Empty: no signals.",
        _CAPTURE,
    )  # fmt: skip

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> CdcSettings:
        return fill(cls, CONFIG_DEF.parse(config))

    @property
    def partition(self) -> dict[str, str]:
        """The one source partition of the connector (Debezium's)."""
        return {"server": self.prefix}


CONFIG_DEF = definition_of(CdcSettings)
