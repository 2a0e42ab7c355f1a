"""Connect's schema model: what a record's key or value looks like, for converters that
write typed formats (JSON with schemas, Avro, Protobuf, JSON Schema).

A :class:`Schema` is immutable: a :class:`SchemaType`, whether the value may be None
(``optional``), a ``default`` (None: no default), and the optional metadata ``name``,
``version``, ``doc`` and ``parameters``. A STRUCT has ordered :class:`Field` s; an ARRAY
a ``value_schema``; a MAP a ``key_schema`` and a ``value_schema``. Build one with
:class:`SchemaBuilder` (``SchemaBuilder.struct().name("Row").field("id", INT64_SCHEMA)``),
or take a ready one (``INT32_SCHEMA``, ``OPTIONAL_STRING_SCHEMA`` …).

The Python value of each type, as :func:`validate_value` checks it:

=================  =========================================================
INT8 … INT64       ``int`` (not ``bool``) within the type's signed range
FLOAT32, FLOAT64   ``float`` or ``int`` (not ``bool``)
BOOLEAN            ``bool``
STRING             ``str``
BYTES              ``bytes``, ``bytearray`` or ``memoryview``
ARRAY              ``list`` or ``tuple`` of values of ``value_schema``
MAP                a ``Mapping`` of ``key_schema`` values to ``value_schema`` values
STRUCT             a :class:`Struct` of exactly this schema
=================  =========================================================

Logical types (:mod:`eos.api.logical`) are recognised by ``name``: Decimal (BYTES,
``decimal.Decimal``), Date (INT32, ``datetime.date``), Time (INT32, ``datetime.time``)
and Timestamp (INT64, ``datetime.datetime``; naive means UTC).

Two schemas are equal when every attribute is: type, optional, default, name, version,
doc, parameters, fields, key and value schemas (as in Connect).
"""

from __future__ import annotations

import datetime
import decimal
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from eos.errors import DataError, SchemaBuilderError


class SchemaType(enum.Enum):
    """The type of a :class:`Schema`; ``value`` is Connect's lower-case type name."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        """Every type but ARRAY, MAP and STRUCT."""
        return self not in (SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT)


@dataclass(frozen=True)
class Field:
    """A STRUCT's field: its name, its position (from 0) and its schema."""

    name: str
    index: int
    schema: Schema


@dataclass(frozen=True, eq=True)
class Schema:
    """An immutable Connect schema (see the module's docstring)."""

    type: SchemaType
    optional: bool = False
    default: Any = None
    """The value used where a value is None; None means no default."""
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    """A STRUCT's fields in order; empty for every other type."""
    key_schema: Schema | None = None
    """A MAP's key schema; None for every other type."""
    value_schema: Schema | None = None
    """The schema of an ARRAY's elements or of a MAP's values; None for other types."""
    _by_name: Mapping[str, Field] = dc_field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.fields and self.type is not SchemaType.STRUCT:
            raise SchemaBuilderError(f"a {self.type.name} schema cannot have fields")
        by_name: dict[str, Field] = {}
        for i, f in enumerate(self.fields):
            if f.index != i:
                raise SchemaBuilderError(f"field {f.name!r} has index {f.index}, expected {i}")
            if f.name in by_name:
                raise SchemaBuilderError(f"duplicate field name {f.name!r}")
            by_name[f.name] = f
        object.__setattr__(self, "_by_name", by_name)
        if self.parameters is not None:
            object.__setattr__(self, "parameters", dict(self.parameters))

    def __hash__(self) -> int:
        params = tuple(sorted(self.parameters.items())) if self.parameters else None
        return hash(
            (self.type, self.optional, self.name, self.version, self.doc, params, self.fields,
             self.key_schema, self.value_schema)
        )  # fmt: skip

    def field(self, name: str) -> Field | None:
        """The STRUCT field called ``name``, or None; :class:`DataError` on other types."""
        if self.type is not SchemaType.STRUCT:
            raise DataError(f"cannot look up field {name!r} on a {self.type.name} schema")
        return self._by_name.get(name)

    def validate_value(self, value: Any) -> None:
        """:func:`validate_value` with this schema."""
        validate_value(self, value)

    def __str__(self) -> str:
        return (
            f"Schema{{{self.name}:{self.type.name}}}"
            if self.name
            else f"Schema{{{self.type.name}}}"
        )


