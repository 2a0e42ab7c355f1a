"""The leader's fencing rounds (docs/exactly-once.md, "The config topic and the leader").

For a connector whose latest task configs are not yet covered by a task count
record, a round fences the producers of the previous generation
(:func:`fencing_plan` says which transactional ids), then writes the task count
record: only after it may the new generation's tasks start. The producers are fenced on
the cluster they write to: the connector's own with ``producer.override.bootstrap.servers``
(as Connect fences with the connector's admin client). Workers that ask at
the same time share one round. The InitProducerId calls run outside the mailbox;
the record is written inside it, after checking that no newer task configs
arrived meanwhile (if they did, the round is cancelled: ConflictError).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
import structlog

from eos.errors import ConflictError, EosError
from eos.kafka.fencing import fence_producers
from eos.kafka.transactional_ids import task_transactional_id
from eos.runtime.cluster.coordinator.config_writes import ConfigWrites
from eos.runtime.cluster.coordinator.duty_context import Shared

log = structlog.get_logger(__name__)


def fencing_plan(group_id: str, name: str, previous: int | None, count: int) -> list[str]:
    """The transactional ids a round fences when ``name``'s task count goes from
    ``previous`` (the latest task count record; None: there is none) to ``count``.

    Every task of the previous generation is fenced, except that a single task that
    stays single fences its predecessor itself (its producer takes over the id).
    Stopping (0 tasks) leaves no successor, so that one is fenced here."""
    if previous is None or (previous <= 1 and count == 1):
        return []
    return [task_transactional_id(group_id, name, i) for i in range(previous)]


@dataclass
class FencingRound:
    """One fencing round of a connector's task generation (see :meth:`FencingRounds.fence`)."""

    connector: str
    generation: int
    props: Mapping[str, str]
    """The connector's settings (the cluster its tasks' producers write to)."""
    ids: list[str]
    count: int
    started: float
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None

    def finish(self, error: Exception | None = None) -> None:
        self.error = error
        self.done.set()

    async def wait(self) -> None:
        await self.done.wait()
        if self.error is not None:
            raise self.error


class FencingRounds:
    def __init__(self, shared: Shared, writes: ConfigWrites) -> None:
        self._settings, self._state, self._inbox = shared.settings, shared.state, shared.inbox
        self._config_log, self._writes, self._rejoin = (
            shared.state.config_log,
            writes,
            shared.rejoin,
        )
        self._timers, self._observer = shared.timers, shared.observer
        self._connector_config = shared.connector_config
        self._rounds: dict[str, FencingRound] = {}

    async def fence(self, name: str) -> None:
        """Run (or join) the fencing round of ``name``'s latest task generation and wait
        until its task count record is written. Leader only.

        Raises :class:`ConflictError` if the connector was deleted or new task configs
        arrived meanwhile (the round is cancelled), :class:`FencingError` if fencing failed.
        """
        self._state.require_leader()
        if not self._settings.transactional_config_writes:
            raise EosError(
                "the leader runs exactly.once.source.support=disabled and does not fence "
                "task generations: roll every worker to preparing, then to enabled "
                "(docs/exactly-once.md)"
            )
        snap = await self._state.snapshot()  # most callers find the round done: no mailbox trip
        if name in snap.connectors and not snap.needs_fencing(name):
            return
        round_ = await self._inbox.ask(self.start, name)
        if round_ is not None:
            await round_.wait()

    async def start(self, name: str) -> FencingRound | None:
        """The fencing round of ``name``'s latest task generation (docs/exactly-once.md),
        started in the background if none runs; None if none is needed. In the mailbox.

        Every caller read the config topic to its end just before asking (:meth:`fence`,
        the leader's duties after a rebalance), so the last snapshot is fresh enough:
        hundreds of tasks that start together cost one read, not one each."""
        self._state.require_leader()
        snap = self._config_log.snapshot
        if name not in snap.connectors:
            raise ConflictError(f"connector {name} was deleted")
        if not snap.needs_fencing(name):
            return None
        generation = snap.generations[name]
        running = self._rounds.get(name)
        if running is not None and running.generation == generation and not running.done.is_set():
            return running
        count = len(snap.tasks(name))
        previous = snap.previous_task_count(name)
        ids = fencing_plan(self._settings.group_id, name, previous, count)
        props = snap.connectors[name]
        round_ = FencingRound(name, generation, props, ids, count, time.perf_counter())
        self._rounds[name] = round_
        self._timers.start_soon(self._run_round, round_)
        log.info("fencing round started", connector=name, fence=len(ids), tasks=count)
        return round_

    async def _run_round(self, round_: FencingRound) -> None:
        """Fence the previous generation's producers (outside the mailbox), then write
        the task count record (inside it)."""
        try:
            if round_.ids:
                timeout = self._settings.session_timeout_ms / 1000
                config = self._connector_config(round_.props)
                cluster = config.output_cluster_config(self._settings)
                await fence_producers(cluster, round_.ids, timeout=timeout)
            await self._inbox.ask(self._finish_round, round_)
        except Exception as exc:
            self._observer.fencing_round(
                round_.connector, time.perf_counter() - round_.started, False
            )
            log.warning("fencing round failed", connector=round_.connector, error=str(exc))
            round_.finish(exc)

    async def _finish_round(self, round_: FencingRound) -> None:
        name = round_.connector
        snap = await self._config_log.refresh()
        if snap.generations.get(name) != round_.generation:
            raise ConflictError(
                f"new task configs for {name} arrived during its fencing round; the round "
                "was cancelled and the new configs get one of their own"
            )
        if snap.needs_fencing(name):
            await self._writes.write(self._config_log.put_task_count(name, round_.count))
            await self._config_log.refresh()
            self._observer.task_count_record_written(name)
        seconds = time.perf_counter() - round_.started
        self._observer.fencing_round(name, seconds, True)
        log.info(
            "fencing round done",
            connector=name,
            fenced=len(round_.ids),
            tasks=round_.count,
            seconds=round(seconds, 3),
        )
        round_.finish()
        if seconds > self._settings.session_timeout_ms / 2000:
            # Tasks that gave up waiting start after this rebalance (docs/exactly-once.md).
            self._rejoin.request_rejoin(f"late fencing round of {name}")
