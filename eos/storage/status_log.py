"""The status topic: the last reported state of every connector and task.

Compacted, several partitions (records are key-partitioned, so the statuses of
one connector or task stay in order), written by every worker with a plain
idempotent producer (not transactional: a status is a report, not a decision)
and read with ``read_committed``.

Record formats (keys UTF-8 text, values JSON objects with a format version)::

    key                          value (v1)                                   tombstone
    ──────────────────────────── ──────────────────────────────────────────── ───────────────
    status-connector-<name>      {"v":1,"state":<state>,"trace":str|null,     status removed
                                  "worker_id":str,"generation":int}
    status-task-<name>-<n>       same as above                                status removed
    topic-<topic>-connector-     {"v":1,"topic":{"name":<topic>,              topic forgotten
      <name>                      "connector":<name>,"task":int,              (a reset)
                                  "discoverTimestamp":int}}

``<state>`` is one of UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED, RESTARTING,
DESTROYED; ``trace`` explains a FAILED state; ``generation`` is the group
generation of the worker that wrote it. Unknown kinds, other versions and
malformed values are ignored with a warning.

A status may also carry ``"auto_restart": {"restarts": int, "next_attempt_ms":
int|null, "reason": str|null}`` (absent: nothing to say): the automatic restarts of
the connector or task in a row, when the next one is due (epoch ms) while it waits
for it, and why a FAILED one is not restarted automatically (any more). Readers that
do not know the field ignore it; one that is malformed is dropped with a warning.

**Active topics** (Kafka Connect's KIP-558, the same key and ``"topic"`` object as
Connect's status topic): a task that writes to a topic for the first time reports
it; ``task`` is the task that did and ``discoverTimestamp`` when (ms since the
epoch). ``GET /connectors/<name>/topics`` lists them; a reset writes a tombstone per
topic. As both names may contain ``-connector-``, a value's names are what count
(its key must be the one they make); a tombstone applies to the topic record that
had its key.

**Ownership**: a worker that lost its place in the group (paused, cut off) may
still report on work that has moved on. A reader therefore keeps, per key, the
status of the highest group generation: a record from another worker with a
lower generation than the one it has is ignored, so a stale owner never
overwrites a newer state. (A record from the same worker always applies: a
worker's own reports are in order.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

import anyio
import structlog
from aiokafka import AIOKafkaProducer

from eos.kafka.clients import STOP_SECONDS, ClientConfig, make_producer, started
from eos.state import State
from eos.storage._store import (
    Record,
    TopicStore,
    decode_key,
    decode_versioned,
    encode_json,
    malformed,
)

log = structlog.get_logger(__name__)

_STORE = "status"
_CONNECTOR = "status-connector-"
_TASK = "status-task-"
_TOPIC = "topic-"
_TOPIC_CONNECTOR = "-connector-"


@dataclass(frozen=True)
class AutoRestartStatus:
    """What a status says of the automatic restarts of its connector or task."""

    restarts: int
    """Automatic restarts in a row."""
    next_attempt_ms: int | None = None
    """When the next one is due (epoch ms), while the failed unit waits for it."""
    reason: str | None = None
    """Why the failed unit is not restarted automatically (any more)."""


@dataclass(frozen=True)
class Status:
    """A reported state, who reported it, and in which group generation."""

    state: State
    trace: str | None
    worker_id: str
    generation: int
    auto_restart: AutoRestartStatus | None = None


@dataclass(frozen=True)
class StatusRecord:
    """A decoded status record; ``task`` is None for a connector's status and
    ``status`` None for a tombstone."""

    name: str
    task: int | None
    status: Status | None


@dataclass(frozen=True)
class ActiveTopic:
    """A topic a connector's task wrote to (KIP-558), and when that was first reported."""

    topic: str
    connector: str
    task: int
    discovered_ms: int


@dataclass(frozen=True)
class TopicRecord:
    """A decoded active-topic record: ``active`` is None for a tombstone (whose key
    alone cannot always be split into topic and connector)."""

    key: str
    active: ActiveTopic | None


def connector_status_key(name: str) -> bytes:
    return (_CONNECTOR + name).encode()


def task_status_key(name: str, task: int) -> bytes:
    return f"{_TASK}{name}-{task}".encode()


def encode_status(status: Status) -> bytes:
    document: dict[str, Any] = {
        "v": 1,
        "state": status.state.value,
        "trace": status.trace,
        "worker_id": status.worker_id,
        "generation": status.generation,
    }
    restarts = status.auto_restart
    if restarts is not None:
        document["auto_restart"] = {
            "restarts": restarts.restarts,
            "next_attempt_ms": restarts.next_attempt_ms,
            "reason": restarts.reason,
        }
    return encode_json(document)


