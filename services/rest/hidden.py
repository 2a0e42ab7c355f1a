"""Password settings in REST answers: ``[hidden]`` (Kafka Connect's convention).

A setting is a password when the connector's (or the framework's) definition gives it the
PASSWORD type, or when it is a client secret (``producer.override.sasl.jaas.config``,
``…ssl.key.password`` …). Every answer that shows a connector's or a task's settings hides
them, validation answers included. A ``[hidden]`` sent back in a PUT or PATCH (a config
fetched, edited and put back) keeps the stored value.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from eos.config.connector import CONNECTOR_CONFIG
from eos.config.definition import Type
from eos.errors import PluginError
from eos.kafka.client_security import HIDDEN, is_secret
from eos.runtime.plugins import connector_class


@lru_cache(maxsize=256)
def _defined_passwords(connector: str) -> frozenset[str]:
    try:
        own = connector_class(connector)().config_def()
    except (PluginError, Exception):
        own = None
    keys = {**CONNECTOR_CONFIG.keys, **(own.keys if own else {})}
    return frozenset(name for name, key in keys.items() if key.type is Type.PASSWORD)


def is_password(key: str, connector: str) -> bool:
    """Whether ``key`` of a config with ``connector.class=connector`` is a password."""
    return key in _defined_passwords(connector) or is_secret(key)


def hidden(props: Mapping[str, str], connector: str | None = None) -> dict[str, str]:
    """``props`` with password values replaced by ``[hidden]``."""
    cls = connector or props.get("connector.class", "")
    return {k: HIDDEN if is_password(k, cls) else v for k, v in props.items()}


def kept(new: Mapping[str, str], stored: Mapping[str, str] | None) -> dict[str, str]:
    """``new`` with each ``[hidden]`` password taken from ``stored``."""
    if not stored:
        return dict(new)
    cls = new.get("connector.class", stored.get("connector.class", ""))
    return {
        k: stored[k] if v == HIDDEN and k in stored and is_password(k, cls) else v
        for k, v in new.items()
    }
