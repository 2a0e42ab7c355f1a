"""PostgresCdcSource's pure parts: pgoutput decoding, Debezium's type mapping, and the
offset with its snapshot/stream handover rule."""

from __future__ import annotations

import decimal
import itertools
import struct

import pytest

from eos.api import SourceRecord, Struct
from eos.transforms.loader import transform_class
from eos.transforms.new_record_state import ExtractNewRecordState
from services.connectors.postgres_cdc import pgoutput
from services.connectors.postgres_cdc.catalog import CatalogColumn
from services.connectors.postgres_cdc.column_types import (
    ColumnType,
    column_schema,
    default_text,
    map_type,
    parse_array,
)
from services.connectors.postgres_cdc.envelope import Change, TableShape
from services.connectors.postgres_cdc.position import Position, Read
from services.connectors.postgres_cdc.privileges import docs_table, plan
from services.connectors.postgres_cdc.settings import CdcSettings
from services.connectors.postgres_cdc.spark_snapshot import key_ranges, session_statement, splits
from services.connectors.postgres_cdc.task import signalled_tables


def _tuple(*columns: str | None) -> bytes:
    out = struct.pack(">H", len(columns))
    for text in columns:
        if text is None:
            out += b"n"
        else:
            data = text.encode()
            out += b"t" + struct.pack(">I", len(data)) + data
    return out


def test_begin_commit_and_changes_decode() -> None:
    begin = pgoutput.decode(b"B" + struct.pack(">QqI", 0x1925ED8, 1_000_000, 754))
    assert begin == pgoutput.Begin(0x1925ED8, pgoutput.PG_EPOCH_US + 1_000_000, 754)
    commit = pgoutput.decode(b"C\x00" + struct.pack(">QQq", 10, 20, 5))
    assert commit == pgoutput.Commit(10, 20, pgoutput.PG_EPOCH_US + 5)
    relation = pgoutput.decode(
        b"R" + struct.pack(">I", 16386) + b"public\x00t\x00d" + struct.pack(">H", 2)
        + b"\x01id\x00" + struct.pack(">Ii", 23, -1)
        + b"\x00n\x00" + struct.pack(">Ii", 1700, (10 << 16 | 2) + 4)
    )  # fmt: skip
    assert relation == pgoutput.Relation(16386, "public", "t", "d", (
        pgoutput.RelationColumn("id", 23, -1, True),
        pgoutput.RelationColumn("n", 1700, (10 << 16 | 2) + 4, False),
    ))  # fmt: skip
    insert = pgoutput.decode(b"I" + struct.pack(">I", 16386) + b"N" + _tuple("1", None))
    assert insert == pgoutput.Insert(16386, (("t", "1"), ("n", None)))
    update = pgoutput.decode(
        b"U" + struct.pack(">I", 1) + b"K" + _tuple("1", None) + b"N" + _tuple("2", "x")
    )
    assert update == pgoutput.Update(1, (("t", "2"), ("t", "x")), (("t", "1"), ("n", None)), True)
    plain = pgoutput.decode(b"U" + struct.pack(">I", 1) + b"N" + _tuple("2", "é"))
    assert plain == pgoutput.Update(1, (("t", "2"), ("t", "é")), None, False)
    delete = pgoutput.decode(b"D" + struct.pack(">I", 1) + b"O" + _tuple("1", "x"))
    assert delete == pgoutput.Delete(1, (("t", "1"), ("t", "x")), False)
    truncate = pgoutput.decode(b"T" + struct.pack(">IB", 2, 1) + struct.pack(">II", 5, 6))
    assert truncate == pgoutput.Truncate((5, 6), True, False)
    assert pgoutput.decode(b"Y\x00") == pgoutput.Other("Y")


@pytest.mark.parametrize("payload", [b"", b"Z", b"I\x00", b"U" + struct.pack(">I", 1) + b"X"])
def test_malformed_messages_are_refused(payload: bytes) -> None:
    with pytest.raises(pgoutput.DecodeError):
        pgoutput.decode(payload)


def test_lsn_text_round_trips() -> None:
    assert pgoutput.lsn_text(0x1_0192_5ED8) == "1/1925ED8"
    assert pgoutput.parse_lsn("1/1925ED8") == 0x1_0192_5ED8


