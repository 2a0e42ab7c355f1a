"""Which converters a connector uses, resolved as Kafka Connect resolves them.

``key.converter``, ``value.converter`` and ``header.converter`` are settings of the worker
and of each connector. A connector that names a converter uses it with its own
``<which>.converter.*`` settings only; one that names none uses the worker's converter with
the worker's settings, whole (a connector's ``value.converter.*`` settings without a
``value.converter`` are ignored then, with a warning, as Connect ignores them). Where
neither names one, the default converter takes the worker's settings overlaid by the
connector's. :func:`converters_in_force` applies that rule once; the runtime's validation,
the task and the REST answers all read its result.

The converter classes themselves are :mod:`eos.converters`' (this package never imports
them); names are only checked for shape here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from eos.config.definition import Definition, Importance, Type
from eos.errors import ConfigError

ConverterKind = Literal["key", "value", "header"]
CONVERTER_KINDS: Final[tuple[ConverterKind, ...]] = ("key", "value", "header")
CONVERTER_PREFIXES: Final = tuple(f"{which}.converter." for which in CONVERTER_KINDS)
"""Prefixes of each converter's own settings (``value.converter.schema.registry.url``)."""

CONVERTER_ALIASES: Final = ("json", "string", "bytes")
SIMPLE_HEADER_CONVERTER: Final = "org.apache.kafka.connect.storage.SimpleHeaderConverter"

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"
_CLASS_PATH = re.compile(rf"{_DOTTED}:{_DOTTED}|{_IDENT}(?:\.{_IDENT})+")


class ConverterSetting(str):
    """A converter's name as ``<which>.converter`` gives it, carrying its own settings
    (the ``<which>.converter.*`` properties without the prefix, as Connect passes them to
    ``configure``) and whether it converts keys."""

    props: Mapping[str, str]
    is_key: bool

    def __new__(cls, name: str, props: Mapping[str, str], is_key: bool) -> ConverterSetting:
        setting = super().__new__(cls, name)
        setting.props, setting.is_key = dict(props), is_key
        return setting


class ConverterName:
    """``json``, ``string``, ``bytes``, or a class path ``module:Class`` / ``module.Class``."""

    allowed = (
        "json, string, bytes, or a class name such as "
        "io.confluent.connect.avro.AvroConverter or my.module:MyConverter"
    )

    def __call__(self, key: str, value: Any) -> None:
        if value is None or value.lower() in CONVERTER_ALIASES:
            return
        if _CLASS_PATH.fullmatch(value) is None:
            raise ConfigError(key, value, f"must be {self.allowed}")


def converter_definition(which: ConverterKind, *, worker: bool) -> Definition:
    """The ``<which>.converter`` setting, as the worker or a connector defines it."""
    if which == "header":
        doc = (
            "How header values a connector gives as Connect values (not bytes) become "
            "bytes: Connect's SimpleHeaderConverter (their text), StringConverter, "
            "ByteArrayConverter, JsonConverter, a number converter, or a class path; its "
            "settings are the header.converter.* properties."
        )
        default = SIMPLE_HEADER_CONVERTER
    else:
        doc = (
            f"How record {which}s become bytes: json, string, bytes, Kafka Connect's or "
            "Confluent's converter class name, or a converter class path (module:Class); "
            f"its settings are the {which}.converter.* properties."
        )
        default = "json"
    if worker:
        doc += (
            " Every connector that names no converter of its own uses this one, with "
            "these settings."
        )
    else:
        doc += (
            f" Unset: the worker's {which}.converter with the worker's settings (when the "
            f"worker names one, the connector's own {which}.converter.* settings do not "
            "apply)."
        )
    group = "converters" if worker else "common"
    return (
        f"{which}.converter",
        Type.STRING,
        default,
        ConverterName(),
        Importance.MEDIUM,
        doc,
        group,
    )


def converters_in_force(props: Mapping[str, str], worker: Mapping[str, str]) -> dict[str, str]:
    """``props`` (a connector's settings) with the converters in force: for each kind the
    connector does not name, the worker's converter and its settings replace the
    connector's settings of that kind (Connect's rule); where neither names one, the
    worker's settings lie under the connector's."""
    result = dict(props)
    for which in CONVERTER_KINDS:
        name = f"{which}.converter"
        prefix = name + "."
        if name in props:
            continue
        inherited = {k: v for k, v in worker.items() if k == name or k.startswith(prefix)}
        if name in worker:
            for key in ignored_converter_settings(props, worker, which):
                del result[key]
            result.update(inherited)
        else:
            result = {**inherited, **result}
    return result


def ignored_converter_settings(
    props: Mapping[str, str], worker: Mapping[str, str], which: ConverterKind
) -> list[str]:
    """A connector's ``<which>.converter.*`` settings that do not apply: it names no
    ``<which>.converter`` and the worker does (its settings come whole with it)."""
    name = f"{which}.converter"
    if name in props or name not in worker:
        return []
    return sorted(k for k in props if k.startswith(name + "."))


def converter_setting(
    props: Mapping[str, str], which: ConverterKind, name: str
) -> ConverterSetting:
    """The ``<which>.converter`` named ``name`` (an alias lower-cased) with its settings
    from ``props`` (settings already :func:`in force <converters_in_force>`)."""
    name = name.lower() if name.lower() in CONVERTER_ALIASES else name
    prefix = f"{which}.converter."
    own = {k.removeprefix(prefix): v for k, v in props.items() if k.startswith(prefix)}
    return ConverterSetting(name, own, which == "key")


def connector_view(props: Mapping[str, str], worker: Mapping[str, str]) -> dict[str, str]:
    """A connector's settings as the connector itself is started with them: its own and
    the converters in force, so that a connector that writes a converter's format itself
    (SparkSource with ``json`` converters) sees the worker's converter; the worker's
    secrets (``value.converter.basic.auth.user.info`` …) left out, since a connector may
    copy its settings into task configs, which the config topic keeps."""
    from eos.kafka.client_security import is_secret

    return {
        key: value
        for key, value in converters_in_force(props, worker).items()
        if key in props or not is_secret(key)
    }
