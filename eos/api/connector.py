"""The connector side of the API: :class:`SourceConnector` and what it can ask of the framework."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from eos.config.definition import ConfigDef

if TYPE_CHECKING:
    from eos.api.task import SourceTask


class ExactlyOnceSupport(enum.Enum):
    """Whether a connector can deliver exactly once with a given configuration.

    SUPPORTED means: every source partition goes to at most one task at a time,
    and tasks resume solely from the offsets they gave the framework.
    """

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"


class ConnectorTransactionBoundaries(enum.Enum):
    """Whether a connector's tasks can define transaction boundaries
    (``transaction.boundary=connector``) with a given configuration."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"


class ConnectorContext(Protocol):
    """What a running connector may ask of the framework."""

    def request_task_reconfiguration(self) -> None:
        """Ask the framework to call :meth:`SourceConnector.task_configs` again and,
        if the result differs, start a new generation of tasks (after fencing the old)."""

    def raise_error(self, error: BaseException) -> None:
        """Fail the connector with ``error`` (its status becomes FAILED)."""


class SourceConnector(ABC):
    """A source connector: splits the work into task configurations.

    Lifecycle: the framework sets :attr:`context`, awaits :meth:`start`, calls
    :meth:`task_configs` whenever it (re)creates tasks, and awaits :meth:`stop`.
    """

    context: ConnectorContext

    worker_settings: ClassVar[tuple[str, ...]] = ()
    """Prefixes of *worker* settings this plugin reads, e.g. ``("myplugin.",)`` for a
    ``myplugin.endpoint`` in the worker file: the worker does not warn about them as
    unknown, and hands them to tasks in ``context.resources.settings``. Declare it on
    the class (the worker reads it from every installed plugin at start-up, without
    creating an instance), and keep the module that defines the class light to import."""

    def version(self) -> str:
        return "0.0.0"

    def config_def(self) -> ConfigDef:
        """The connector's own settings (validated on create, update and validate)."""
        return ConfigDef()

    @abstractmethod
    async def start(self, config: Mapping[str, str]) -> None:
        """Start with the connector's configuration (all settings, as strings)."""

    @abstractmethod
    def task_class(self) -> type[SourceTask]:
        """The task class that runs each task configuration."""

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configurations; each source partition in one only."""

    async def stop(self) -> None:
        """Release what :meth:`start` acquired."""

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[str, dict[str, Any] | None]
    ) -> None:
        """Called before a user alters (``PATCH /connectors/{name}/offsets``) or resets
        (``DELETE``) the connector's offsets, while it is stopped. ``offsets`` maps each
        source partition, as canonical JSON text, to its new offset (None: reset). Raise
        (e.g. ``ValueError``) to refuse: the message is the user's answer. The default
        accepts everything."""

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """SUPPORTED, UNSUPPORTED, or None when it cannot be determined (the default)."""
        return None

    def can_define_transaction_boundaries(
        self, config: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        """SUPPORTED if tasks use :class:`~eos.api.TransactionContext` with this config."""
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def encodes_rows(self, config: Mapping[str, str]) -> bool:
        """True if, with this configuration, the tasks hand keys and values over already
        encoded (``RecordBlock`` or ``SourceRecord(encoded=True)`` of bytes): validation
        then refuses transforms and predicates that read keys or values (they could
        not run on bytes). The default, False: the converters encode."""
        return False

    def output_topics(self, config: Mapping[str, str]) -> list[str] | None:
        """The topics this configuration writes to, or None if the settings do not tell
        (``eos acls plan`` grants the task producers Write on them). The default: the
        ``topic`` setting, if there is one."""
        topic = str(config.get("topic", "")).strip()
        return [topic] if topic else None

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Problems per setting; by default those found by :meth:`config_def`."""
        return self.config_def().validate(config)