def _value(name: str, text: str, typmod: int = -1, **kind: object) -> object:
    mapped = map_type(ColumnType(name, typmod, **kind))  # type: ignore[arg-type]
    assert mapped is not None
    return mapped.parser(column_schema(mapped, True))(text)


def test_types_as_debezium_maps_them() -> None:
    assert _value("int8", "42") == 42
    assert _value("bool", "t") is True
    assert _value("float8", "-Infinity") == float("-inf")
    assert _value("numeric", "12.5", (10 << 16 | 2) + 4) == decimal.Decimal("12.50")
    variable = _value("numeric", "-1.25")
    assert isinstance(variable, Struct)
    assert variable.get("scale") == 2
    assert variable.get("value") == (-125).to_bytes(1, "big", signed=True)
    assert _value("date", "1970-01-02") == 1
    assert _value("timestamp", "1970-01-01 00:00:01.000002") == 1_000_002
    assert _value("timestamp", "1970-01-01 00:00:01.5", 3) == 1500
    assert _value("timestamptz", "2024-02-29 12:00:00.5+01", 3) == "2024-02-29T11:00:00.500Z"
    assert _value("timestamptz", "2024-02-29 12:00:00+00") == "2024-02-29T12:00:00.000000Z"
    assert _value("time", "01:00:00.25") == 3_600_250_000
    assert _value("interval", "P1DT1H") == 86_400_000_000 + 3_600_000_000
    assert _value("bytea", "\\x0102") == b"\x01\x02"
    assert _value("jsonb", '{"a": 1}') == '{"a": 1}'
    assert _value("int4", "{1,NULL,3}", array=True) == [1, None, 3]
    assert _value("mood", "sad", enum_labels=("sad", "ok")) == "sad"
    assert map_type(ColumnType("tsrange", -1)) is None  # left out, as Debezium does


def test_schemas_carry_debezium_names() -> None:
    def schema(name: str, typmod: int = -1) -> object:
        mapped = map_type(ColumnType(name, typmod))
        assert mapped is not None
        return column_schema(mapped, False)

    assert schema("timestamp").name == "io.debezium.time.MicroTimestamp"  # type: ignore[attr-defined]
    assert schema("date").name == "io.debezium.time.Date"  # type: ignore[attr-defined]
    assert schema("uuid").name == "io.debezium.data.Uuid"  # type: ignore[attr-defined]
    decimal_schema = schema("numeric", (10 << 16 | 2) + 4)
    assert decimal_schema.parameters == {  # type: ignore[attr-defined]
        "scale": "2", "connect.decimal.precision": "10"
    }  # fmt: skip


def test_array_literals() -> None:
    assert parse_array("{}") == []
    assert parse_array('{a,"b c","x\\"y",NULL,"NULL"}') == ["a", "b c", 'x"y', None, "NULL"]


def test_offsets_round_trip() -> None:
    position = Position(lsn_commit=5, lsn=9, tx_id=7, events=3)
    position.start_snapshot(["public.a", "public.b"], 100)
    position.snapshot_moved(1, ("42",))
    again = Position.from_offset(position.to_offset())
    assert again == position
    assert Position.from_offset(None) is None


def test_a_resumed_snapshot_adds_a_read_from_where_it_got() -> None:
    position = Position()
    position.start_snapshot(["public.a", "public.b", "public.c"], 100)
    position.snapshot_moved(1, ("42",))
    position.start_snapshot(["public.a", "public.b", "public.c"], 200)  # after a crash
    assert position.reads == [Read(0, None, 100), Read(1, ("42",), 200)]
    assert position.reads_of("public.a") == [Read(0, None, 100)]
    # rows of b up to key 42 were read at 100, the rest at 200
    assert position.reads_of("public.b") == [Read(0, None, 100), Read(1, ("42",), 200)]
    assert position.reads_of("public.c") == [Read(1, ("42",), 200)]
    assert position.reads_of("public.other") == []
    position.snapshot_moved(3, None)
    assert position.snapshot_done
    position.stream_moved(150)
    assert position.reads
    position.stream_moved(200)
    assert not position.reads
    assert "snapshot" not in position.to_offset()


