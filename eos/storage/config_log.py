"""The config topic: connector and task configurations, target states, task
count records, restart requests and the session key (docs/exactly-once.md, "The config
topic and the leader").

One partition, compacted, read with ``read_committed``, written **only by the
leader**, through one transactional producer (``transactional.id =
eos-cluster-${group.id}``) with one transaction per record: once a new leader
has initialised that producer, a deposed leader can never write again.

The record formats are in :mod:`eos.storage.config_records`. Rules a reader applies,
in offset order:

* Task records are *pending* (invisible) until a ``commit-<name>`` record with
  ``tasks = N`` closes the set: the pending records with ids ``0 … N-1`` (the
  latest one per id) become the connector's task configs, and the pending set
  is cleared. If one of those ids is missing (compaction removed a record
  before its commit was read), the connector is *inconsistent*: it has no task
  configs until the leader writes a new set.
* The offset of the latest commit record identifies the connector's task
  *generation*. A ``tasks-count-<name>`` record is written by the leader after
  it fenced every older generation; task configs whose commit comes after the
  latest task count record (or with no task count record at all) need a
  fencing round before their tasks may start.
* Records of unknown kinds and values of other versions are ignored with a
  warning; so are values that do not fit their format.
* State of connectors without a connector record (deleted, tombstone
  compacted away) is kept but hidden from the snapshot.
* A ``restart-<name>`` record asks the workers that run the connector (and,
  with ``include_tasks``, its tasks; with ``only_failed``, only failed ones; with
  ``task``, that one task only) to restart them. Every worker reads the topic as it
  grows (not only at rebalances) and acts on the restart records newer than the
  ones it has seen: the snapshot keeps the latest :data:`RESTART_LOG` of them in
  offset order (:attr:`ConfigSnapshot.restart_log`), so requests made back to back
  are all seen even when one read brings several.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import anyio
import structlog
from aiokafka import AIOKafkaProducer
from aiokafka import errors as kerrors

from eos.errors import AccessDenied, FencedError, RetriableError
from eos.kafka.acls import refused_transactional_id
from eos.kafka.clients import FENCED_ERRORS, STOP_SECONDS, ClientConfig, make_producer
from eos.kafka.transactional_ids import leader_transactional_id
from eos.storage._store import Record, TopicStore
from eos.storage.config_records import ConfigRecord as ConfigRecord
from eos.storage.config_records import ConnectorConfigRecord as ConnectorConfigRecord
from eos.storage.config_records import RestartRecord as RestartRecord
from eos.storage.config_records import RestartRequest as RestartRequest
from eos.storage.config_records import SessionKey as SessionKey
from eos.storage.config_records import SessionKeyRecord as SessionKeyRecord
from eos.storage.config_records import TargetState as TargetState
from eos.storage.config_records import TargetStateRecord as TargetStateRecord
from eos.storage.config_records import TaskCommitRecord as TaskCommitRecord
from eos.storage.config_records import TaskConfigRecord as TaskConfigRecord
from eos.storage.config_records import TaskCountRecord as TaskCountRecord
from eos.storage.config_records import decode_record as decode_record
from eos.storage.config_records import encode_connector_config as encode_connector_config
from eos.storage.config_records import encode_connector_tombstone as encode_connector_tombstone
from eos.storage.config_records import encode_restart as encode_restart
from eos.storage.config_records import encode_session_key as encode_session_key
from eos.storage.config_records import encode_target_state as encode_target_state
from eos.storage.config_records import (
    encode_target_state_tombstone as encode_target_state_tombstone,
)
from eos.storage.config_records import encode_task_commit as encode_task_commit
from eos.storage.config_records import encode_task_config as encode_task_config
from eos.storage.config_records import encode_task_count as encode_task_count

log = structlog.get_logger(__name__)

_ABORT_TIMEOUT = 10.0  # bound on cleanup (abort, stop) after a failed write; not a setting

RESTART_LOG = 256
"""How many of the latest restart requests a snapshot keeps (a worker reads the topic
every heartbeat interval: far fewer arrive in between)."""


# ── The snapshot ─────────────────────────────────────────────────────────────

_NO_TASKS: tuple[Mapping[str, str], ...] = ()


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ConfigSnapshot:
    """The config topic as read up to ``offset`` (the next offset to read).

    Every mapping is keyed by connector name and covers only connectors that
    have a connector config.
    """

    offset: int = 0
    connectors: Mapping[str, Mapping[str, str]] = field(default_factory=_empty)
    target_states: Mapping[str, TargetState] = field(default_factory=_empty)
    task_configs: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=_empty)
    """Committed task config sets only (empty for an inconsistent connector)."""
    task_counts: Mapping[str, int] = field(default_factory=_empty)
    """The count of the latest task count record."""
    generations: Mapping[str, int] = field(default_factory=_empty)
    """Offset of the connector's latest commit record: identifies a task generation."""
    session_key: SessionKey | None = None
    inconsistent: frozenset[str] = frozenset()
    """Connectors whose latest commit could not be matched with its task records;
    the leader must write their task configs again."""
    task_count_offsets: Mapping[str, int] = field(default_factory=_empty)
    """Offset of the connector's latest task count record."""
    restarts: Mapping[str, tuple[int, RestartRequest]] = field(default_factory=_empty)
    """The latest restart request of each connector, with its offset."""
    restart_log: tuple[tuple[int, str, RestartRequest], ...] = ()
    """The latest :data:`RESTART_LOG` restart requests (offset, connector, request) in
    offset order, also those of connectors deleted since."""

    def tasks(self, name: str) -> tuple[Mapping[str, str], ...]:
        """The connector's current (committed) task configs, task 0 first."""
        return self.task_configs.get(name, _NO_TASKS)

    def target_state(self, name: str) -> TargetState:
        """The connector's target state (STARTED when none was written)."""
        return self.target_states.get(name, TargetState.STARTED)

    def needs_fencing(self, name: str) -> bool:
        """True when the connector's latest task configs are not yet covered by a
        task count record: a fencing round must come before its tasks start."""
        commit = self.generations.get(name)
        if commit is None:
            return False
        count = self.task_count_offsets.get(name)
        if count is None:
            return bool(self.tasks(name))
        return commit > count

    def previous_task_count(self, name: str) -> int | None:
        """The count of the latest task count record (the generation fenced last),
        or None if the connector has none."""
        return self.task_counts.get(name)