class Struct:
    """A value of a STRUCT schema: one slot per field, checked on :meth:`put` and
    :meth:`validate`. ``Struct(schema, {"id": 1})`` puts the given values."""

    __slots__ = ("_values", "schema")

    def __init__(self, schema: Schema, values: Mapping[str, Any] | None = None) -> None:
        if schema.type is not SchemaType.STRUCT:
            raise DataError(f"a Struct needs a STRUCT schema, not {schema.type.name}")
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)
        for name, value in (values or {}).items():
            self.put(name, value)

    @classmethod
    def unchecked(cls, schema: Schema, values: list[Any]) -> Struct:
        """A Struct of ``schema`` holding ``values`` (one per field, in field order; the
        list is kept, not copied) without checking them against the schema: for values
        right by construction, built per row where checking every field would cost more
        than building it (:meth:`validate` checks them all)."""
        struct = cls.__new__(cls)
        struct.schema = schema
        struct._values = values
        return struct

    def _field(self, name: str | Field) -> Field:
        if isinstance(name, Field):
            return name
        found = self.schema.field(name)
        if found is None:
            raise DataError(f"{name} is not a valid field name")
        return found

    def put(self, name: str | Field, value: Any) -> Struct:
        """Set a field after checking ``value`` against its schema; returns ``self``."""
        f = self._field(name)
        validate_value(f.schema, value, f'field: "{f.name}"')
        self._values[f.index] = value
        return self

    def get(self, name: str | Field) -> Any:
        """A field's value, or its schema's default when the value is None."""
        f = self._field(name)
        value = self._values[f.index]
        return f.schema.default if value is None else value

    def get_without_default(self, name: str | Field) -> Any:
        """A field's value as put (None when unset)."""
        return self._values[self._field(name).index]

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def validate(self) -> None:
        """Every field holds a valid value; None only where the field is optional or
        has a default. :class:`DataError` names the first field that does not."""
        for f in self.schema.fields:
            value = self._values[f.index]
            if value is None and (f.schema.optional or f.schema.default is not None):
                continue
            validate_value(f.schema, value, f'field: "{f.name}"')

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Struct):
            return NotImplemented
        return self.schema == other.schema and self._values == other._values

    def __hash__(self) -> int:
        return hash((self.schema, tuple(map(_hashable, self._values))))

    def __repr__(self) -> str:
        shown = ",".join(
            f"{f.name}={v!r}" for f, v in zip(self.schema.fields, self._values, strict=True)
            if v is not None
        )  # fmt: skip
        return f"Struct{{{shown}}}"


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(map(_hashable, value))
    if isinstance(value, Mapping):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


_INT_RANGES = {
    SchemaType.INT8: 8, SchemaType.INT16: 16, SchemaType.INT32: 32, SchemaType.INT64: 64
}  # fmt: skip
_PY_TYPES: dict[SchemaType, tuple[type, ...]] = {
    SchemaType.FLOAT32: (float, int),
    SchemaType.FLOAT64: (float, int),
    SchemaType.BOOLEAN: (bool,),
    SchemaType.STRING: (str,),
    SchemaType.BYTES: (bytes, bytearray, memoryview),
    SchemaType.ARRAY: (list, tuple),
    SchemaType.MAP: (Mapping,),
    SchemaType.STRUCT: (Struct,),
}
DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIME_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
_LOGICAL_TYPES: dict[str, tuple[type, ...]] = {
    DECIMAL_NAME: (decimal.Decimal,),
    DATE_NAME: (datetime.date,),
    TIME_NAME: (datetime.time,),
    TIMESTAMP_NAME: (datetime.datetime,),
}


def validate_value(schema: Schema, value: Any, location: str = "value") -> None:
    """Check that ``value`` is a valid value of ``schema`` (see the module's table);
    :class:`DataError` says what is wrong and where (``location``)."""
    if value is None:
        if not schema.optional:
            raise DataError(
                f"Invalid value: null used for required {location}, schema type: {schema.type.name}"
            )
        return
    _check_class(schema, value, location)
    if schema.type is SchemaType.STRUCT:
        if not _same_struct_schema(value.schema, schema):
            raise DataError(f"Struct schemas do not match for {location}")
        value.validate()
    elif schema.type is SchemaType.ARRAY:
        elements = _needs(schema.value_schema, f"element of array {location}")
        for element in value:
            validate_value(elements, element, f"element of array {location}")
    elif schema.type is SchemaType.MAP:
        keys = _needs(schema.key_schema, f"key of map {location}")
        values = _needs(schema.value_schema, f"value of map {location}")
        for k, v in value.items():
            validate_value(keys, k, f"key of map {location}")
            validate_value(values, v, f"value of map {location}")


