"""The start-up checks of an exactly-once task (docs/exactly-once.md, "Starting a
task"): before its producer exists, a fencing round by the leader and a read of the
config topic (once per task generation on this worker: the tasks of a generation
that start together share them); after, another read; and the connector's own
offsets topic created if it has one. Used by the task through
:class:`~eos.runtime.task.source_task.StartGate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import structlog

from eos.config.worker import WorkerConfig
from eos.errors import ConflictError, EosError, NotLeaderError, RetriableError
from eos.kafka.admin import ensure_topic
from eos.kafka.clients import ClientConfig
from eos.runtime.cluster.coordinator.cluster_state import ClusterState
from eos.runtime.cluster.coordinator.leader_requests import LeaderRequests

log = structlog.get_logger(__name__)


@dataclass
class _StartCheck:
    """The shared start-up check of one task generation (see StartGate)."""

    generation: int
    done: anyio.Event = field(default_factory=anyio.Event)
    ok: bool | None = None
    error: Exception | None = None


class StartChecks:
    """What the start-up checks of this worker's tasks share: the check of each
    connector's latest task generation, and the offsets topics already created."""

    def __init__(self, settings: WorkerConfig, state: ClusterState, leader: LeaderRequests) -> None:
        self.settings = settings
        self.state = state
        self.leader = leader
        self.checks: dict[str, _StartCheck] = {}
        """connector → the start-up check of its latest task generation (StartGate)."""
        self.topics_ensured: set[str] = set()
        self.warned_leader = ""
        """The disabled leader this worker said its tasks wait for (once per leader)."""

    def gate(self, client: ClientConfig, own_topic: str | None) -> StartGate:
        """The gate of one task, whose offsets go to ``own_topic`` (if any) through
        ``client``."""
        return StartGate(self, client, own_topic)


class StartGate:
    """The start-up checks of an exactly-once task (docs/exactly-once.md, "Starting a
    task"), against the coordinator and the leader."""

    def __init__(self, shared: StartChecks, client: ClientConfig, own_topic: str | None) -> None:
        self.shared = shared
        self.client = client
        self.own_topic = own_topic

    async def _current(self, connector: str, generation: int) -> bool:
        snap = await self.shared.state.snapshot()
        return snap.generations.get(connector) == generation and not snap.needs_fencing(connector)

    async def _fenced(self, connector: str) -> bool:
        """Ask the leader for a fencing round until it answers. False: the round was
        cancelled (new task configs, connector deleted): abandon start-up."""
        s = self.shared.settings
        await self._leader_fences(connector)
        backoff = s.retry_backoff_ms / 1000
        try:
            with anyio.fail_after(s.worker_sync_timeout_ms / 1000):
                while True:
                    try:
                        await self.shared.leader.request_fencing(connector)
                        return True
                    except (NotLeaderError, RetriableError) as exc:
                        log.info("fencing request not answered; retrying", error=str(exc))
                    except ConflictError as exc:
                        log.info("fencing round cancelled", connector=connector, reason=str(exc))
                        return False
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
        except TimeoutError:
            raise EosError(
                f"no fencing round for {connector} within worker.sync.timeout.ms="
                f"{s.worker_sync_timeout_ms}: is the leader ({self.shared.state.leader_url}) "
                "reachable from this worker?"
            ) from None

    async def _leader_fences(self, connector: str) -> None:
        """Wait while the leader runs ``exactly.once.source.support=disabled`` (KIP-618: it
        neither fences nor writes task counts, so no task may start unfenced); a rolling
        upgrade that has not reached the leader yet. Said once per leader."""
        state = self.shared.state
        while state.leader_exactly_once == "disabled":
            if self.shared.warned_leader != state.leader_id:
                self.shared.warned_leader = state.leader_id
                log.warning(
                    "exactly-once tasks wait: the leader runs exactly.once.source.support="
                    "disabled; roll every worker to preparing, then to enabled "
                    "(docs/exactly-once.md)",
                    connector=connector,
                    leader=state.leader_url,
                )
            await anyio.sleep(self.shared.settings.retry_backoff_ms / 1000 * 10)

    async def before_producer(self, connector: str, generation: int) -> bool:
        """Steps 1 and 2 of the start-up, done once per task generation on this worker: the
        tasks of a generation that start together share one fencing request and one
        read (every task still reads again after its producer exists, step 5). A failed
        check fails every task that waited for it; the next start tries again."""
        checks = self.shared.checks
        while True:
            check = checks.get(connector)
            if check is not None and check.generation > generation:
                return False  # a newer generation was checked: this one is stale
            if check is None or check.generation < generation:
                check = checks[connector] = _StartCheck(generation)
                try:
                    check.ok = await self._fenced(connector) and await self._current(
                        connector, generation
                    )
                except BaseException as exc:
                    if checks.get(connector) is check:
                        del checks[connector]
                    check.error = exc if isinstance(exc, Exception) else None
                    raise
                finally:
                    check.done.set()
            else:
                await check.done.wait()
                if check.error is not None:
                    raise EosError(f"start-up check failed: {check.error}") from check.error
                if check.ok is None:
                    continue  # the task that checked was stopped: check again
            if not check.ok:
                return False  # the generation is stale, or its fencing round was cancelled
            await self.offsets_topic()
            return True

    async def offsets_topic(self) -> None:
        """Create the connector's own offsets topic if it has one ("already exists" is fine)."""
        if self.own_topic and self.own_topic not in self.shared.topics_ensured:
            s = self.shared.settings
            await ensure_topic(
                self.client,
                self.own_topic,
                partitions=s.offsets_partitions,
                replication_factor=s.offsets_replication_factor,
                compacted=True,
            )
            self.shared.topics_ensured.add(self.own_topic)

    async def after_producer(self, connector: str, generation: int) -> bool:
        return await self._current(connector, generation)