@dataclass
class _Connector:
    config: Mapping[str, str] | None = None
    target_state: TargetState | None = None
    pending: dict[int, Mapping[str, str]] = field(default_factory=dict)
    tasks: tuple[Mapping[str, str], ...] = ()
    inconsistent: bool = False
    commit_offset: int | None = None
    task_count: int | None = None
    task_count_offset: int | None = None
    restart: tuple[int, RestartRequest] | None = None


class ConfigState:
    """Applies config records in offset order; :meth:`snapshot` freezes the result.

    Pure (no I/O): :class:`ConfigLog` feeds it what it reads.
    """

    def __init__(self) -> None:
        self._connectors: dict[str, _Connector] = {}
        self._session_key: SessionKey | None = None
        self._next_offset = 0
        self._restart_log: deque[tuple[int, str, RestartRequest]] = deque(maxlen=RESTART_LOG)

    def apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        record = decode_record(key, value)
        if record is not None:
            self.apply_record(record, offset)
        self._next_offset = max(self._next_offset, offset + 1)

    def apply_record(self, record: ConfigRecord, offset: int) -> None:
        if isinstance(record, SessionKeyRecord):
            self._session_key = record.session_key
            return
        connector = self._connectors.setdefault(record.name, _Connector())
        if isinstance(record, ConnectorConfigRecord):
            if record.properties is None:
                del self._connectors[record.name]  # its tasks, counts and target state go too
            else:
                connector.config = record.properties
        elif isinstance(record, TaskConfigRecord):
            if record.properties is None:
                connector.pending.pop(record.task, None)
            else:
                connector.pending[record.task] = record.properties
        elif isinstance(record, TaskCommitRecord):
            if record.tasks is not None:
                self._commit(record.name, connector, record.tasks, offset)
        elif isinstance(record, TargetStateRecord):
            connector.target_state = record.state
        elif isinstance(record, RestartRecord):
            if record.request is not None:
                connector.restart = (offset, record.request)
                self._restart_log.append((offset, record.name, record.request))
        else:
            connector.task_count = record.tasks
            connector.task_count_offset = None if record.tasks is None else offset

    def _commit(self, name: str, connector: _Connector, tasks: int, offset: int) -> None:
        missing = [n for n in range(tasks) if n not in connector.pending]
        if missing:
            log.warning(
                "task configs incomplete (compacted?); the leader must write them again",
                connector=name,
                tasks=tasks,
                missing=missing,
            )
            connector.tasks, connector.inconsistent = (), True
        else:
            connector.tasks = tuple(connector.pending[n] for n in range(tasks))
            connector.inconsistent = False
        # Even an inconsistent set is dropped: only a complete, fresh set may follow.
        connector.pending.clear()
        connector.commit_offset = offset

    def snapshot(self, offset: int | None = None) -> ConfigSnapshot:
        """Freeze what was applied; ``offset`` defaults to one past the last record."""
        configs = {n: c.config for n, c in self._connectors.items() if c.config is not None}
        live = {n: self._connectors[n] for n in configs}
        return ConfigSnapshot(
            offset=self._next_offset if offset is None else offset,
            connectors=MappingProxyType(configs),
            target_states=MappingProxyType(
                {n: c.target_state for n, c in live.items() if c.target_state is not None}
            ),
            task_configs=MappingProxyType({n: c.tasks for n, c in live.items() if c.tasks}),
            task_counts=MappingProxyType(
                {n: c.task_count for n, c in live.items() if c.task_count is not None}
            ),
            generations=MappingProxyType(
                {n: c.commit_offset for n, c in live.items() if c.commit_offset is not None}
            ),
            session_key=self._session_key,
            inconsistent=frozenset(n for n, c in live.items() if c.inconsistent),
            task_count_offsets=MappingProxyType(
                {n: c.task_count_offset for n, c in live.items() if c.task_count_offset is not None}
            ),
            restarts=MappingProxyType(
                {n: c.restart for n, c in live.items() if c.restart is not None}
            ),
            restart_log=tuple(self._restart_log),
        )


