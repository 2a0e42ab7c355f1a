"""Worker settings from environment variables, the way Confluent's Kafka Connect images
take theirs (``CONNECT_BOOTSTRAP_SERVERS``): ``EOS_BOOTSTRAP_SERVERS=kafka:9092`` is
``bootstrap.servers=kafka:9092``.

The name after ``EOS_`` is lower-cased and its underscores become: ``_`` a ``.``, ``__``
an ``_``, ``___`` a ``-`` (``EOS_CONFIG_PROVIDERS_FILE_CLASS`` is
``config.providers.file.class``; ``EOS_SPARK_SQL_SESSION_TIME__ZONE`` would be
``spark.sql.session.time_zone``). A setting whose name has upper-case letters cannot be
written this way: put it in the worker file. Set in both, the environment wins, so one
file can serve several workers that differ in a variable or two.

The variables the ``eos`` command reads for itself (:data:`NOT_SETTINGS`) are never
settings, nor are those Kubernetes puts in every pod for each Service whose name starts
with ``eos`` (``EOS_SERVICE_HOST``, ``EOS_PORT_8083_TCP_ADDR``,
``EOS_HEADLESS_SERVICE_PORT_REST``…, :data:`SERVICE_LINK`): they are skipped without a
word. Values are never logged: ``eos worker`` logs only the names it took.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from eos.errors import ConfigError

PREFIX: Final = "EOS_"
#: Read by the eos command itself (cache, logging, the REST client, the container image).
NOT_SETTINGS: Final = frozenset(
    {
        "EOS_CACHE_DIR",
        "EOS_KAFKA_DEPLOY_DIR",
        "EOS_LOG_LEVEL",
        "EOS_LOG_FORMAT",
        "EOS_URL",
        "EOS_USER",
        "EOS_PASSWORD",
        "EOS_CERT",
        "EOS_KEY",
        "EOS_CACERT",
        "EOS_HEALTH_URL",
    }
)
_UNDERSCORES: Final = {1: ".", 2: "_", 3: "-"}
SERVICE_LINK: Final = re.compile(
    r"EOS(_[A-Z0-9_]+)?_(SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)"
)
"""The variables of Kubernetes' service links (``enableServiceLinks``) for a Service
named ``eos…``: ``<NAME>_SERVICE_HOST``, ``<NAME>_SERVICE_PORT[_<port name>]``,
``<NAME>_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR]``, and ``<NAME>_PORT`` when its
value is a ``tcp://…`` address (:func:`is_service_link`; ``EOS_REST_ADVERTISED_PORT``
with a number stays a setting)."""


def is_service_link(name: str, value: str) -> bool:
    """Whether ``name=value`` is a variable Kubernetes sets for a Service, not a setting."""
    if SERVICE_LINK.fullmatch(name):
        return True
    return name.endswith("_PORT") and re.fullmatch(r"(tcp|udp|sctp)://\S+", value) is not None


def setting_name(variable: str) -> str:
    """``EOS_BOOTSTRAP_SERVERS`` → ``bootstrap.servers``; :class:`ConfigError` for a name
    that maps to no setting name (empty, or a run of more than three underscores)."""
    raw = variable.removeprefix(PREFIX)
    runs = re.findall(r"_+", raw)
    if not raw.strip("_") or raw != raw.strip("_") or any(len(run) > 3 for run in runs):
        raise ConfigError(
            variable,
            None,
            "an EOS_ variable names a setting: letters and digits, with _ for a dot, "
            "__ for an underscore and ___ for a dash (EOS_BOOTSTRAP_SERVERS is "
            "bootstrap.servers)",
        )
    return re.sub(r"_+", lambda run: _UNDERSCORES[len(run[0])], raw.lower())


def settings_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The worker settings ``environ`` holds: every ``EOS_*`` variable but
    :data:`NOT_SETTINGS` and Kubernetes' service links (:data:`SERVICE_LINK`)."""
    return {
        setting_name(name): value
        for name, value in sorted(environ.items())
        if name.startswith(PREFIX) and name not in NOT_SETTINGS and not is_service_link(name, value)
    }
