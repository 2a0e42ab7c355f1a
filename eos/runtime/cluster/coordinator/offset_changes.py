"""The offset-change duty: a connector's offsets seen and changed from outside the
connector (docs/rest.md, "Offsets"; Kafka Connect's KIP-875), :class:`OffsetChanges`.

Reading gives the view a task of the connector would get: offsets in the
connector's own offsets topic win, partitions found only in the worker's global
offsets topic come from there.

Changing them (alter or reset) is done only while the connector is STOPPED, after
its last task generation has been fenced, and in one transaction: when the
connector has an offsets topic of its own on the same Kafka cluster, that
transaction writes both topics, so they agree afterwards; on another cluster,
the connector's topic is written first, then the global one. A restarted task
continues exactly from the new offsets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
import structlog

from eos.config.connector import ConnectorConfig
from eos.config.worker import WorkerConfig
from eos.errors import ValidationError
from eos.kafka.clients import ClientConfig, make_producer, started
from eos.kafka.transactional_ids import offsets_transactional_id
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared
from eos.runtime.cluster.coordinator.fencing import FencingRounds
from eos.runtime.plugins import connector_class
from eos.storage.offset_log import OffsetLog, encode_offset_key, encode_offset_value

log = structlog.get_logger(__name__)

Offsets = dict[str, dict[str, Any] | None]
"""Canonical JSON of a source partition → its offset (None: none / reset)."""


def _topics(settings: WorkerConfig, props: Mapping[str, str]) -> list[tuple[ClientConfig, str]]:
    """(client settings, topic) of the global offsets topic and, if the connector has
    one, its own (last, so that its offsets win)."""
    config = ConnectorConfig.from_properties(props, settings)
    topics = [(settings.client_config, settings.offsets_topic)]
    own = config.offsets_topic_for(settings)
    if own is not None:
        topics.append((config.output_cluster_config(settings), own))
    return topics


async def read_offsets(settings: WorkerConfig, name: str, props: Mapping[str, str]) -> Offsets:
    """The connector's committed offsets, as its tasks would see them."""
    merged: Offsets = {}
    timeout = settings.worker_sync_timeout_ms / 1000
    for client, topic in _topics(settings, props):
        async with OffsetLog(client, topic, read_timeout=timeout) as offsets:
            await offsets.refresh()
            merged.update(offsets.all_for(name))
    return dict(sorted(merged.items()))


async def write_offsets(
    settings: WorkerConfig,
    name: str,
    props: Mapping[str, str],
    changes: Offsets,
    *,
    transactional_id: str,
) -> None:
    """Write ``changes`` (None values as tombstones) to the connector's offsets topics."""
    records = [
        (encode_offset_key(name, json.loads(partition)), encode_offset_value(offset))
        for partition, offset in changes.items()
    ]
    topics = _topics(settings, props)
    batches: list[tuple[ClientConfig, list[str]]] = []
    for client, topic in reversed(topics):  # the connector's own topic first
        same = [b for b in batches if b[0].bootstrap_servers == client.bootstrap_servers]
        if same:
            same[0][1].append(topic)
        else:
            batches.append((client, [topic]))
    for client, names in batches:
        await _one_transaction(client, names, records, transactional_id)
        log.info("offsets written", connector=name, topics=names, partitions=len(records))


async def _one_transaction(
    client: ClientConfig,
    topics: list[str],
    records: list[tuple[bytes, bytes | None]],
    transactional_id: str,
) -> None:
    producer = await started(
        make_producer(
            client, transactional_id=transactional_id, enable_idempotence=True, acks="all"
        )
    )
    try:
        async with producer.transaction():
            for topic in topics:
                for key, value in records:
                    await producer.send(topic, value, key=key)
    finally:
        with anyio.CancelScope(shield=True):
            await producer.stop()


class OffsetChanges:
    """Alters or resets a STOPPED connector's offsets (leader only): the last task
    generation is fenced first, the connector may veto, the write is one transaction."""

    def __init__(self, shared: Shared, writes: ConfigWrites, rounds: FencingRounds):
        self.settings = shared.settings
        self.providers = shared.providers
        self.writes = writes
        self.rounds = rounds

    async def change(self, name: str, changes: Offsets | None) -> None:
        """``changes``: partition → new offset (None to reset it); None: reset them all."""
        snap = await self.writes.begin_offset_change(name)
        try:
            props = self.providers.resolve(snap.connectors[name])
            if self.settings.transactional_config_writes:  # (disabled: nobody fences)
                await self.rounds.fence(name)  # the stop's round: every old producer fenced
            if changes is None:
                changes = dict.fromkeys(await read_offsets(self.settings, name, props))
            connector = connector_class(props["connector.class"])()
            try:
                connector.alter_offsets(props, changes)
            except Exception as exc:
                raise ValidationError(
                    {"offsets": [f"the connector refused the change: {exc}"]}
                ) from exc
            tid = offsets_transactional_id(self.settings.group_id, name)
            await write_offsets(self.settings, name, props, changes, transactional_id=tid)
        finally:
            self.writes.end_offset_change(name)
