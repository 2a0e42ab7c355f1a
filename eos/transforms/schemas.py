"""Schema helpers the field transforms share: Connect's checks (``requireMap``,
``requireStruct``), a cache of derived schemas, and building a Struct from values that
are valid already (:func:`struct_of`, :func:`struct_values`, :func:`values_with`,
:func:`values_at`, :func:`struct_extended`, :func:`struct_picked`: the one place
that reads and fills a Struct's slots directly).

:class:`SchemaCache` keeps the schema a transform derived from an input schema, as
Connect's transforms keep theirs (an LRU of 16): records of one connector share one
schema object, so the cache first compares identity (hashing a Schema walks all its
fields) and hashes only on a miss.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from eos.api.schema import Field, Schema, Struct
from eos.errors import DataError

CACHE_SIZE = 16
T = TypeVar("T")


class SchemaCache(Generic[T]):
    """``get(schema, build)``: ``build(schema)`` once per distinct input schema (what a
    transform derives from it: a schema, or a schema with field positions).

    ``last`` and ``last_built`` are the most recent pair: a transform on the per-record
    path checks ``schema is cache.last`` itself and calls :meth:`get` only when not
    (``last`` is None until the first :meth:`get`; a call less per record)."""

    def __init__(self) -> None:
        self.last: Schema | None = None
        self.last_built: T = cast(T, None)
        self._by_value: dict[Schema, T] = {}

    def get(self, schema: Schema, build: Callable[[Schema], T]) -> T:
        if schema is self.last:
            return self.last_built
        built = self._by_value.get(schema)
        if built is None:
            built = build(schema)
            if len(self._by_value) >= CACHE_SIZE:
                self._by_value.pop(next(iter(self._by_value)))
            self._by_value[schema] = built
        self.last, self.last_built = schema, built
        return built


def class_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_map(value: Any, purpose: str) -> Mapping[str, Any]:
    """``value`` if it is a Mapping, else Connect's DataException message."""
    if type(value) is dict:  # the common case, much faster than the ABC check
        return value
    if not isinstance(value, Mapping):
        raise DataError(
            f"Only Map objects supported in absence of schema for [{purpose}], "
            f"found: {class_name(value)}"
        )
    return value


def require_struct(value: Any, purpose: str) -> Struct:
    """``value`` if it is a Struct, else Connect's DataException message."""
    if not isinstance(value, Struct):
        raise DataError(
            f"Only Struct objects supported for [{purpose}], found: {class_name(value)}"
        )
    return value


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataError(f"Schema required for [{purpose}]")
    return schema


def field_value(struct: Struct, name: str | Field, with_default: bool) -> Any:
    """The field's value; with ``with_default`` its schema's default where it is None
    (Connect's ``replace.null.with.default``)."""
    return struct.get(name) if with_default else struct.get_without_default(name)


def struct_of(schema: Schema, values: list[Any]) -> Struct:
    """A Struct of ``schema`` holding ``values`` in field order, without checking them:
    for values taken from a valid Struct whose field schemas are the same (checking each
    again would cost more than the transform)."""
    return Struct.unchecked(schema, values)


Defaults = tuple[tuple[int, Any], ...]
"""(index, default) of each field of a schema that has a default (:func:`field_defaults`)."""


def struct_values(struct: Struct, with_default: bool) -> list[Any]:
    """Every field's value in order (with ``with_default``, a None field's default)."""
    return values_with(struct, field_defaults(struct.schema) if with_default else ())


def values_with(struct: Struct, defaults: Defaults) -> list[Any]:
    """Every field's value in order, a None field taking its default from ``defaults``
    (:func:`field_defaults` of the struct's schema, kept by a transform per schema; ()
    for none)."""
    values = struct._values.copy()
    for index, default in defaults:
        if values[index] is None:
            values[index] = default
    return values


def struct_extended(schema: Schema, struct: Struct, defaults: Defaults, added: list[Any]) -> Struct:
    """A Struct of ``schema`` holding ``struct``'s values (a None field taking its
    default from ``defaults``) followed by ``added``: :func:`values_with` and
    :func:`struct_of` in one call, for a transform that appends fields per record."""
    values = struct._values + added
    if defaults:
        for index, default in defaults:
            if values[index] is None:
                values[index] = default
    extended: Struct = _new(Struct)
    extended.schema = schema
    extended._values = values
    return extended


def struct_picked(
    schema: Schema, struct: Struct, positions: list[int], with_default: bool
) -> Struct:
    """A Struct of ``schema`` holding the values of ``struct``'s fields at ``positions``:
    :func:`values_at` and :func:`struct_of` in one call, for a transform that builds
    one per record."""
    if len(positions) == 1:  # the common case: one call, no loop
        value = struct._values[positions[0]]
        if value is None and with_default:
            value = struct.schema.fields[positions[0]].schema.default
        picked: Struct = _new(Struct)
        picked.schema = schema
        picked._values = [value]
        return picked
    return struct_of(schema, values_at(struct, positions, with_default))


def values_at(struct: Struct, positions: list[int], with_default: bool) -> list[Any]:
    """The values of the fields at ``positions`` (with ``with_default``, a None field's
    default)."""
    values = struct._values
    # one field (the common case) without a comprehension: twice as fast
    picked = [values[positions[0]]] if len(positions) == 1 else [values[i] for i in positions]
    if with_default and None in picked:
        fields = struct.schema.fields
        picked = [
            fields[i].schema.default if v is None else v
            for i, v in zip(positions, picked, strict=True)
        ]
    return picked


_new = object.__new__

_DEFAULTS: dict[int, tuple[Schema, Defaults]] = {}


def field_defaults(schema: Schema) -> Defaults:
    """(index, default) of each field with a default; remembered per schema object."""
    known = _DEFAULTS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    found = tuple(
        (f.index, f.schema.default) for f in schema.fields if f.schema.default is not None
    )
    if len(_DEFAULTS) >= 256:
        _DEFAULTS.clear()
    _DEFAULTS[id(schema)] = (schema, found)
    return found
