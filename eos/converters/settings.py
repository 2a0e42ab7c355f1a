"""Every converter setting honoured, refused by name, or reported as unknown.

Each converter class lists the settings it reads (``SETTINGS``); Connect passes
``converter.type`` to all of them. Confluent's serializer and converter settings that eos
does not implement are refused by name, with what eos does instead, unless their value is
what eos does anyway (``connect.meta.data=true`` is accepted, ``false`` refused). Any other
key is unknown: it is reported (a warning naming it, as Confluent's converters log "was
supplied but isn't a known config") and ignored. A converter of one's own without a
``SETTINGS`` attribute is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class Unsupported:
    """A Confluent setting eos does not implement: the values it accepts because they are
    what eos does (lower case; empty: none), and what to do instead."""

    accepted: tuple[str, ...]
    instead: str


_NOT_CACHED = "eos caches per task and never expires a cached schema"
UNSUPPORTED: Final[Mapping[str, Unsupported]] = {
    "connect.meta.data": Unsupported(
        ("true",), "eos always writes Connect's metadata (connect.name, connect.version …)"
    ),
    "enhanced.avro.schema.support": Unsupported(
        ("false",), "eos writes Connect's schemas without the enhanced Avro parameters"
    ),
    "scrub.invalid.names": Unsupported(
        ("false",), "give the schema and its fields names that are valid in the format"
    ),
    "use.schema.id": Unsupported(
        ("-1",), "register the schema (auto.register.schemas) or use use.latest.version"
    ),
    "use.latest.with.metadata": Unsupported((), "use use.latest.version"),
    "context.name.strategy": Unsupported((), "put the context in schema.registry.url"),
    "latest.cache.ttl.sec": Unsupported(("-1",), _NOT_CACHED),
    "proxy.host": Unsupported((), "eos reaches the registry directly"),
    "proxy.port": Unsupported((), "eos reaches the registry directly"),
    "rule.executors": Unsupported((), "eos runs no data-contract rules"),
    "rule.actions": Unsupported((), "eos runs no data-contract rules"),
    "schema.reflection": Unsupported(("false",), "Connect data has its own schemas"),
    "avro.reflection.allow.null": Unsupported(("false",), "Connect data has its own schemas"),
    "generalized.sum.type.support": Unsupported(("false",), "eos writes unions as Connect's"),
    "int.for.enums": Unsupported(("false",), "eos writes enums as Connect's strings"),
    "wrapper.for.nullables": Unsupported(("false",), "use optional.for.nullables"),
    "wrapper.for.raw.primitives": Unsupported(("true",), "eos writes Connect's wrappers"),
    "generate.index.for.unions": Unsupported(("true",), "eos names unions as Connect does"),
    "json.fail.invalid.schema": Unsupported(
        ("false",), "the schema eos registers is derived from the data, which fits it"
    ),
    "json.fail.unknown.properties": Unsupported(("true",), "eos writes only known fields"),
}
"""Confluent's settings eos refuses (unless given the value eos acts as)."""

COMMON: Final = frozenset({"converter.type"})
"""Connect passes ``converter.type`` (key, value or header) to every converter."""


def refused(name: str, value: Any) -> str | None:
    """Why ``name`` (a converter's own setting, without the prefix) is refused at
    ``value``, or None if it is not."""
    found = UNSUPPORTED.get(name)
    if found is None or str(value).strip().lower() in found.accepted:
        return None
    allowed = f" (only {found.accepted[0]} is)" if found.accepted else ""
    return f"eos does not support {name}{allowed}: {found.instead}"


def unknown(converter: type, props: Mapping[str, str]) -> list[str]:
    """The settings in ``props`` that ``converter`` neither reads nor refuses."""
    known = getattr(converter, "SETTINGS", None)
    if known is None:
        return []
    return sorted(k for k in props if k not in known and k not in COMMON and k not in UNSUPPORTED)