def _check_class(schema: Schema, value: Any, location: str) -> None:
    logical = _LOGICAL_TYPES.get(schema.name or "")
    expected = logical or _PY_TYPES.get(schema.type, (int,))
    ok = isinstance(value, expected) and not (
        isinstance(value, bool) and schema.type is not SchemaType.BOOLEAN
    )
    if ok and logical is None and schema.type in _INT_RANGES:
        bits = _INT_RANGES[schema.type]
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise DataError(f"Value {value} is out of range for {schema.type.name} for {location}")
    if ok and schema.name == DATE_NAME and isinstance(value, datetime.datetime):
        ok = value.time() == datetime.time(0) and value.utcoffset() in (None, datetime.timedelta(0))
    if not ok:
        named = f' "{schema.name}"' if schema.name else ""
        raise DataError(
            f"Invalid Python object for schema{named} with type {schema.type.name}: "
            f"{type(value).__name__} for {location}"
        )


def _same_struct_schema(actual: Schema, expected: Schema) -> bool:
    """A Struct's schema is the field's schema, or that schema without its default (a
    default value is a Struct of the schema being built, which has no default yet)."""
    if actual == expected:
        return True
    return (actual.fields, actual.name, actual.version) == (
        expected.fields, expected.name, expected.version
    )  # fmt: skip


def _needs(schema: Schema | None, location: str) -> Schema:
    if schema is None:
        raise DataError(f"No schema defined for {location}")
    return schema


class SchemaBuilder:
    """Builds a :class:`Schema` step by step, as Connect's ``SchemaBuilder`` does::

        SchemaBuilder.struct().name("com.example.Row").version(2)
            .field("id", INT64_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA).build()

    Each attribute may be set once (setting it again to another value raises
    :class:`SchemaBuilderError`); ``default`` is checked against the schema so far.
    """

    def __init__(self, type: SchemaType) -> None:
        self.type = type
        self._optional: bool | None = None
        self._default: Any = None
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] | None = None
        self._fields: dict[str, Field] = {}
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None

    # ---- the types
    @classmethod
    def of(cls, type: SchemaType) -> SchemaBuilder:
        return cls(type)

    @classmethod
    def int8(cls) -> SchemaBuilder:
        return cls(SchemaType.INT8)

    @classmethod
    def int16(cls) -> SchemaBuilder:
        return cls(SchemaType.INT16)

    @classmethod
    def int32(cls) -> SchemaBuilder:
        return cls(SchemaType.INT32)

    @classmethod
    def int64(cls) -> SchemaBuilder:
        return cls(SchemaType.INT64)

    @classmethod
    def float32(cls) -> SchemaBuilder:
        return cls(SchemaType.FLOAT32)

    @classmethod
    def float64(cls) -> SchemaBuilder:
        return cls(SchemaType.FLOAT64)

    @classmethod
    def bool(cls) -> SchemaBuilder:
        return cls(SchemaType.BOOLEAN)

    @classmethod
    def string(cls) -> SchemaBuilder:
        return cls(SchemaType.STRING)

    @classmethod
    def bytes(cls) -> SchemaBuilder:
        return cls(SchemaType.BYTES)

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(SchemaType.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema) -> SchemaBuilder:
        builder = cls(SchemaType.ARRAY)
        builder._value_schema = value_schema
        return builder

    @classmethod
    def map(cls, key_schema: Schema, value_schema: Schema) -> SchemaBuilder:
        builder = cls(SchemaType.MAP)
        builder._key_schema, builder._value_schema = key_schema, value_schema
        return builder

    # ---- the attributes
    def _set(self, attr: str, value: Any) -> SchemaBuilder:
        current = getattr(self, "_" + attr)
        if current is not None and current != value:
            raise SchemaBuilderError(f"Invalid SchemaBuilder call: {attr} has already been set.")
        setattr(self, "_" + attr, value)
        return self

    def optional(self) -> SchemaBuilder:
        return self._set("optional", True)

    def required(self) -> SchemaBuilder:
        return self._set("optional", False)

    def default(self, value: Any) -> SchemaBuilder:
        """The default value, checked against the schema built so far."""
        try:
            validate_value(self.build(), value, "default value")
        except DataError as e:
            raise SchemaBuilderError(f"Invalid default value: {e}") from e
        return self._set("default", value)

    def name(self, name: str) -> SchemaBuilder:
        return self._set("name", name)

    def version(self, version: int) -> SchemaBuilder:
        return self._set("version", version)

    def doc(self, doc: str) -> SchemaBuilder:
        return self._set("doc", doc)

    def parameter(self, key: str, value: str) -> SchemaBuilder:
        if self._parameters is None:
            self._parameters = {}
        self._parameters[key] = value
        return self

    def parameters(self, parameters: Mapping[str, str]) -> SchemaBuilder:
        for key, value in parameters.items():
            self.parameter(key, value)
        return self

    def field(self, name: str, schema: Schema) -> SchemaBuilder:
        """Add a STRUCT field after the ones already added."""
        if self.type is not SchemaType.STRUCT:
            raise SchemaBuilderError(f"Cannot create fields on type {self.type.name}")
        if not name:
            raise SchemaBuilderError("a field name cannot be empty")
        if name in self._fields:
            raise SchemaBuilderError(
                f"Cannot create field because of field name duplication {name}"
            )
        self._fields[name] = Field(name, len(self._fields), schema)
        return self

    def fields(self) -> list[Field]:
        """The STRUCT fields added so far."""
        return list(self._fields.values())

    def build(self) -> Schema:
        return Schema(
            self.type,
            optional=bool(self._optional),
            default=self._default,
            name=self._name,
            version=self._version,
            doc=self._doc,
            parameters=self._parameters,
            fields=tuple(self._fields.values()),
            key_schema=self._key_schema,
            value_schema=self._value_schema,
        )