# ── The store ────────────────────────────────────────────────────────────────


class ConfigWriters:
    """The config topic's writers, each one record or one transaction of records built by
    :mod:`eos.storage.config_records`, over :meth:`_write` (the store's transactional
    producer, or a fake's list)."""

    async def _write(self, *records: Record) -> int:
        """Write ``records`` in one transaction; the offset of the last one."""
        raise NotImplementedError

    async def put_connector_config(self, name: str, properties: Mapping[str, str]) -> int:
        return await self._write(encode_connector_config(name, properties))

    async def remove_connector(self, name: str) -> int:
        """Tombstones for the connector config and its target state."""
        await self._write(encode_connector_tombstone(name))
        return await self._write(encode_target_state_tombstone(name))

    async def put_task_configs(self, name: str, configs: Sequence[Mapping[str, str]]) -> int:
        """One record per task, then the commit record, in one transaction (a reader
        sees all of them or none); returns the commit's offset."""
        records = [encode_task_config(name, task, props) for task, props in enumerate(configs)]
        return await self._write(*records, encode_task_commit(name, len(configs)))

    async def put_target_state(self, name: str, state: TargetState) -> int:
        return await self._write(encode_target_state(name, state))

    async def put_task_count(self, name: str, tasks: int) -> int:
        return await self._write(encode_task_count(name, tasks))

    async def put_restart(self, name: str, request: RestartRequest) -> int:
        return await self._write(encode_restart(name, request))

    async def put_session_key(self, session_key: SessionKey) -> int:
        return await self._write(encode_session_key(session_key))