def topic_key(topic: str, connector: str) -> bytes:
    return f"{_TOPIC}{topic}{_TOPIC_CONNECTOR}{connector}".encode()


def encode_topic(active: ActiveTopic) -> bytes:
    return encode_json(
        {
            "v": 1,
            "topic": {
                "name": active.topic,
                "connector": active.connector,
                "task": active.task,
                "discoverTimestamp": active.discovered_ms,
            },
        }
    )


def decode_status_record(
    key: bytes | None, value: bytes | None
) -> StatusRecord | TopicRecord | None:
    """The record, or None (with a warning) for anything this worker cannot read."""
    text = decode_key(key, store=_STORE)
    if text is None:
        return None
    if text.startswith(_TOPIC):
        return _topic_record(text, value)
    if text.startswith(_CONNECTOR):
        name, task = text[len(_CONNECTOR) :], None
    elif text.startswith(_TASK):
        name, _, number = text[len(_TASK) :].rpartition("-")
        if not name or not (number.isascii() and number.isdigit()):
            malformed(_STORE, text, "a task key is status-task-<connector>-<task number>")
            return None
        task = int(number)
    else:
        log.warning("record ignored: unknown kind", store=_STORE, key=text)
        return None
    if value is None:
        return StatusRecord(name, task, None)
    document = decode_versioned(value, store=_STORE, key=text)
    if document is None:
        return None
    status = _status(text, document)
    return None if status is None else StatusRecord(name, task, status)


def _status(key: str, document: dict[str, Any]) -> Status | None:
    trace, worker, generation = (document.get(k) for k in ("trace", "worker_id", "generation"))
    try:
        state = State(document.get("state"))
    except ValueError:
        malformed(_STORE, key, "unknown state")
        return None
    if (
        not (trace is None or isinstance(trace, str))
        or not isinstance(worker, str)
        or not isinstance(generation, int)
        or isinstance(generation, bool)
    ):
        malformed(_STORE, key, "needs trace (text or null), worker_id (text), generation (int)")
        return None
    return Status(state, trace, worker, generation, _auto_restart(key, document))


def _auto_restart(key: str, document: dict[str, Any]) -> AutoRestartStatus | None:
    fields = document.get("auto_restart")
    if fields is None:
        return None
    fields = fields if isinstance(fields, dict) else {}
    restarts, at, reason = (fields.get(k) for k in ("restarts", "next_attempt_ms", "reason"))
    if (
        not _is_int(restarts)
        or not (at is None or _is_int(at))
        or not (reason is None or isinstance(reason, str))
    ):
        malformed(_STORE, key, "auto_restart needs restarts (int), next_attempt_ms, reason")
        return None
    return AutoRestartStatus(restarts, at, reason)


def _topic_record(key: str, value: bytes | None) -> TopicRecord | None:
    if value is None:
        return TopicRecord(key, None)
    document = decode_versioned(value, store=_STORE, key=key)
    if document is None:
        return None
    fields = document.get("topic")
    fields = fields if isinstance(fields, dict) else {}
    topic, connector = fields.get("name"), fields.get("connector")
    task, discovered = fields.get("task"), fields.get("discoverTimestamp")
    if not (isinstance(topic, str) and isinstance(connector, str)) or not (
        _is_int(task) and _is_int(discovered)
    ):
        why = "needs topic.name and topic.connector (text), topic.task and discoverTimestamp (int)"
        malformed(_STORE, key, why)
        return None
    if topic_key(topic, connector).decode() != key:
        malformed(_STORE, key, "the key is not topic-<topic.name>-connector-<topic.connector>")
        return None
    return TopicRecord(key, ActiveTopic(topic, connector, task, discovered))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class StatusTable:
    """The latest status per connector and per task, and each connector's active
    topics; tombstones delete."""

    def __init__(self) -> None:
        self.connectors: dict[str, Status] = {}
        self.tasks: dict[str, dict[int, Status]] = {}
        self.topics: dict[str, dict[str, ActiveTopic]] = {}
        """connector → topic → when and by which task it was first reported."""
        self._topic_keys: dict[str, tuple[str, str]] = {}
        """Key of each active-topic record → (connector, topic), for tombstones."""

    def apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        record = decode_status_record(key, value)
        if record is None:
            return
        if isinstance(record, TopicRecord):
            self._apply_topic(record)
            return
        if record.task is None:
            if record.status is None:
                self.connectors.pop(record.name, None)
            elif _newer(record.status, self.connectors.get(record.name)):
                self.connectors[record.name] = record.status
            return
        tasks = self.tasks.setdefault(record.name, {})
        if record.status is None:
            tasks.pop(record.task, None)
            if not tasks:
                del self.tasks[record.name]
        elif _newer(record.status, tasks.get(record.task)):
            tasks[record.task] = record.status

    def _apply_topic(self, record: TopicRecord) -> None:
        active = record.active
        if active is not None:
            self.topics.setdefault(active.connector, {})[active.topic] = active
            self._topic_keys[record.key] = (active.connector, active.topic)
            return
        known = self._topic_keys.pop(record.key, None)
        if known is not None:
            connector, topic = known
            topics = self.topics[connector]
            del topics[topic]
            if not topics:
                del self.topics[connector]


