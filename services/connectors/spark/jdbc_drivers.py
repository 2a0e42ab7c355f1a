"""JDBC drivers in the worker's Spark session (``spark.jdbc.drivers``), and which one a
``connection.url`` needs.

A driver is a jar on the Spark JVM, so it is a **worker** setting, like the lakehouse
formats: ``spark.jdbc.drivers=postgresql,mariadb`` adds the drivers' Maven coordinates
to ``spark.jars.packages`` (Spark's own resolver fetches them from Maven Central into
``spark.jars.ivy``, default ``$EOS_CACHE_DIR/ivy``). An entry is a name of
:data:`DRIVERS` (``postgresql``), a name with a version (``postgresql:42.7.10``) or any
Maven coordinate (``com.example:driver:1.0``). In client mode Spark ships the jars to
the executors itself.

:func:`driver_class` names the class for a URL (``jdbc:postgresql:`` →
``org.postgresql.Driver``): Spark must be told it, since ``DriverManager`` does not
see jars added at run time. :func:`redact_url` removes a password from a URL before
it goes into a message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from services.connectors.spark.lakehouse import ivy_dir

DRIVERS_SETTING = "spark.jdbc.drivers"


@dataclass(frozen=True)
class Driver:
    artifact: str  # group:artifact
    version: str
    driver_class: str
    schemes: tuple[str, ...]  # the URL prefixes it serves

    def coordinates(self, version: str = "") -> str:
        return f"{self.artifact}:{version or self.version}"


DRIVERS = {
    "postgresql": Driver(
        "org.postgresql:postgresql", "42.7.14", "org.postgresql.Driver", ("jdbc:postgresql:",)
    ),
    "mariadb": Driver(
        "org.mariadb.jdbc:mariadb-java-client",
        "3.5.11",
        "org.mariadb.jdbc.Driver",
        ("jdbc:mariadb:",),
    ),
    "mysql": Driver(
        "com.mysql:mysql-connector-j", "9.7.0", "com.mysql.cj.jdbc.Driver", ("jdbc:mysql:",)
    ),
    "sqlserver": Driver(
        "com.microsoft.sqlserver:mssql-jdbc",
        "13.6.2.jre11",
        "com.microsoft.sqlserver.jdbc.SQLServerDriver",
        ("jdbc:sqlserver:",),
    ),
}
"""Drivers known by name: their Maven coordinates (versions checked against Maven
Central), their class and the URLs they serve."""


def packages(value: str) -> list[str]:
    """Maven coordinates for a ``spark.jdbc.drivers`` value (ValueError for an unknown name)."""
    found = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        name, _, version = entry.partition(":")
        if name.lower() in DRIVERS and ":" not in version:
            found.append(DRIVERS[name.lower()].coordinates(version))
        elif entry.count(":") == 2:
            found.append(entry)
        else:
            raise ValueError(
                f"worker setting {DRIVERS_SETTING}={value!r}: unknown driver {entry!r} "
                f"(known: {', '.join(DRIVERS)}; or Maven coordinates group:artifact:version)"
            )
    return found


def driver_settings(conf: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``conf`` (the session's ``spark.*`` settings) with the drivers of
    ``spark.jdbc.drivers`` added to ``spark.jars.packages``, and that key removed."""
    out = {k: v for k, v in conf.items() if k != DRIVERS_SETTING}
    wanted = packages(conf.get(DRIVERS_SETTING, ""))
    if not wanted:
        return out
    have = [p.strip() for p in out.get("spark.jars.packages", "").split(",") if p.strip()]
    out["spark.jars.packages"] = ",".join([*have, *(p for p in wanted if p not in have)])
    out.setdefault("spark.jars.ivy", ivy_dir(environ))
    return out


def driver_for(url: str) -> tuple[str, Driver] | None:
    """The known driver (name and description) that serves ``url``, if any."""
    for name, driver in DRIVERS.items():
        if url.lower().startswith(driver.schemes):
            return name, driver
    return None


def driver_class(url: str) -> str | None:
    known = driver_for(url)
    return None if known is None else known[1].driver_class


def driver_not_loaded(error: str) -> bool:
    """Whether a Spark JDBC error's text says the driver is not on the JVM."""
    return "No suitable driver" in error or "ClassNotFoundException" in error


def missing_driver(url: str) -> str:
    """What to do when no driver for ``url`` is on the worker's Spark."""
    known = driver_for(url)
    if known is None:
        return (
            f"no JDBC driver for {redact_url(url)} is loaded: add its Maven coordinates to the "
            f"worker setting {DRIVERS_SETTING} (group:artifact:version) and set "
            "`options.driver` to its class, then restart the worker"
        )
    return (
        f"the JDBC driver for {redact_url(url)} is not loaded: add {known[0]} to the worker "
        f"setting {DRIVERS_SETTING} (e.g. {DRIVERS_SETTING}={known[0]}) and restart the worker"
    )


def spark_url(url: str) -> str:
    """The URL Spark is given: a ``jdbc:mariadb:`` URL becomes ``jdbc:mysql:`` with the
    MariaDB driver's ``permitMysqlScheme``, since Spark picks its SQL dialect by the URL's
    scheme and has one for ``jdbc:mysql:`` only (the generic dialect quotes names with
    ``"``, which MariaDB reads as strings); the MariaDB driver still serves it."""
    if not url.lower().startswith("jdbc:mariadb:"):
        return url
    rewritten = "jdbc:mysql:" + url[len("jdbc:mariadb:") :]
    if "permitmysqlscheme" in rewritten.lower():
        return rewritten
    return rewritten + ("&" if "?" in rewritten else "?") + "permitMysqlScheme"


_SECRET_PARAM = re.compile(r"(?i)(password|pwd|secret|token)=[^;&]*")
_USERINFO = re.compile(r"(//[^/@:;?]*):[^/@;?]*@")


def redact_url(url: str) -> str:
    """``url`` without secrets: ``password=...`` parameters and ``user:password@``."""
    return _USERINFO.sub(r"\1:***@", _SECRET_PARAM.sub(r"\1=***", url))