class ConfigLog(ConfigWriters, TopicStore[ConfigState]):
    """Reads the config topic into :class:`ConfigSnapshot` s; writes for the leader.

    Writers return the offset of the record they wrote and do not touch the
    snapshot: :meth:`refresh` reads the records back (that is how the leader
    confirms a task count record). The transactional producer is initialised on
    the first write (or by :meth:`claim_write_privileges`), which fences the
    producer of any previous leader. Once this producer has been fenced, every
    write raises :class:`~eos.errors.FencedError` until
    :meth:`claim_write_privileges` is called (when this worker is leader again).
    """

    def __init__(
        self,
        client_config: ClientConfig,
        topic: str,
        group_id: str,
        *,
        read_timeout: float,
        write_timeout: float = 30.0,
    ) -> None:
        super().__init__(
            client_config,
            topic,
            read_timeout=read_timeout,
            client_id=f"eos-config-{group_id}",
            state_factory=ConfigState,
        )
        self.transactional_id = leader_transactional_id(group_id)
        self._write_timeout = write_timeout
        self._producer: AIOKafkaProducer | None = None
        self._fenced = False
        self._write_lock = anyio.Lock()
        self._snapshot = ConfigSnapshot()
        self._log = log.bind(topic=topic, transactional_id=self.transactional_id)

    @property
    def snapshot(self) -> ConfigSnapshot:
        """The snapshot of the last successful :meth:`refresh`."""
        return self._snapshot

    async def refresh(self, timeout: float | None = None) -> ConfigSnapshot:
        """Read the topic to its end (``timeout`` defaults to ``read_timeout``) and
        return the new snapshot. Raises :class:`~eos.errors.ReadToEndTimeout`."""
        state = await self._refresh_state(timeout)
        self._snapshot = state.snapshot(self._position)
        return self._snapshot

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):  # the reader's consumers too, even if cancelled
            try:
                with anyio.move_on_after(STOP_SECONDS):
                    async with self._write_lock:
                        await self._drop_producer()
            finally:
                await super().close()

    async def claim_write_privileges(self) -> None:
        """Initialise a new transactional producer now (fencing any other holder of
        the id), also after this one was fenced. Call it on becoming leader."""
        async with self._write_lock:
            await self._drop_producer()
            self._fenced = False
            try:
                await self._started_producer()
            except kerrors.TransactionalIdAuthorizationFailed as exc:
                await self._drop_producer()
                raise self._refused() from exc

    def _refused(self) -> AccessDenied:
        return refused_transactional_id(
            self._client_config, self.transactional_id, "the config topic's transactional writer"
        )

    async def _write(self, *records: Record) -> int:
        """Write ``records`` in one transaction; the offset of the last one."""
        key = records[-1][0]
        async with self._write_lock:
            if self._fenced:
                raise FencedError(self._fenced_message())
            try:
                with anyio.fail_after(self._write_timeout):
                    producer = await self._started_producer()
                    await producer.begin_transaction()
                    sent = [
                        await producer.send(self.topic, v, key=k, partition=0) for k, v in records
                    ]
                    for delivery in sent:  # in order: the last one's offset is returned
                        metadata = await delivery
                    await producer.commit_transaction()
            except kerrors.TransactionalIdAuthorizationFailed as exc:
                await self._drop_producer()
                raise self._refused() from exc
            except FENCED_ERRORS as exc:
                self._fenced = True
                await self._drop_producer()
                self._log.warning("config topic writer fenced: another leader took over")
                raise FencedError(self._fenced_message()) from exc
            except TimeoutError:
                await self._abandon_transaction()
                raise RetriableError(
                    f"could not write {key.decode()!r} to config topic {self.topic!r} "
                    f"within {self._write_timeout:g}s"
                ) from None
            except BaseException:
                await self._abandon_transaction()
                raise
            offset = int(metadata.offset)
            self._log.debug("config record written", key=key.decode(), offset=offset)
            return offset

    def _fenced_message(self) -> str:
        return (
            f"the config topic writer {self.transactional_id!r} was fenced: "
            "another leader took over"
        )

    async def _started_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            producer = make_producer(
                self._client_config,
                transactional_id=self.transactional_id,
                enable_idempotence=True,
                acks="all",
                client_id=f"eos-config-writer-{self.transactional_id}",
            )
            try:
                await producer.start()  # InitProducerId: fences any previous holder
            except BaseException:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_ABORT_TIMEOUT):
                    await producer.stop()
                raise
            self._producer = producer
            self._log.info("config topic writer initialised")
        return self._producer

    async def _abandon_transaction(self) -> None:
        """After a failed write: abort the open transaction so it does not hold
        read_committed readers back; if that fails, drop the producer (the next
        write initialises a new one, which aborts it)."""
        producer = self._producer
        if producer is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(_ABORT_TIMEOUT) as scope:
            try:
                await producer.abort_transaction()
                return
            except Exception as exc:
                self._log.info("could not abort config transaction", error=repr(exc))
        if scope.cancelled_caught:
            self._log.info("could not abort config transaction in time")
        await self._drop_producer()

    async def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_ABORT_TIMEOUT):
                await producer.stop()
