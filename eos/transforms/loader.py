"""Finding transform and predicate classes for ``transforms.<alias>.type`` and
``predicates.<alias>.type``: the bundled ones by Kafka Connect's class name as it is
(``org.apache.kafka.connect.transforms.InsertField$Value``) or short
(``InsertField$Value``), a user's by the name of its entry point in the
``eos.transforms`` / ``eos.predicates`` group, or by class path (``package.module:Class``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Final

from eos.api.transforms import Predicate, Transformation
from eos.errors import PluginError
from eos.runtime.plugins import load_class

CONNECT_TRANSFORMS: Final = "org.apache.kafka.connect.transforms."
CONNECT_PREDICATES: Final = "org.apache.kafka.connect.transforms.predicates."
TRANSFORMS_GROUP: Final = "eos.transforms"
PREDICATES_GROUP: Final = "eos.predicates"


def _variants(name: str, module: str, *, keyed: bool = True) -> dict[str, str]:
    target = f"eos.transforms.{module}:{name}"
    if not keyed:
        return {name: target}
    return {f"{name}$Key": f"{target}Key", f"{name}$Value": f"{target}Value"}


BUNDLED_TRANSFORMS: Final[dict[str, str]] = {
    **_variants("Cast", "cast"),
    **_variants("DropHeaders", "headers", keyed=False),
    **_variants("ExtractField", "nesting"),
    **_variants("Filter", "predicates", keyed=False),
    **_variants("Flatten", "flatten"),
    **_variants("HeaderFrom", "headers"),
    **_variants("HoistField", "nesting"),
    **_variants("InsertField", "insert_field"),
    **_variants("InsertHeader", "headers", keyed=False),
    **_variants("MaskField", "fields"),
    **_variants("RegexRouter", "routers", keyed=False),
    **_variants("ReplaceField", "fields"),
    **_variants("SetSchemaMetadata", "schema_metadata"),
    **_variants("TimestampConverter", "timestamps"),
    **_variants("TimestampRouter", "routers", keyed=False),
    **_variants("ValueToKey", "nesting", keyed=False),
}
"""Connect's short name → class path of every bundled transform."""

OTHER_BUNDLED_TRANSFORMS: Final[dict[str, str]] = {
    "io.debezium.transforms.ExtractNewRecordState":
        "eos.transforms.new_record_state:ExtractNewRecordState",
}  # fmt: skip
"""Full class name → class path of the bundled transforms that are not Connect's (by
their own project's names; also found by their short name)."""

BUNDLED_PREDICATES: Final[dict[str, str]] = {
    name: f"eos.transforms.predicates:{name}"
    for name in ("HasHeaderKey", "RecordIsTombstone", "TopicNameMatches")
}


@dataclass(frozen=True)
class _Kind:
    what: str
    base: type
    connect_prefix: str
    bundled: dict[str, str]
    group: str
    others: dict[str, str]


_TRANSFORM = _Kind(
    "transformation", Transformation, CONNECT_TRANSFORMS, BUNDLED_TRANSFORMS, TRANSFORMS_GROUP,
    OTHER_BUNDLED_TRANSFORMS,
)  # fmt: skip
_PREDICATE = _Kind(
    "predicate", Predicate, CONNECT_PREDICATES, BUNDLED_PREDICATES, PREDICATES_GROUP, {}
)


def transform_class(name: str) -> type[Transformation]:
    """The Transformation class ``transforms.<alias>.type`` names; PluginError says why
    there is none and what would do."""
    found: type[Transformation] = _find(_TRANSFORM, name)
    return found


def predicate_class(name: str) -> type[Predicate]:
    """The Predicate class ``predicates.<alias>.type`` names."""
    found: type[Predicate] = _find(_PREDICATE, name)
    return found


def installed(kind: str) -> list[tuple[str, str | None]]:
    """(class name, alias) of every ``kind`` ("transformation" or "predicate") plugin: the
    bundled ones under Connect's class names, then the entry points by class path."""
    k = _TRANSFORM if kind == "transformation" else _PREDICATE
    listed: list[tuple[str, str | None]] = [(k.connect_prefix + short, None) for short in k.bundled]
    listed += [(name, None) for name in k.others]
    listed += [(path.replace(":", "."), alias) for alias, path in _entry_points(k).items()]
    return sorted(listed)


def _entry_points(kind: _Kind) -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=kind.group)}


def _find(kind: _Kind, name: str) -> type:
    short = name.removeprefix(kind.connect_prefix)
    shorts = {full.rsplit(".", 1)[-1]: path for full, path in kind.others.items()}
    others = {**kind.others, **shorts}
    target = kind.bundled.get(short) or others.get(name) or _entry_points(kind).get(name)
    if target is None and name.startswith("org.apache.kafka.connect."):
        raise PluginError(f"Kafka Connect's {name} is not a {kind.what} eos has; {_known(kind)}")
    if target is None and ("." in name or ":" in name):
        target = name
    if target is None:
        raise PluginError(f"unknown {kind.what} {name!r}; {_known(kind)}")
    try:
        cls = load_class(target)
    except PluginError:
        raise
    except Exception as exc:  # importing a module can fail in any way
        raise PluginError(f"cannot load {name!r}: {exc!r}; {_known(kind)}") from exc
    if not issubclass(cls, kind.base) or inspect.isabstract(cls):
        raise PluginError(
            f"{name!r} is not a concrete eos.api.{kind.base.__name__} subclass; {_known(kind)}"
        )
    return cls


def _known(kind: _Kind) -> str:
    names = sorted(kind.bundled)
    plugins = sorted(_entry_points(kind))
    return (
        f"use one of {', '.join(names)} (or Connect's full name, e.g. "
        f"{kind.connect_prefix}{names[-1]})"
        + (f", an {kind.group} entry point ({', '.join(plugins)})" if plugins else "")
        + f", or a class path (package.module:Class) of an eos.api.{kind.base.__name__}"
    )
