"""Offsets topics: how far each source partition has been read (docs/exactly-once.md,
"Resuming").

The worker's global offsets topic and any connector's own offsets topic
(``offsets.storage.topic``) share one format, the one Kafka Connect writes, so
tools that read Connect's offsets read ours::

    key                                   value                      tombstone
    ───────────────────────────────────── ────────────────────────── ──────────────
    ["<connector>",{<source partition>}]  {<source offset>}          offset reset
                                          (any JSON object)

Both are JSON; the key is *canonical* (keys sorted, no spaces) so that one
source partition always maps to the same bytes: compaction and the producer's
key partitioning depend on it. Unlike the other internal topics the value has
no version field (it is the connector's own offset). Records whose key or value
this reader cannot parse are ignored with a warning.

Offsets are written by source tasks inside their own transactions (see
:class:`OffsetBatch`) and read with ``read_committed``, so offsets of an aborted
transaction are never seen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import structlog

from eos.kafka.clients import ClientConfig
from eos.storage._store import Record, TopicStore, encode_json

log = structlog.get_logger(__name__)

_STORE = "offsets"

SourcePartition = Mapping[str, Any]
SourceOffset = Mapping[str, Any]
"""The shapes of :data:`eos.api.SourcePartition` and :data:`eos.api.SourceOffset` (storage
does not import the connector API)."""

OffsetEntry = tuple[str, dict[str, Any], dict[str, Any] | None]
"""A decoded offsets record: connector, source partition, offset (None: reset)."""


def canonical_partition(partition: SourcePartition) -> str:
    """The canonical JSON text of a source partition (the key of :meth:`OffsetLog.all_for`)."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def encode_offset_key(connector: str, partition: SourcePartition) -> bytes:
    return encode_json([connector, partition])


def encode_offset_value(offset: SourceOffset | None) -> bytes | None:
    return None if offset is None else encode_json(offset)


def decode_offset_record(key: bytes | None, value: bytes | None) -> OffsetEntry | None:
    """(connector, partition, offset or None for a tombstone), or None with a
    warning for a record this reader cannot parse."""
    try:
        decoded_key = json.loads(key) if key is not None else None
    except ValueError:
        decoded_key = None
    if not (
        isinstance(decoded_key, list)
        and len(decoded_key) == 2
        and isinstance(decoded_key[0], str)
        and isinstance(decoded_key[1], dict)
    ):
        log.warning(
            "record ignored: key is not [connector, {partition}]",
            store=_STORE,
            key=repr(key),
        )
        return None
    connector, partition = decoded_key
    if value is None:
        return connector, partition, None
    try:
        offset = json.loads(value)
    except ValueError:
        offset = None
    if not isinstance(offset, dict):
        log.warning(
            "record ignored: offset is not a JSON object",
            store=_STORE,
            connector=connector,
            partition=partition,
        )
        return None
    return connector, partition, offset


