"""The converter interface (Connect's ``Converter``, from Connect data to bytes) and what
every built-in converter shares.

Call order: ``configure(props, is_key)`` once, with the connector's ``key.converter.*`` or
``value.converter.*`` settings without the prefix; ``close()`` when the task is done; in
between, per record,
``from_connect_data(topic, schema, value, headers)`` → the bytes to write, or None for a
Kafka null (a STRUCT value may also be a plain ``dict``: it is read as a Struct); or,
per block of rows sharing a schema, ``from_connect_block(topic, schema, column)`` → one
``bytes | None`` per row (a ``pyarrow`` array or a sequence of values in;
what :class:`~eos.api.RecordBlock` calls ``encoded=False``). ``convert(topic, value)`` is
the schemaless shortcut the task loop used before schemas existed: a :class:`Struct`
value brings its own schema, any other value is converted without one.

Errors: :class:`~eos.errors.DataError` (a :class:`~eos.errors.ConversionError`) when a
value does not fit its schema or the format cannot carry it; the registry converters add
:class:`~eos.errors.SchemaRegistryError` (the registry refused the schema) and
:class:`~eos.errors.SchemaRegistryUnavailable` (retriable: the registry cannot be reached).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from eos.api.schema import Schema, SchemaType, Struct, column_values, to_connect

Headers = Sequence[tuple[str, bytes]]


@runtime_checkable
class Converter(Protocol):
    """What the task loop needs of a converter (the bare-value path)."""

    def convert(self, topic: str, value: Any) -> bytes | None: ...


class SchemaConverter:
    """A converter that knows Connect schemas; subclasses implement :meth:`from_connect_data`
    (and may make :meth:`from_connect_block` faster than one call per row)."""

    is_key: bool = False
    SETTINGS: ClassVar[frozenset[str]] = frozenset()
    """The settings it reads (:mod:`eos.converters.settings` reports any other)."""
    converts_headers: ClassVar[bool] = True
    """Whether it may be a ``header.converter`` (Connect's ``HeaderConverter``): a header
    value is converted as a value of its schema is (:meth:`from_connect_header`)."""

    def configure(self, props: Mapping[str, str], is_key: bool) -> None:
        """Take the converter's settings (``key.converter.*``/``value.converter.*`` without
        the prefix); raise :class:`~eos.errors.ConfigError` naming a bad one."""
        self.is_key = is_key

    def from_connect_data(
        self, topic: str, schema: Schema | None, value: Any, headers: Headers | None = None
    ) -> bytes | None:
        raise NotImplementedError

    def from_connect_block(
        self, topic: str, schema: Schema | None, column: Any
    ) -> list[bytes | None]:
        """Every row of a block's column (values of ``schema``), one call per row here."""
        convert = self.from_connect_data
        return [convert(topic, schema, value) for value in column_values(schema, column)]

    def from_connect_header(
        self, topic: str, header: str, schema: Schema | None, value: Any
    ) -> bytes | None:
        """A header's value (``header.converter``), as Connect's converters that are also
        header converters write it: as a value of ``schema``."""
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header: str, data: bytes | None) -> tuple[Any, Any]:
        """A header's bytes read back: (schema or None, value)."""
        if data is None:
            return None, None
        reader = getattr(self, "reader", None)
        if not callable(reader):
            raise NotImplementedError(f"{type(self).__name__} cannot read headers back")
        return None, reader()(data)

    def close(self) -> None:
        """Release what the converter holds (a registry converter's HTTP connections)."""

    def convert(self, topic: str, value: Any) -> bytes | None:
        """A record without a declared schema: a Struct's own schema, else none."""
        schema = value.schema if isinstance(value, Struct) else None
        return self.from_connect_data(topic, schema, value)


def as_struct(schema: Schema, value: Any) -> Any:
    """A STRUCT value given as a plain ``dict`` (what many connectors hand over) as a
    :class:`Struct` of ``schema``; anything else as it is."""
    if schema.type is SchemaType.STRUCT and isinstance(value, Mapping):
        return to_connect(schema, value)
    return value


def flag(props: Mapping[str, str], key: str, default: bool) -> bool:
    """A boolean converter setting (``true``/``false``, any case)."""
    from eos.errors import ConfigError

    raw = props.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(key, raw, "must be true or false")
    return text == "true"
