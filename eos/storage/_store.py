"""What the three internal-topic stores share.

* :class:`TopicStore`: a read_committed reader of the whole topic
  (:class:`~eos.kafka.read_to_end.TopicReader`), refreshed under a lock so that
  concurrent callers never interleave two reads, and a start/close lifecycle
  usable as an async context manager.
* The decoding rule of every versioned record: a value is a JSON
  object whose ``"v"`` names its format version. A reader ignores, with a
  warning and never an exception, anything it cannot read: a key that is not
  UTF-8, a value that is not a JSON object, a version other than the ones it
  knows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import anyio
import structlog

from eos.kafka.async_service import AsyncService
from eos.kafka.clients import ClientConfig
from eos.kafka.read_to_end import TopicReader

log = structlog.get_logger(__name__)

FORMAT_VERSION = 1
"""The version every record written by this code carries in ``"v"``."""

Record = tuple[bytes, bytes | None]
"""A record to write: key and value (None for a tombstone)."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def encode_json(document: Any) -> bytes:
    """Canonical JSON: sorted keys, no spaces, UTF-8."""
    return _CANONICAL.encode(document).encode()


def decode_key(key: bytes | None, *, store: str) -> str | None:
    """The key as text, or None (with a warning) if there is none or it is not UTF-8."""
    if key is None:
        log.warning("record ignored: it has no key", store=store)
        return None
    try:
        return key.decode()
    except UnicodeDecodeError:
        log.warning("record ignored: key is not UTF-8", store=store, key=repr(key))
        return None


def decode_versioned(value: bytes, *, store: str, key: str) -> dict[str, Any] | None:
    """The JSON object of a version-1 value, or None (with a warning) if it is
    not JSON, not an object or of another version."""
    try:
        document = json.loads(value)
    except ValueError as exc:
        log.warning("record ignored: value is not JSON", store=store, key=key, error=str(exc))
        return None
    if not isinstance(document, dict):
        log.warning("record ignored: value is not a JSON object", store=store, key=key)
        return None
    version = document.get("v")
    if version != FORMAT_VERSION or isinstance(version, bool):
        log.warning(
            "record ignored: format version not readable by this worker",
            store=store,
            key=key,
            version=version,
            readable=FORMAT_VERSION,
        )
        return None
    return document


def malformed(store: str, key: str, reason: str) -> None:
    """Log that a record of a known kind and version is ignored because its
    fields do not fit the format."""
    log.warning("record ignored: malformed", store=store, key=key, reason=reason)


class StoreState(Protocol):
    """What a store builds from its records."""

    def apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        """Apply one record; never raises for a record it cannot read."""


S = TypeVar("S", bound=StoreState)


class TopicStore(AsyncService, Generic[S]):
    """A store kept up to date by reading its topic (read_committed) to the end.

    The state (``S``) receives every new record in offset order per partition.
    Reads are serialised by a lock. A read that times out has consumed records
    it could not hand over, so the next refresh rebuilds the state from the
    beginning of the topic into a fresh object and swaps it in only when that
    read succeeds: until then readers keep the last complete state.
    """

    def __init__(
        self,
        client_config: ClientConfig,
        topic: str,
        *,
        read_timeout: float,
        client_id: str,
        state_factory: Callable[[], S],
    ) -> None:
        self.topic = topic
        self._client_config = client_config
        self._client_id = client_id
        self._read_timeout = read_timeout
        self._reader = TopicReader(client_config, topic, client_id=client_id)
        self._read_lock = anyio.Lock()
        self._state_factory = state_factory
        self._state = state_factory()
        self._rebuild = False
        self._started = False
        self._asked = 0
        """Refresh calls so far (each one's ticket)."""
        self._served = 0
        """Every call with a ticket up to this one has been served by a finished read."""
        self._position = 0
        """Where the last complete read ended, summed over partitions (for a
        one-partition topic: the next offset to read)."""

    async def start(self) -> None:
        """Connect the reader (once; again after :meth:`close`). Nothing is read until
        the first refresh."""
        async with self._read_lock:  # many tasks may open a shared store at once
            if not self._started:
                await self._reader.start()
                self._started = True

    async def close(self) -> None:
        await self._reader.close()
        self._started = False

    async def lag(self) -> int:
        """Records (with transaction markers) written but not yet read, summed over
        partitions: how far this store is behind its topic."""
        async with self._read_lock:
            ends = await self._reader.end_offsets()
        return max(0, sum(ends.values()) - self._position)

    async def _refresh_state(self, timeout: float | None) -> S:
        """Read to the end, apply what is new and return the state.

        Callers that ask while a read is under way share the next read: one read to
        the end serves everyone who asked before it began (its end offsets were
        listed after they asked), so many tasks starting at once cost a few reads,
        not one each.

        Raises :class:`~eos.errors.ReadToEndTimeout` if the end is not reached in
        time; the state is then left as it was."""
        self._asked += 1
        ticket = self._asked
        async with self._read_lock:
            if self._served >= ticket:
                return self._state  # a read that began after this call covered it
            covers = self._asked
            state = self._state
            if self._rebuild:
                await self._reader.close()
                self._reader = TopicReader(
                    self._client_config, self.topic, client_id=self._client_id
                )
                await self._reader.start()
                state = self._state_factory()
            try:
                records = await self._reader.read_to_end(
                    self._read_timeout if timeout is None else timeout
                )
            except Exception:  # timed out, or refused (e.g. an ACL): the next read starts afresh
                self._rebuild = True
                raise
            for record in records:
                state.apply(record.key, record.value, record.partition, record.offset)
            positions = await self._reader.positions()
            self._state, self._rebuild = state, False
            self._position = sum(positions.values())
            self._served = covers
            return state