def copy_schema_basics(source: Schema, builder: SchemaBuilder) -> SchemaBuilder:
    """Give ``builder`` the name, version, doc and parameters of ``source`` (what a
    transform keeps when it derives a new schema from a record's)."""
    if source.name is not None:
        builder.name(source.name)
    if source.version is not None:
        builder.version(source.version)
    if source.doc is not None:
        builder.doc(source.doc)
    if source.parameters:
        builder.parameters(source.parameters)
    return builder


def struct_schema(fields: Iterable[tuple[str, Schema]], name: str | None = None) -> Schema:
    """A required STRUCT schema with ``fields`` in order (a shortcut for the builder)."""
    builder = SchemaBuilder.struct()
    if name is not None:
        builder.name(name)
    for field_name, schema in fields:
        builder.field(field_name, schema)
    return builder.build()


INT8_SCHEMA = Schema(SchemaType.INT8)
INT16_SCHEMA = Schema(SchemaType.INT16)
INT32_SCHEMA = Schema(SchemaType.INT32)
INT64_SCHEMA = Schema(SchemaType.INT64)
FLOAT32_SCHEMA = Schema(SchemaType.FLOAT32)
FLOAT64_SCHEMA = Schema(SchemaType.FLOAT64)
BOOLEAN_SCHEMA = Schema(SchemaType.BOOLEAN)
STRING_SCHEMA = Schema(SchemaType.STRING)
BYTES_SCHEMA = Schema(SchemaType.BYTES)
OPTIONAL_INT8_SCHEMA = Schema(SchemaType.INT8, optional=True)
OPTIONAL_INT16_SCHEMA = Schema(SchemaType.INT16, optional=True)
OPTIONAL_INT32_SCHEMA = Schema(SchemaType.INT32, optional=True)
OPTIONAL_INT64_SCHEMA = Schema(SchemaType.INT64, optional=True)
OPTIONAL_FLOAT32_SCHEMA = Schema(SchemaType.FLOAT32, optional=True)
OPTIONAL_FLOAT64_SCHEMA = Schema(SchemaType.FLOAT64, optional=True)
OPTIONAL_BOOLEAN_SCHEMA = Schema(SchemaType.BOOLEAN, optional=True)
OPTIONAL_STRING_SCHEMA = Schema(SchemaType.STRING, optional=True)
OPTIONAL_BYTES_SCHEMA = Schema(SchemaType.BYTES, optional=True)

# Plain values → Connect values live in eos.api.values; importable from here as well.
from eos.api.values import column_values as column_values  # noqa: E402
from eos.api.values import to_connect as to_connect  # noqa: E402
