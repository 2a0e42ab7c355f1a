"""How far the output partitions' last stable offsets are behind (docs/transactions.md).

Every ``lso.check.interval.ms`` the monitor lists, for each partition of the topics this
worker's tasks write, the high watermark (what a read_uncommitted consumer sees) and the
last stable offset (what read_committed sees: the start of the oldest open transaction) and
reports, per partition, how far the second is behind the first and for how long it has not
moved while behind. A transaction that stays open (a producer that died inside it with a
long ``transaction.timeout.ms``) shows as a lag that stops moving and a time that grows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from eos.kafka.aiokafka_private import fresh_metadata
from eos.kafka.clients import ClientConfig, make_consumer
from eos.runtime.clock import Clock
from eos.runtime.observer import WorkerObserver

log = structlog.get_logger(__name__)


class _ActiveTopics(Protocol):
    def active_topics(self, name: str) -> Mapping[str, object]: ...


def output_topics(
    connectors: Iterable[str],
    configs: Mapping[str, Mapping[str, str]],
    status: _ActiveTopics,
    declared: Callable[[Mapping[str, str]], list[str] | None],
) -> set[str]:
    """The topics of ``connectors``: those their tasks reported writing (topic tracking)
    and those their configs declare (``SourceConnector.output_topics``)."""
    found: set[str] = set()
    for name in connectors:
        found.update(status.active_topics(name))
        props = configs.get(name)
        if props is not None and "${" not in props.get("topic", ""):
            found.update(declared(props) or ())
    return found


@dataclass
class _Watch:
    lso: int = -1
    since: float = 0.0


@dataclass
class StuckTracker:
    """The pure part: (high watermark, last stable offset) samples → (lag, stuck seconds)."""

    watched: dict[tuple[str, int], _Watch] = field(default_factory=dict)

    def update(
        self, now: float, offsets: dict[tuple[str, int], tuple[int, int]]
    ) -> dict[tuple[str, int], tuple[int, float]]:
        report = {}
        for key, (high, stable) in offsets.items():
            watch = self.watched.setdefault(key, _Watch(stable, now))
            lag = max(0, high - stable)
            if lag == 0 or stable != watch.lso:
                watch.lso, watch.since = stable, now
            report[key] = (lag, now - watch.since if lag else 0.0)
        for gone in set(self.watched) - set(offsets):
            del self.watched[gone]
        return report


class LsoMonitor:
    """Watches the partitions of the topics ``topics()`` names, every ``interval`` seconds."""

    def __init__(
        self,
        config: ClientConfig,
        observer: WorkerObserver,
        topics: Callable[[], set[str]],
        *,
        interval: float,
        clock: Clock,
    ) -> None:
        self._config = config
        self._observer = observer
        self._topics = topics
        self._interval = interval
        self._clock = clock
        self._tracker = StuckTracker()
        self._failing = ""

    async def run(self) -> None:
        readers: list[AIOKafkaConsumer] = []  # made when first needed, always stopped
        try:
            while True:
                await anyio.sleep(self._interval)
                topics = self._topics()
                if not topics:
                    self._observer.last_stable_offsets({})
                    continue
                if not readers:
                    readers += [
                        self._consumer("read_uncommitted"),
                        self._consumer("read_committed"),
                    ]
                    for reader in readers:
                        await reader.start()
                await self._check(readers[0], readers[1], topics)
        finally:
            with anyio.CancelScope(shield=True):
                for reader in readers:
                    await reader.stop()

    def _consumer(self, isolation: str) -> AIOKafkaConsumer:
        return make_consumer(
            self._config,
            group_id=None,
            enable_auto_commit=False,
            isolation_level=isolation,
            client_id=f"eos-lso-{isolation}",
        )

    async def _check(
        self, high: AIOKafkaConsumer, stable: AIOKafkaConsumer, topics: set[str]
    ) -> None:
        try:
            cluster = await fresh_metadata(high)
            partitions = [
                TopicPartition(topic, index)
                for topic in sorted(topics)
                for index in sorted(cluster.partitions_for_topic(topic) or ())
            ]
            ends = await high.end_offsets(partitions)
            stables = await stable.end_offsets(partitions)
        except Exception as exc:  # a metric: never fails the worker; said once per cause
            if repr(exc) != self._failing:
                log.warning("last stable offsets not read", error=repr(exc))
                self._failing = repr(exc)
            return
        self._failing = ""
        offsets = {(tp.topic, tp.partition): (ends[tp], stables[tp]) for tp in partitions}
        self._observer.last_stable_offsets(self._tracker.update(self._clock.monotonic(), offsets))
