"""The one exception tree of eos.

Every error eos raises on purpose derives from :class:`EosError`. Each class
says whether retrying can help (``retriable``) and whether the condition means
that *this instance* has been superseded (``zombie``)::

    EosError
    ├── ConfigError                  bad setting: names the key, the value, what is allowed
    ├── ValidationError              a connector config has problems (all of them, per key)
    ├── PluginError                  connector class cannot be found or loaded
    ├── RetriableError               try again with backoff (broker unavailable, coordinator moving)
    │   ├── ReadToEndTimeout         a log could not be read to its end in time
    │   ├── CoordinatorNotAvailable  a coordinator lookup failed and may succeed later
    │   └── SchemaRegistryUnavailable  the schema registry cannot be reached (names the URL)
    ├── FencedError                  this producer/task/leader is a zombie: stop, never retry
    ├── TaskError                    a task cannot go on; it is FAILED with this message
    │   ├── ConversionError          a record could not be converted or sent
    │   │   ├── DataError            a value does not fit its schema (Connect's DataException)
    │   │   │   └── SchemaBuilderError  a schema cannot be built as asked
    │   │   └── SchemaRegistryError  the schema registry refused a schema (or a request)
    │   ├── TransformError           a transform or predicate failed on a record (names the step)
    │   ├── TransactionTimedOut      the broker aborted a transaction that stayed open too long
    │   ├── TransactionAbortable     the broker asks for an abort (TRANSACTION_ABORTABLE, KIP-1050)
    │   └── TransactionRequestError  the connector asked for an impossible commit/abort
    ├── FencingError                 a fencing round failed (per transactional id details)
    ├── AccessDenied                 the brokers refused an operation: the ACLs that are missing
    ├── TopicError                   an internal topic exists with the wrong layout
    ├── NotFoundError                a connector or task does not exist (REST 404)
    ├── ConflictError                the request raced a change of the cluster (REST 409)
    │   └── NotLeaderError           a write reached a worker that is not the leader
    ├── RequestTooLargeError         another worker refused a body over rest.max.request.bytes (413)
    ├── WorkerStartingError          the worker has not read its config topic yet (REST 503)
    └── DevKafkaError                the local development broker cannot be assembled or run

Rules: a :class:`FencedError` is never retried and a fenced task writes no
status; only :class:`RetriableError` subclasses are retried. A connector or task
that failed with an error whose ``heals`` is False (a bad setting, a missing
plugin, a connector bug that repeats) is not restarted automatically: restarting
cannot help until a person fixes the cause (:mod:`eos.runtime.cluster.coordinator.restart_backoff`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class EosError(Exception):
    """Base class of every error eos raises on purpose."""

    retriable: bool = False
    zombie: bool = False
    heals: bool = True
    """Whether restarting the failed connector or task may help (False: it fails the
    same way until someone changes something)."""


class ConfigError(EosError):
    """A setting has an invalid value; raised by config parsing and validation."""

    heals = False

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid value {value!r} for setting {key!r}: {allowed}")


class ValidationError(EosError):
    """A connector configuration is invalid; ``problems`` maps each setting to its errors."""

    heals = False

    def __init__(self, problems: Mapping[str, list[str]]) -> None:
        self.problems = {k: list(v) for k, v in problems.items() if v}
        count = sum(len(v) for v in self.problems.values())
        listed = "\n".join(m for msgs in self.problems.values() for m in msgs)
        super().__init__(
            f"Connector configuration is invalid and contains the following {count} "
            f"error(s):\n{listed}\nYou can also find the above list of errors at the "
            "endpoint `/connector-plugins/{connectorType}/config/validate`"
        )


class PluginError(EosError):
    """A connector plugin cannot be found by alias, entry point or class path, or
    does not subclass the expected API class."""

    heals = False


class RetriableError(EosError):
    """A transient condition; the caller may retry with backoff."""

    retriable = True


class ReadToEndTimeout(RetriableError):
    """A log was not read up to the end offsets listed when the read began.

    Usually an open transaction on the topic holds the last stable offset back
    (a read_committed reader cannot pass it until it commits, aborts or times
    out), or the broker is unreachable.
    """


class CoordinatorNotAvailable(RetriableError):
    """FindCoordinator failed with a retriable error (coordinator loading or moving)."""


class SchemaRegistryUnavailable(RetriableError):
    """The schema registry at the URL in the message did not answer (connection refused,
    timeout, 5xx); a converter may succeed once it is back."""


class FencedError(EosError):
    """A newer instance holds our transactional id: this instance is a zombie.

    Raised when the broker answers ``ProducerFenced`` or ``InvalidProducerEpoch``.
    The holder must stop at once, commit nothing, retry nothing and write no status.
    """

    zombie = True


class TaskError(EosError):
    """A task cannot continue; the task becomes FAILED with this message."""


class ConversionError(TaskError):
    """A record could not be converted or sent; the message names its source
    partition and offset."""


class DataError(ConversionError):
    """A value does not fit its :class:`~eos.api.schema.Schema` (or a schema is used
    where it cannot be): raised by ``Struct.put``/``validate``, ``validate_value`` and
    the converters. The message says what is wrong and where (Connect's DataException)."""


class SchemaBuilderError(DataError):
    """A :class:`~eos.api.schema.SchemaBuilder` call that cannot be honoured (an
    attribute set twice, fields on a non-STRUCT type, an invalid default)."""


class SchemaRegistryError(ConversionError):
    """The schema registry refused a converter's request: an incompatible schema (the
    message names the subject, the compatibility level and the change), an invalid one,
    a schema that is not registered (``auto.register.schemas=false``), or bad credentials."""


class TransformError(TaskError):
    """A step of the connector's ``transforms`` chain (or its predicate) failed on a
    record, or cannot run on the record as it comes (a transform of values on rows the
    connector already encoded). The message names the step (``transforms.<alias>``,
    its class) and the record's source partition and offset; ``__cause__`` is the
    step's own error (often a :class:`DataError`). ``alias`` and ``type_name`` name the
    step as configured (``transforms.<alias>.type``)."""

    def __init__(self, message: str, alias: str = "", type_name: str = "") -> None:
        super().__init__(message)
        self.alias = alias
        self.type_name = type_name


class TransactionTimedOut(TaskError):
    """The broker aborted the task's open transaction because it outlived
    ``transaction.timeout.ms``."""


class TransactionAbortable(TaskError):
    """The broker answered TRANSACTION_ABORTABLE (error 120, KIP-1050): the open transaction
    cannot commit, but aborting it leaves the producer usable. An exactly-once task aborts,
    then restarts its connector task from the committed offsets (as Kafka Connect restarts a
    task); only a task that keeps getting it fails with this error."""


class TransactionRequestError(TaskError):
    """A connector asked to both commit and abort the same batch or record."""

    heals = False


class FencingError(EosError):
    """Fencing some transactional ids failed. ``failures`` maps each id that
    could not be fenced to a message saying what is missing."""

    def __init__(self, failures: Mapping[str, str]) -> None:
        self.failures = dict(failures)
        detail = "; ".join(f"{tid}: {msg}" for tid, msg in sorted(self.failures.items()))
        super().__init__(f"could not fence {len(self.failures)} transactional id(s): {detail}")


class AccessDenied(EosError):
    """The brokers refused an operation eos needs. ``acls`` lists what is missing (each an
    :class:`eos.kafka.acls.Acl`); the message has one line per ACL saying how to grant it."""

    def __init__(self, message: str, acls: Sequence[object]) -> None:
        self.acls = list(acls)
        super().__init__(message)


class TopicError(EosError):
    """An internal topic exists with a layout eos cannot use (partitions, cleanup policy)."""


class NotFoundError(EosError):
    """A connector or task that was asked for does not exist."""


class ConflictError(EosError):
    """The request raced a change of the cluster (new task configs, a rebalance)."""


class RequestTooLargeError(EosError):
    """An internal request's body is larger than the receiving worker's
    ``rest.max.request.bytes`` (413): retrying cannot help until that is raised."""

    heals = False


class WorkerStartingError(EosError):
    """The worker has not read its config topic yet (it is creating its internal
    topics or joining the group); REST answers 503 and the caller retries."""


class NotLeaderError(ConflictError):
    """A request only the leader may serve reached another worker; ``leader_url``
    names the leader when one is known."""

    def __init__(self, message: str, leader_url: str | None) -> None:
        self.leader_url = leader_url
        super().__init__(message)


class DevKafkaError(EosError):
    """The local development Kafka cannot be assembled, started or stopped."""