def _shape() -> TableShape:
    columns = [
        CatalogColumn("id", ColumnType("int4", -1), False, 1, "integer"),
        CatalogColumn("name", ColumnType("text", -1), True, 0, "text"),
    ]
    return TableShape("shop", "db", "public.t", columns, "1.0.0")


def _events() -> tuple[SourceRecord, SourceRecord, SourceRecord]:
    shape = _shape()
    change = Change(1_700_000_000_000_000, 754, 99)
    created = shape.record("c", None, shape.row({"id": "1", "name": "a"}), change, {}, None)
    deleted = shape.record("d", shape.row({"id": "1"}, missing=True), None, change, {}, None)
    return created, deleted, shape.tombstone(deleted, None)


def _unwrap(**settings: str) -> ExtractNewRecordState:
    found = transform_class("io.debezium.transforms.ExtractNewRecordState")
    assert found is transform_class("ExtractNewRecordState")
    transform = found()
    assert isinstance(transform, ExtractNewRecordState)
    transform.configure({k.replace("_", "."): v for k, v in settings.items()})
    return transform


def test_unwrapping_keeps_the_row_and_turns_deletes_into_tombstones() -> None:
    created, deleted, tombstone = _events()
    unwrap = _unwrap()
    row = unwrap.apply(created)
    assert row is not None
    assert row.value == created.value.get("after")
    assert row.value_schema is not None
    assert row.value_schema.name == "shop.public.t.Value"
    gone = unwrap.apply(deleted)
    assert gone is not None
    assert gone.value is None
    assert gone.key == deleted.key
    assert unwrap.apply(tombstone) is tombstone


def test_unwrapping_rewrites_deletes_and_adds_fields() -> None:
    created, deleted, tombstone = _events()
    unwrap = _unwrap(delete_tombstone_handling_mode="rewrite", add_fields="op,table,source.ts_ms")
    row = unwrap.apply(created)
    assert row is not None
    assert row.value.get("__deleted") == "false"
    assert row.value.get("__op") == "c"
    assert row.value.get("__table") == "t"
    assert row.value.get("__source_ts_ms") == 1_700_000_000_000
    gone = unwrap.apply(deleted)
    assert gone is not None
    assert gone.value.get("__deleted") == "true"
    assert gone.value.get("id") == 1
    assert unwrap.apply(tombstone) is None
    assert _unwrap(delete_tombstone_handling_mode="drop").apply(deleted) is None


def _cdc_settings(**extra: str) -> CdcSettings:
    return CdcSettings.parse({
        "database.hostname": "db", "database.user": "u", "database.dbname": "shop",
        "topic.prefix": "p", "publication.name": "pub", **extra,
    })  # fmt: skip


def test_the_privileges_plan_names_each_grant_once() -> None:
    tables = ["public.orders", "public.customers", "sales.lines"]
    filtered = plan(_cdc_settings(**{"publication.autocreate.mode": "filtered"}), tables,
                    publication_exists=False)  # fmt: skip
    grants = [n.grant for n in filtered]
    assert grants[:4] == [
        'ALTER ROLE "u" REPLICATION;',
        'GRANT CONNECT ON DATABASE "shop" TO "u";',
        'GRANT USAGE ON SCHEMA "public" TO "u";',
        'GRANT USAGE ON SCHEMA "sales" TO "u";',  # one per schema
    ]
    assert 'GRANT SELECT ON "sales"."lines" TO "u";' in grants
    assert sum("OWNER TO" in g for g in grants) == 3  # creating the publication FOR TABLE
    assert not any("FOR ALL TABLES" in g for g in grants)
    everything = plan(_cdc_settings(), tables, publication_exists=False)  # all_tables
    assert [n.privilege for n in everything][-1] == "superuser"
    assert not any("OWNER TO" in n.grant for n in everything)
    made = plan(_cdc_settings(), tables, publication_exists=True)  # nothing to create
    assert {n.privilege for n in made} == {"REPLICATION", "CONNECT", "USAGE", "SELECT"}
    signals = _cdc_settings(**{"publication.autocreate.mode": "filtered",
                               "signal.data.collection": "ops.signals"})  # fmt: skip
    with_signal = [n.grant for n in plan(signals, tables, publication_exists=False)]
    assert 'GRANT USAGE ON SCHEMA "ops" TO "u";' in with_signal  # published, not read
    assert (
        'ALTER TABLE "ops"."signals" OWNER TO "u"; -- or create the publication as its owner'
        in with_signal
    )
    assert 'GRANT SELECT ON "ops"."signals" TO "u";' not in with_signal
    published = [n.grant for n in plan(signals, tables, publication_exists=True)]
    assert not any('"ops"' in g for g in published if "OWNER" in g)


