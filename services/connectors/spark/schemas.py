"""Spark's schema → Connect's: what SparkSource declares as its records' key and value
schemas for the converters that write typed formats (Avro, Protobuf, JSON Schema, JSON
with ``schemas.enable=true``).

=====================  ============================================================
Spark type             Connect schema
=====================  ============================================================
byte, short            INT8, INT16
int, long              INT32, INT64
float, double          FLOAT32, FLOAT64
boolean                BOOLEAN
string, char, varchar  STRING
binary                 BYTES
decimal(p, s)          Decimal, scale ``s`` (parameter ``connect.decimal.precision`` = p)
date                   Date
timestamp              Timestamp (milliseconds; finer digits are dropped)
timestamp_ntz          Timestamp (the wall-clock time read as UTC)
array                  ARRAY of the element's schema (optional if it may hold nulls)
map                    MAP (values optional if they may be null)
struct                 STRUCT with the fields in order
void (null)            optional STRING (always null)
=====================  ============================================================

A nullable column is an optional field. The value schema is a STRUCT of the row's
columns; the key schema is the key column's own schema (one ``key.columns``) or a STRUCT
of them. Intervals, variants and other types a typed format cannot carry are refused
with a message naming the column.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import types as T

from eos.api import Date, Decimal, Schema, SchemaBuilder, Timestamp
from eos.api.schema import SchemaType

_PRIMITIVES: dict[type, SchemaType] = {
    T.ByteType: SchemaType.INT8, T.ShortType: SchemaType.INT16,
    T.IntegerType: SchemaType.INT32, T.LongType: SchemaType.INT64,
    T.FloatType: SchemaType.FLOAT32, T.DoubleType: SchemaType.FLOAT64,
    T.BooleanType: SchemaType.BOOLEAN, T.StringType: SchemaType.STRING,
    T.CharType: SchemaType.STRING, T.VarcharType: SchemaType.STRING,
    T.BinaryType: SchemaType.BYTES,
}  # fmt: skip


def connect_schema(data_type: T.DataType, optional: bool, where: str) -> Schema:
    """The Connect schema of a Spark type (``where`` names the column in errors)."""
    builder = _builder(data_type, where)
    if optional:
        builder.optional()
    return builder.build()


def _builder(data_type: T.DataType, where: str) -> SchemaBuilder:
    kind = _PRIMITIVES.get(type(data_type))
    if kind is not None:
        return SchemaBuilder.of(kind)
    if isinstance(data_type, T.NullType):
        return SchemaBuilder.string().optional()
    if isinstance(data_type, T.DecimalType):
        return Decimal.builder(data_type.scale).parameter(
            "connect.decimal.precision", str(data_type.precision)
        )
    if isinstance(data_type, T.DateType):
        return Date.builder()
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return Timestamp.builder()
    if isinstance(data_type, T.ArrayType):
        element = connect_schema(data_type.elementType, data_type.containsNull, f"{where}[]")
        return SchemaBuilder.array(element)
    if isinstance(data_type, T.MapType):
        key = connect_schema(data_type.keyType, False, f"{where} key")
        value = connect_schema(data_type.valueType, data_type.valueContainsNull, f"{where} value")
        return SchemaBuilder.map(key, value)
    if isinstance(data_type, T.StructType):
        builder = SchemaBuilder.struct()
        for field in data_type.fields:
            builder.field(field.name, connect_schema(field.dataType, field.nullable,
                                                     f"{where}.{field.name}"))  # fmt: skip
        return builder
    raise ValueError(
        f"column {where!r} is of type {data_type.simpleString()}, which the typed converters "
        "(Avro, Protobuf, JSON Schema, JSON with schemas) cannot carry: cast it in a query, "
        "or use the json converter"
    )


def value_schema(schema: T.StructType, hidden: Sequence[str] = ()) -> Schema:
    """The STRUCT of every column but the ``hidden`` ones (required: a row is a value)."""
    builder = SchemaBuilder.struct()
    for field in schema.fields:
        if field.name not in hidden:
            builder.field(field.name, connect_schema(field.dataType, field.nullable, field.name))
    return builder.build()


def key_schema(schema: T.StructType, key_columns: Sequence[str]) -> Schema | None:
    """The key's schema: the one key column's, or a STRUCT of several; None without."""
    fields = {f.name: f for f in schema.fields}
    if not key_columns:
        return None
    if len(key_columns) == 1:
        field = fields[key_columns[0]]
        return connect_schema(field.dataType, field.nullable, field.name)
    builder = SchemaBuilder.struct()
    for name in key_columns:
        builder.field(name, connect_schema(fields[name].dataType, fields[name].nullable, name))
    return builder.build()
