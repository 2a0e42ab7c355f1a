"""Cases for the column paths of the converters (Protobuf, JSON): schema shorthands, and
the rows a SparkSource block brings as one Arrow struct column with the Connect schema
SparkSource declares for it (every Spark type the mapping takes, nulls at every level)."""

from __future__ import annotations

import datetime
from decimal import Decimal as D
from typing import Any

import pyarrow as pa

from eos.api.schema import Schema, SchemaBuilder

UTC = datetime.UTC
FIELDS = [
    ("id", pa.int64()), ("tiny", pa.int8()), ("small", pa.int16()), ("whole", pa.int32()),
    ("half", pa.float32()), ("flag", pa.bool_()), ("ratio", pa.float64()),
    ("price", pa.decimal128(12, 3)), ("day", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")), ("local_ts", pa.timestamp("us")),
    ("raw", pa.binary()), ("note", pa.string()), ("tags", pa.list_(pa.string())),
    ("point", pa.struct([("x", pa.int32()), ("y", pa.float64())])),
    ("attrs", pa.map_(pa.string(), pa.int32())), ("codes", pa.map_(pa.int32(), pa.date32())),
    ("empty", pa.null()),
]  # fmt: skip


def spark_rows(*, ratio_scale: float = 1.0, note_suffix: str = "") -> tuple[Schema, Any]:
    """300 such rows: SparkSource's schema for them and their struct column. ``ratio`` is
    ``i / 4 * ratio_scale`` (large enough, doubles come in exponent form); each ``note``
    ends with ``note_suffix``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from services.connectors.spark.schemas import value_schema

    epoch = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(300):
        stamp = epoch + datetime.timedelta(milliseconds=i * 1001)
        rows.append({
            "id": i, "tiny": i % 256 - 128, "small": None if i % 7 == 0 else i % 30000,
            "whole": i * 1000 - 2**31 + 1, "half": i / 4 - 100, "flag": i % 2 == 0,
            "ratio": i / 4 * ratio_scale, "price": D(i).scaleb(-3) - 5,
            "day": None if i % 11 == 0 else (epoch + datetime.timedelta(days=i % 400)).date(),
            "ts": stamp, "local_ts": None if i % 9 == 0 else stamp.replace(tzinfo=None),
            "raw": None if i % 13 == 0 else i.to_bytes(4, "big"),
            "note": None if i % 5 == 0 else f"ñote {i}{note_suffix}",
            "tags": [f"t{i % 3}", "x"][: i % 3],
            "point": None if i % 6 == 0 else {"x": i % 100, "y": i / 8},
            "attrs": [] if i % 4 == 0 else [("k", i % 10), ("j", -i)],
            "codes": [(i % 50, (epoch + datetime.timedelta(days=i % 30)).date()), (-i - 1, None)],
            "empty": None,
        })  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=pa.schema(FIELDS))
    return value_schema(from_arrow_schema(table.schema)), table.to_struct_array().combine_chunks()


def opt(schema: Schema) -> Schema:
    """``schema`` as an optional one (a nullable Spark column)."""
    return Schema(
        schema.type, True, None, schema.name, schema.version, schema.doc,
        schema.parameters, schema.fields, schema.key_schema, schema.value_schema,
    )  # fmt: skip


def struct(*fields: tuple[str, Schema], optional: bool = False) -> Schema:
    """A STRUCT schema of ``fields`` (name, schema) in order."""
    builder = SchemaBuilder.struct()
    for name, schema in fields:
        builder.field(name, schema)
    return (builder.optional() if optional else builder).build()