def test_the_docs_table_of_privileges_is_generated() -> None:
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "cdc.md"
    assert docs_table() in doc.read_text()


def test_column_defaults_that_are_constants_as_the_server_prints_them() -> None:
    assert default_text("'abc'::text") == "abc"
    assert default_text("'it''s'::character varying") == "it's"
    assert default_text("42") == "42"
    assert default_text("(-1)") == "-1"
    assert default_text("'1.5'::numeric") == "1.5"
    assert default_text("1.5") == "1.5"
    assert default_text("true") == "t"
    assert default_text("'2024-02-29'::date") == "2024-02-29"
    assert default_text("'{1,2}'::integer[]") == "{1,2}"
    for expression in (None, "now()", "nextval('t_id_seq'::regclass)", "NULL::text",
                       "('a'::text || 'b'::text)", "CURRENT_TIMESTAMP"):  # fmt: skip
        assert default_text(expression) is None, expression


def test_a_not_null_columns_constant_default_is_its_schemas_default() -> None:
    """Debezium's column defaults, for NOT NULL columns: a column added with a DEFAULT
    keeps the registry's BACKWARD compatibility. A nullable column's default is left out
    (Connect's converters would write its NULLs as the default)."""
    columns = [
        CatalogColumn("id", ColumnType("int4", -1), False, 1, "integer", "nextval('s')"),
        CatalogColumn("n", ColumnType("int8", -1), False, 0, "bigint", "'7'::bigint"),
        CatalogColumn("s", ColumnType("varchar", -1), False, 0, "character varying", "'x'"),
        CatalogColumn("b", ColumnType("bool", -1), False, 0, "boolean", "false"),
        CatalogColumn("d", ColumnType("date", -1), False, 0, "date", "'1970-01-11'::date"),
        CatalogColumn("p", ColumnType("numeric", (5 << 16) + 2 + 4), False, 0, "numeric", "1.5"),
        CatalogColumn("t", ColumnType("timestamptz", -1), False, 0, "timestamptz", "now()"),
        CatalogColumn("maybe", ColumnType("text", -1), True, 0, "text", "'y'::text"),
        CatalogColumn("bad", ColumnType("int4", -1), False, 0, "integer", "'x'::integer"),
    ]
    shape = TableShape("shop", "db", "public.t", columns, "1.0.0")
    defaults = {f.name: f.schema.default for f in shape.value_schema.fields}
    assert defaults == {
        "id": None, "n": 7, "s": "x", "b": False, "d": 10, "p": decimal.Decimal("1.50"),
        "t": None, "maybe": None, "bad": None,
    }  # fmt: skip


def test_execute_snapshot_signals_name_captured_tables() -> None:
    captured = ["public.a", "public.b", "sales.c"]

    def signal(data: str, kind: str = "execute-snapshot") -> list[str]:
        return signalled_tables({"id": "1", "type": kind, "data": data}, captured)

    assert signal('{"data-collections": ["public.b", "public.a"]}') == ["public.a", "public.b"]
    assert signal('{"data-collections": ["public\\\\..*"], "type": "INCREMENTAL"}') == [
        "public.a", "public.b",
    ]  # fmt: skip
    assert signal('{"data-collections": ["other.x"]}') == []
    assert signal('{"data-collections": ["public.a"], "type": "blocking"}') == []
    assert signal("not json") == []
    assert signal('{"data-collections": ["public.a"]}', kind="stop-snapshot") == []