class OffsetState:
    """Latest offset per (connector, canonical partition); tombstones delete."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, str], dict[str, Any]] = {}

    def apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        entry = decode_offset_record(key, value)
        if entry is None:
            return
        connector, source_partition, source_offset = entry
        where = (connector, canonical_partition(source_partition))
        if source_offset is None:
            self.offsets.pop(where, None)
        else:
            self.offsets[where] = source_offset


class OffsetLog(TopicStore[OffsetState]):
    """The committed offsets of one offsets topic, as of the last :meth:`refresh`.

    Nothing is known before the first refresh. Shared by every task that reads
    the topic: refreshes are serialised. Returned offsets are copies.
    """

    def __init__(self, client_config: ClientConfig, topic: str, *, read_timeout: float) -> None:
        super().__init__(
            client_config,
            topic,
            read_timeout=read_timeout,
            client_id=f"eos-offsets-{topic}",
            state_factory=OffsetState,
        )

    async def refresh(self, timeout: float | None = None) -> None:
        """Read the topic to its end (``timeout`` defaults to ``read_timeout``).
        Raises :class:`~eos.errors.ReadToEndTimeout`."""
        await self._refresh_state(timeout)

    def get(self, connector: str, partition: SourcePartition) -> dict[str, Any] | None:
        offset = self._state.offsets.get((connector, canonical_partition(partition)))
        return None if offset is None else dict(offset)

    def all_for(self, connector: str) -> dict[str, dict[str, Any]]:
        """Every offset of ``connector``, keyed by canonical partition JSON."""
        return {p: dict(o) for (c, p), o in self._state.offsets.items() if c == connector}


class CombinedOffsetReader:
    """A task's view of its connector's offsets (implements
    :class:`eos.api.OffsetStorageReader`).

    Offsets in the connector's own topic win; partitions found only in the
    worker's global topic come from there. Answers come from what the two logs
    had read at the last :meth:`refresh`; the first question refreshes both
    logs if :meth:`refresh` was never called, so a task always starts from
    offsets read to the end.
    """

    def __init__(self, connector: str, own: OffsetLog | None, global_: OffsetLog) -> None:
        self.connector = connector
        self._own = own
        self._global = global_
        self._refreshed = False
        self._started = False

    async def refresh(self, timeout: float | None = None) -> None:
        """Read both topics to their ends, concurrently (connecting first, the first time:
        the connector's own topic may only be created during the task's start-up)."""
        if not self._started:
            await self._global.start()
            if self._own is not None:
                await self._own.start()
            self._started = True
        async with anyio.create_task_group() as group:
            group.start_soon(self._global.refresh, timeout)
            if self._own is not None:
                group.start_soon(self._own.refresh, timeout)
        self._refreshed = True

    async def offset(self, partition: SourcePartition) -> dict[str, Any] | None:
        return (await self.offsets([partition]))[0]

    async def offsets(self, partitions: Sequence[SourcePartition]) -> list[dict[str, Any] | None]:
        if not self._refreshed:
            await self.refresh()
        return [self._lookup(p) for p in partitions]

    def _lookup(self, partition: SourcePartition) -> dict[str, Any] | None:
        if self._own is not None:
            offset = self._own.get(self.connector, partition)
            if offset is not None:
                return offset
        return self._global.get(self.connector, partition)


class OffsetBatch:
    """The offsets of one transaction: the latest offset per source partition.

    ``add`` skips records without an offset (``source_offset=None`` advances
    nothing); ``reset`` writes a tombstone. :meth:`records` renders the batch
    for the producer, which sends it (key partitioned) inside the transaction.
    """

    def __init__(self, connector: str) -> None:
        self.connector = connector
        self._latest: dict[Any, tuple[SourcePartition, SourceOffset | None]] = {}

    @staticmethod
    def _identity(partition: SourcePartition) -> Any:
        """A cheap hashable stand-in for the partition (this runs once per record);
        the canonical JSON key is built only in :meth:`records`."""
        try:
            identity = tuple(partition.items())
            hash(identity)
            return identity
        except TypeError:  # nested values: fall back to the canonical text
            return canonical_partition(partition)

    def add(self, partition: SourcePartition, offset: SourceOffset | None) -> None:
        if offset is not None:
            self._put(partition, offset)

    def reset(self, partition: SourcePartition) -> None:
        self._put(partition, None)

    def _put(self, partition: SourcePartition, offset: SourceOffset | None) -> None:
        identity = self._identity(partition)
        self._latest.pop(identity, None)  # re-insert: the latest update comes last
        self._latest[identity] = (partition, offset)

    def _by_key(self) -> dict[bytes, tuple[SourcePartition, SourceOffset | None]]:
        # Equal partitions whose keys came in another order meet here: the latest wins.
        merged: dict[bytes, tuple[SourcePartition, SourceOffset | None]] = {}
        for partition, offset in self._latest.values():
            merged[encode_offset_key(self.connector, partition)] = (partition, offset)
        return merged

    def offsets(self) -> list[tuple[SourcePartition, SourceOffset | None]]:
        """(partition, latest offset) pairs, least recently updated first."""
        return list(self._by_key().values())

    def records(self) -> list[Record]:
        return [(key, encode_offset_value(off)) for key, (_, off) in self._by_key().items()]

    def clear(self) -> None:
        self._latest.clear()

    def __len__(self) -> int:
        return len(self._latest)

    def __bool__(self) -> bool:
        return bool(self._latest)
