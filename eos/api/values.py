"""Plain Python values (``dict`` for a STRUCT, pairs or ``dict`` for a MAP, as ``pyarrow``'s
``to_pylist`` gives them) as Connect values of a schema; also importable from
:mod:`eos.api.schema`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eos.api.schema import Schema, SchemaType, Struct


def to_connect(schema: Schema | None, value: Any) -> Any:
    """``value`` in plain Python (a ``dict`` for a STRUCT, a ``dict`` or ``(key, value)``
    pairs for a MAP, as ``pyarrow``'s ``to_pylist`` gives) as a Connect value of
    ``schema``: Structs built, nested ones too; anything else as it is."""
    if value is None or schema is None:
        return value
    kind = schema.type
    if kind is SchemaType.STRUCT and not isinstance(value, Struct):
        struct = Struct(schema)
        for f in schema.fields:
            struct._values[f.index] = to_connect(f.schema, value.get(f.name))
        return struct
    if kind is SchemaType.ARRAY and schema.value_schema is not None:
        if schema.value_schema.type.is_primitive:
            return value
        return [to_connect(schema.value_schema, v) for v in value]
    if kind is SchemaType.MAP:
        pairs = value.items() if isinstance(value, Mapping) else value
        return {
            to_connect(schema.key_schema, k): to_connect(schema.value_schema, v) for k, v in pairs
        }
    return value


def column_values(schema: Schema | None, column: Any) -> list[Any]:
    """A block's column (a sequence, or a ``pyarrow`` array) as Connect values."""
    plain = column.to_pylist() if hasattr(column, "to_pylist") else list(column)
    if schema is None or schema.type.is_primitive:
        return plain
    return [to_connect(schema, v) for v in plain]
