"""Settings of automatic restarts (docs/operations.md, "Tasks that heal themselves"):
the worker's defaults (:data:`AUTO_RESTART_WORKER_CONFIG`) and a connector's own
overrides of them (:data:`AUTO_RESTART_CONNECTOR_CONFIG`), as Strimzi's
``autoRestart`` is set per connector while an operator sets the cluster's policy.

The schedule is Strimzi's: the first restart at once, the n-th after
(n-1)·(n-1) + (n-1) backoff units (2, 6, 12, 20, … minutes with the default unit),
each wait at most ``auto.restart.backoff.max.ms``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from eos.config.definition import (
    Importance,
    Range,
    Type,
    config_class,
    definition_of,
    fill,
    setting,
)
from eos.errors import ConfigError

ENABLED: Final = "auto.restart.enabled"
MAX_ATTEMPTS: Final = "auto.restart.max.attempts"
BACKOFF_MAX: Final = "auto.restart.backoff.max.ms"
BACKOFF_UNIT: Final = "auto.restart.backoff.unit.ms"
_GROUP = "auto restart"


class Attempts:
    """-1 (no limit) or at least 0."""

    allowed = "-1 (no limit) or a number of restarts, at least 0"

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and value != -1 and value < 0:
            raise ConfigError(key, value, f"must be {self.allowed}")


def _no_limit(attempts: int | None) -> int | None:
    """-1 (no limit) as None."""
    return None if attempts == -1 else attempts


@config_class
class AutoRestartSettings:
    """The worker's automatic-restart settings (part of the worker's definition)."""

    enabled: bool = setting(
        ENABLED,
        Type.BOOLEAN,
        True,
        None,
        Importance.MEDIUM,
        "Restart failed connectors and tasks on their own, with Strimzi's backoff: at once, "
        "then after 2, 6, 12, 20, 30, 42 and 56 minutes, then every hour. Failures that a "
        "restart cannot heal (a bad setting, a missing ACL) are not restarted. A connector "
        "may set its own.",
        _GROUP,
    )
    max_attempts: int | None = setting(
        MAX_ATTEMPTS,
        Type.INT,
        -1,
        Attempts(),
        Importance.LOW,
        "Automatic restarts of a connector or task in a row before it is left FAILED "
        "(-1: no limit, as Strimzi's default). The count starts again once it has run for "
        "as long as its last wait. A connector may set its own.",
        _GROUP,
        convert=_no_limit,
    )
    backoff_max_ms: int = setting(
        BACKOFF_MAX,
        Type.LONG,
        3_600_000,
        Range(at_least=0),
        Importance.LOW,
        "Longest wait between two automatic restarts (Strimzi: one hour). A connector may "
        "set its own.",
        _GROUP,
    )
    backoff_unit_ms: int = setting(
        BACKOFF_UNIT,
        Type.LONG,
        60_000,
        Range(at_least=1),
        Importance.LOW,
        "The unit of the restart schedule: the n-th restart waits (n-1)·(n-1) + (n-1) of "
        "these (Strimzi: a minute). Tests and demos shorten it.",
        _GROUP,
    )


@config_class
class AutoRestartOverrides:
    """A connector's own automatic-restart settings (None: the worker's)."""

    enabled: bool | None = setting(
        ENABLED,
        Type.BOOLEAN,
        None,
        None,
        Importance.LOW,
        "Restart this connector and its tasks on their own when they fail (default: the "
        "worker's auto.restart.enabled).",
        _GROUP,
    )
    max_attempts: int | None = setting(
        MAX_ATTEMPTS,
        Type.INT,
        None,
        Attempts(),
        Importance.LOW,
        "Automatic restarts in a row before this connector or one of its tasks is left "
        "FAILED (-1: no limit; default: the worker's auto.restart.max.attempts).",
        _GROUP,
    )
    backoff_max_ms: int | None = setting(
        BACKOFF_MAX,
        Type.LONG,
        None,
        Range(at_least=0),
        Importance.LOW,
        "Longest wait between two automatic restarts of this connector or one of its tasks "
        "(default: the worker's auto.restart.backoff.max.ms).",
        _GROUP,
    )


AUTO_RESTART_WORKER_CONFIG: Final = definition_of(AutoRestartSettings)
"""The worker's automatic-restart settings (merged into the worker's definition)."""

AUTO_RESTART_CONNECTOR_CONFIG: Final = definition_of(AutoRestartOverrides)
"""A connector's overrides of the worker's automatic-restart settings (merged into the
connector definition)."""


@dataclass(frozen=True)
class AutoRestartPolicy:
    """When a failed connector or task is restarted on its own."""

    enabled: bool = True
    max_attempts: int | None = None
    """Restarts in a row before giving up; None: no limit."""
    backoff_unit_ms: int = 60_000
    backoff_max_ms: int = 3_600_000

    @classmethod
    def of_worker(cls, props: Mapping[str, Any]) -> AutoRestartPolicy:
        """From the worker's settings (validated with the worker's definition, which
        holds these keys)."""
        worker = fill(AutoRestartSettings, AUTO_RESTART_WORKER_CONFIG.parse(props))
        return cls(
            worker.enabled, worker.max_attempts, worker.backoff_unit_ms, worker.backoff_max_ms
        )

    def for_connector(self, props: Mapping[str, str]) -> AutoRestartPolicy:
        """This (the worker's) policy with a connector's own settings laid over it; a
        setting that does not parse keeps the worker's (validation names it)."""
        try:
            own = fill(AutoRestartOverrides, AUTO_RESTART_CONNECTOR_CONFIG.parse(props))
        except ConfigError:
            return self
        return AutoRestartPolicy(
            enabled=self.enabled if own.enabled is None else own.enabled,
            max_attempts=self.max_attempts
            if own.max_attempts is None
            else _no_limit(own.max_attempts),
            backoff_unit_ms=self.backoff_unit_ms,
            backoff_max_ms=self.backoff_max_ms
            if own.backoff_max_ms is None
            else own.backoff_max_ms,
        )