def test_a_requested_snapshot_rides_in_the_offset_until_it_is_read() -> None:
    position = Position(lsn_commit=500, lsn=500)
    assert position.request_snapshot(["public.a"])
    offset = position.to_offset()
    assert offset["snapshot"] == {
        "tables": ["public.a"], "done": False, "table": 0, "after": None, "reads": [],
        "incremental": True,
    }  # fmt: skip
    again = Position.from_offset(offset)
    assert again is not None
    assert (again.incremental, again.snapshot_done) == (True, False)
    assert not again.request_snapshot(["public.b"])  # one at a time
    again.start_snapshot(["ignored"], 600)  # as a restart does: the asked tables stay
    assert again.tables == ["public.a"]
    assert again.snapshot_moved(1, None)
    again.stream_moved(550)
    assert (again.filtering, again.incremental) == (True, True)  # before 600: checked
    again.stream_moved(600)
    assert (again.filtering, again.incremental) == (False, False)
    assert "snapshot" not in again.to_offset()


def test_spark_key_ranges_cover_the_keys_once() -> None:
    assert key_ranges(1, 500, 500, 1000) == [(None, None)]  # one chunk: one range
    assert key_ranges(1, 3000, 3000, 700) == [(None, 1501), (1501, None)]  # two Spark tasks
    many = key_ranges(-5, 1_000_000, 1_000_006, 10240)
    assert len(many) == 11
    assert many[0][0] is None
    assert many[-1][1] is None
    assert all(a[1] == b[0] for a, b in itertools.pairwise(many))
    assert key_ranges(7, 7, 5000, 10) == [(None, None)]  # one key: one range


def test_spark_connections_join_the_snapshot_with_the_stream_s_settings() -> None:
    statement = session_statement("00000003-00000002-1")
    assert statement.startswith("SET DateStyle = 'ISO'; SET TimeZone = 'UTC'")
    assert statement.endswith(
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
        "SET TRANSACTION SNAPSHOT '00000003-00000002-1'"
    )
    with pytest.raises(ValueError, match="snapshot id"):
        session_statement("x'; DROP TABLE t; --")


def test_spark_splits_tables_keyed_by_one_integer_column() -> None:
    TYPE_NAMES = {"bigint": "int8", "integer": "int4", "text": "text"}

    def shape(*keys: tuple[str, str]) -> TableShape:
        columns = [
            CatalogColumn(name, ColumnType(TYPE_NAMES[sql], -1), False, i + 1, sql)
            for i, (name, sql) in enumerate(keys)
        ]
        return TableShape("p", "db", "public.t", columns, "1")

    assert splits(shape(("id", "bigint")))
    assert splits(shape(("id", "integer")))
    assert not splits(shape(("code", "text")))
    assert not splits(shape(("a", "integer"), ("b", "integer")))
    assert not splits(shape())


def test_spark_without_the_jdbc_driver_is_one_reason_naming_the_setting() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from services.connectors.postgres_cdc.catalog import CdcSetupError
    from services.connectors.postgres_cdc.snapshot import SnapshotReader
    from services.connectors.postgres_cdc.spark_snapshot import SparkSnapshotReader

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError(
            "An error occurred while calling o40.jdbc.\n: java.lang.ClassNotFoundException: "
            "org.postgresql.Driver\n\tat java.base/java.net.URLClassLoader.findClass"
        )

    own: Any = SimpleNamespace(key_range=lambda shape, where: (1, 100, 100))
    resources: Any = None  # never asked: the session is given
    reader = SparkSnapshotReader(
        _cdc_settings(), "00000003-1", cast(SnapshotReader, own), resources
    )
    reader._session = SimpleNamespace(read=SimpleNamespace(jdbc=refuse))
    column = CatalogColumn("id", ColumnType("int8", -1), False, 1, "bigint")
    shape = TableShape("p", "shop", "public.t", [column], "1")
    with pytest.raises(CdcSetupError) as failed:
        reader.chunk(shape, None, 10)
    assert str(failed.value) == (
        "snapshot.reader=spark: the JDBC driver for jdbc:postgresql://db:5432/shop is "
        "not loaded: add postgresql to the worker setting spark.jdbc.drivers (e.g. "
        "spark.jdbc.drivers=postgresql) and restart the worker"
    )