def _newer(status: Status, current: Status | None) -> bool:
    """Whether ``status`` replaces ``current`` (see "Ownership" above)."""
    return (
        current is None
        or status.worker_id == current.worker_id
        or status.generation >= current.generation
    )


class StatusLog(TopicStore[StatusTable]):
    """Writes this worker's status reports; reads everyone's as of the last
    :meth:`refresh` (writes are not visible before the next refresh)."""

    def __init__(
        self, client_config: ClientConfig, topic: str, worker_id: str, *, read_timeout: float
    ) -> None:
        super().__init__(
            client_config,
            topic,
            read_timeout=read_timeout,
            client_id=f"eos-status-{worker_id}",
            state_factory=StatusTable,
        )
        self.worker_id = worker_id
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        await super().start()
        self._producer = await started(
            make_producer(
                self._client_config,
                enable_idempotence=True,
                acks="all",
                client_id=f"eos-status-writer-{self.worker_id}",
            )
        )

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        with anyio.CancelScope(shield=True):  # the reader's consumers too, even if cancelled
            try:
                if producer is not None:
                    with anyio.move_on_after(STOP_SECONDS):
                        await producer.stop()
            finally:
                await super().close()

    async def refresh(self, timeout: float | None = None) -> None:
        """Read the topic to its end (``timeout`` defaults to ``read_timeout``).
        Raises :class:`~eos.errors.ReadToEndTimeout`."""
        await self._refresh_state(timeout)

    async def put_connector(
        self,
        name: str,
        state: State,
        trace: str | None = None,
        generation: int = 0,
        auto_restart: AutoRestartStatus | None = None,
    ) -> None:
        status = Status(state, trace, self.worker_id, generation, auto_restart)
        await self._send((connector_status_key(name), encode_status(status)))

    async def put_task(
        self,
        name: str,
        task_id: int,
        state: State,
        trace: str | None = None,
        generation: int = 0,
        auto_restart: AutoRestartStatus | None = None,
    ) -> None:
        status = Status(state, trace, self.worker_id, generation, auto_restart)
        await self._send((task_status_key(name, task_id), encode_status(status)))

    async def remove(self, name: str) -> None:
        """Tombstones for the connector's status and every task status known now."""
        for task in sorted(self._state.tasks.get(name, {})):
            await self._send((task_status_key(name, task), None))
        await self._send((connector_status_key(name), None))

    async def put_topic(self, active: ActiveTopic) -> None:
        """Report that ``active.connector`` writes to ``active.topic``."""
        await self._send((topic_key(active.topic, active.connector), encode_topic(active)))

    async def remove_topics(self, name: str) -> list[str]:
        """Tombstones for every active topic of the connector known now (refresh first);
        the topics they removed."""
        topics = sorted(self._state.topics.get(name, {}))
        for topic in topics:
            await self._send((topic_key(topic, name), None))
        return topics

    def active_topics(self, name: str) -> dict[str, ActiveTopic]:
        """The connector's active topics as of the last refresh."""
        return dict(self._state.topics.get(name, {}))

    def has_topic(self, name: str, topic: str) -> bool:
        return topic in self._state.topics.get(name, ())

    def connector_status(self, name: str) -> Status | None:
        return self._state.connectors.get(name)

    def task_statuses(self, name: str) -> dict[int, Status]:
        return dict(self._state.tasks.get(name, {}))

    async def _send(self, record: Record) -> None:
        assert self._producer is not None, "start() first"
        key, value = record
        await self._producer.send_and_wait(self.topic, value, key=key)
        log.debug("status written", topic=self.topic, key=key.decode(), tombstone=value is None)
