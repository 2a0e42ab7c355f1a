"""The steps between a task's poll and its producer, for one segment of a poll batch.
The template loop's send step (:meth:`eos.runtime.task.source_task.SourceTaskRunner.write`)
calls :meth:`RecordPath.prepare`, which returns a frozen :class:`Prepared`: the items for
the producer and the convert step it calls on each record, bound to what this segment
collects (:class:`Collected`). The steps:

0. **runs of records** sharing a topic and schemas folded into typed blocks
   (:mod:`~eos.columns.folding`), where the converters are schema-aware, no registry
   is involved, every step is a bundled one and ``commit_record`` is not overridden;
1. **transforms** (:class:`~eos.transforms.TransformChain`) on records, and on blocks
   column by column where the steps can (rows decoded by a
   :mod:`~eos.columns.decode` decoder where a step reads encoded values);
   a dropped record is not written, its source offset still commits (the loop takes the
   offsets from the polled records);
2. **the schema registry**: schemas the registry converters have not seen yet are
   registered in a worker thread, retried within ``errors.retry.timeout`` (the convert
   step then never waits for the network on the event loop);
3. **typed blocks** (``RecordBlock(encoded=False)``) encoded a column at a time
   (:func:`~eos.converters.encode_block`);
4. **convert**, called by the producer as it queues each record: the key and value
   converters, with the record's schemas and headers (the schemaless ``convert`` where the
   record has none: the default path's cost is unchanged).

A block that cannot stay columnar — a step that needs single rows, a row that fails, a
column no converter encodes at once — becomes records that join the record pipeline
where the block left it, by one rule (:meth:`_Segment.as_records`), so that a failing row
is named, or skipped alone.

A record that fails in 1 or 4 goes to the :class:`~eos.runtime.task.tolerance.ErrorHandler`:
it fails the task (``errors.tolerance=none``) or is skipped; a skipped record's dead letter
(:mod:`eos.runtime.task.dead_letters`) waits in :meth:`Prepared.dead_letters` for the loop to
send right after the segment, in the same transaction as the output and the offsets.

``commit_record`` receives each record as the connector handed it (before the
transforms, as in Connect), with no metadata for a record that was dropped or skipped
(:meth:`Prepared.committed`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar, cast

import anyio
import anyio.to_thread

from eos.api import RecordBlock, RecordMetadata, SourceRecord, Struct
from eos.columns.decode import decoder_for
from eos.columns.folding import Folded
from eos.converters import Converter, encode_block
from eos.converters.base import SchemaConverter
from eos.converters.wire_format import RegistryConverter, schema_of
from eos.errors import ConversionError, EosError, TransformError
from eos.runtime.task.dead_letters import DeadLetters, Failure, Stage
from eos.runtime.task.producers.base import Convert, Outgoing, Sent, count_records, where
from eos.runtime.task.task_deps import TaskDeps, TaskSpec
from eos.runtime.task.tolerance import ErrorHandler

Pair = tuple[bytes | None, bytes | None]
K = TypeVar("K")
V = TypeVar("V")

REGISTRY_WAIT_MAX_S = 10.0
"""Longest pause between two attempts to reach a schema registry at start-up."""


class _NotWritten:
    """What ``commit_record`` gets for a record that was not written."""

    def metadata(self) -> RecordMetadata | None:
        return None


NOT_WRITTEN = _NotWritten()


class RecordPath:
    """One task's steps from poll to producer (see the module docstring): what stays the
    same from segment to segment. Each segment's findings live in its :class:`Prepared`."""

    def __init__(
        self,
        spec: TaskSpec,
        deps: TaskDeps,
        check_topic: Callable[[str], None],
        per_record: bool,
        log: Any,
    ) -> None:
        self.deps = deps
        self.chain = deps.transforms
        self.keys, self.values = deps.key_converter, deps.value_converter
        self.check_topic = check_topic
        self.per_record = per_record
        self.log = log
        settings = deps.errors
        letters = None
        if settings.dlq_topic is not None:
            letters = DeadLetters(
                settings.dlq_topic, spec.connector, spec.task_id, settings.dlq_context_headers
            )
        self.errors = ErrorHandler(settings, letters, deps.observer, deps.clock, log)
        self.decoder = None
        if self.chain is not None and self.chain.reads_values:
            self.decoder = decoder_for(self.keys, self.values)
        self.registry = [c for c in (self.keys, self.values) if isinstance(c, RegistryConverter)]
        self.steps: dict[Stage, str] = {
            "KEY_CONVERTER": deps.converter_names[0],
            "VALUE_CONVERTER": deps.converter_names[1],
            "HEADER_CONVERTER": deps.converter_names[2],
        }
        self.folding = (
            not per_record and not self.registry
            and isinstance(self.keys, SchemaConverter) and isinstance(self.values, SchemaConverter)
            and (self.chain is None or self.chain.bundled)
        )  # fmt: skip
        """Whether runs of records go through as typed blocks (:mod:`eos.columns.folding`); off
        for good once a step needs single rows."""
        self.active = self.chain is not None or bool(self.registry) or self.folding
        """Whether every segment needs the steps (else only those with blocks)."""
        self._seen: dict[tuple[int, str, int], object] = {}
        """(converter, topic, schema) registered with the registry (by identity; the value
        keeps the schema alive, so its id is not reused)."""

    # ------------------------------------------------------------ start and stop

    async def start(self, waiting: Callable[[str], Awaitable[None]]) -> None:
        """Before the task starts: reach every schema registry (waiting as long as it
        takes, said once through ``waiting``), create the dead-letter topic."""
        for converter in self.registry:
            await self._reach(converter, waiting)
        settings = self.deps.errors
        if settings.dlq_topic is not None and self.deps.create_topic is not None:
            await self.deps.create_topic(settings.dlq_topic, settings.dlq_replication_factor)

    async def _reach(
        self, converter: RegistryConverter, waiting: Callable[[str], Awaitable[None]]
    ) -> None:
        pause, said = 1.0, False
        while True:
            try:
                await anyio.to_thread.run_sync(converter.probe, abandon_on_cancel=True)
            except EosError as exc:
                if not exc.retriable:
                    raise
                if not said:
                    self.log.warning("waiting for the schema registry", error=str(exc))
                    await waiting(f"waiting for the schema registry: {exc}")
                    said = True
                await self.deps.clock.sleep(pause)
                pause = min(2 * pause, REGISTRY_WAIT_MAX_S)
                continue
            if said:
                self.log.info("schema registry reached")
            return

    def close(self) -> None:
        """Close the transforms and the converters (each failure logged, none raised)."""
        parts = [self.chain, self.keys, self.values]
        for part in parts:
            close = getattr(part, "close", None)
            if callable(close):
                try:
                    close()
                except Exception as exc:
                    self.log.warning("closing failed", part=type(part).__name__, error=repr(exc))

    # ----------------------------------------------------------------- prepare

    async def prepare(self, segment: Sequence[Outgoing]) -> Prepared:
        """``segment`` as the producer takes it — transformed, its schemas registered, its
        typed blocks encoded (the segment itself on the default path) — with the convert
        step bound to what this segment collects."""
        found = Collected(self.per_record)
        blocks = RecordBlock in set(map(type, segment))  # C loops: the default path's
        if not self.active and not blocks:
            return Prepared(segment, self._convert(found), 0, False, found)
        work = _Segment(self, found)
        items: Sequence[Outgoing] = segment
        if self.folding:
            items = work.folded.fold(segment)
            blocks = blocks or bool(work.folded.runs)
        if self.per_record and blocks:  # commit_record takes records: one per row
            items = work.expand(items)
        staged = work.transform(items) if self.chain is not None else list(items)
        if self.registry:
            await self._register(staged)
        out = work.encode(staged) if blocks else staged
        return Prepared(out, self._convert(found), work.dropped, blocks, found)

    # ----------------------------------------------------------------- registry

    async def _register(self, items: Sequence[Outgoing]) -> None:
        """Register every schema of ``items`` a registry converter has not seen (in a
        thread, retried); refusals are left for the convert step to report per record."""
        for item in items:
            if type(item) is SourceRecord:
                if not item.encoded:
                    await self._schema(self.keys, item.topic, item.key_schema, item.key)
                    await self._schema(self.values, item.topic, item.value_schema, item.value)
                continue
            assert isinstance(item, RecordBlock)
            if item.encoded:
                continue
            for topic in {item.topic} if item.topics is None else set(item.topics):
                if item.keys is not None and item.key_schema is not None:
                    await self._schema(self.keys, topic, item.key_schema, True)
                if item.value_schema is not None:
                    await self._schema(self.values, topic, item.value_schema, True)

    async def _schema(self, converter: Converter, topic: str, schema: Any, value: Any) -> None:
        if value is None or not isinstance(converter, RegistryConverter):
            return
        if schema is None:
            try:
                schema = schema_of(value, converter.FORMAT)
            except EosError:
                return  # the convert step reports it
        key = (id(converter), topic, id(schema))
        if key in self._seen:
            return
        if not converter.known(topic, schema):
            register = partial(anyio.to_thread.run_sync, _writer, converter, topic, schema)
            await self.errors.retry(register, f"registering the schema of topic {topic!r}")
        self._seen[key] = schema

    # ------------------------------------------------------------------ convert

    def _convert(self, found: Collected) -> Convert:
        """The convert step, its failures collected in ``found`` (per record: keep it
        lean; it is the default path's cost)."""
        check_topic = self.check_topic
        key_plain, value_plain = self.keys.convert, self.values.convert
        key_typed, value_typed = _typed(self.keys), _typed(self.values)
        header_typed = self.deps.header_converter.from_connect_header
        failed = partial(self._conversion_failed, found)

        def convert(record: SourceRecord) -> Pair | None:
            topic = record.topic
            check_topic(topic)
            headers = record.headers
            if headers and not all(type(v) is bytes or v is None for _, v in headers):
                try:  # first, as Connect does: the record's headers hold only bytes after
                    record.headers = _header_bytes(header_typed, topic, headers)
                except Exception as exc:
                    return failed(record, "HEADER_CONVERTER", exc)
            if record.encoded:
                return _encoded(record)
            try:
                schema = record.key_schema
                if schema is None:
                    key = key_plain(topic, record.key)
                else:
                    key = key_typed(topic, schema, record.key, record.headers)
            except Exception as exc:
                return failed(record, "KEY_CONVERTER", exc)
            try:
                schema = record.value_schema
                if schema is None:
                    value = value_plain(topic, record.value)
                else:
                    value = value_typed(topic, schema, record.value, record.headers)
            except Exception as exc:
                return failed(record, "VALUE_CONVERTER", exc)
            return key, value

        return convert

    def _conversion_failed(
        self, found: Collected, record: SourceRecord, stage: Stage, exc: Exception
    ) -> None:
        fatal = ConversionError(f"{found.where(record)} could not be converted: {exc}")
        letter = self.errors.failed(Failure(record, stage, self.steps[stage], exc), fatal)
        found.skipped += 1
        found.skip(record, letter)

    def convert_dead(self, record: SourceRecord) -> Pair:
        """The convert step of dead letters (already bytes)."""
        self.check_topic(record.topic)
        return record.key, record.value


class Collected:
    """What one segment's steps find record by record: the transforms while it is
    prepared, the convert step while the producer queues it. Its dead letters, the
    records the convert step skipped, the rows of blocks taken apart (to name a failing
    row), and for tasks that override ``commit_record`` each record as polled."""

    __slots__ = ("dead", "lost", "origins", "rows", "skipped")

    def __init__(self, per_record: bool) -> None:
        self.dead: list[SourceRecord] = []
        self.skipped = 0
        self.rows = _ByIdentity[SourceRecord, tuple[RecordBlock, int]]()
        """Rows of blocks the path took apart → (block, row)."""
        self.origins = _ByIdentity[SourceRecord, SourceRecord]() if per_record else None
        """per_record: a transformed record → the record as polled."""
        self.lost: list[SourceRecord] = []
        """per_record: records as polled that were dropped or skipped."""

    def skip(self, record: SourceRecord, letter: SourceRecord | None) -> None:
        if letter is not None:
            self.dead.append(letter)
        if self.origins is not None:
            self.lost.append(self.origins.pop(record) or record)

    def where(self, record: SourceRecord) -> str:
        row = self.rows.get(record)
        return where(record) if row is None else f"row {row[1]} of {where(row[0])}"


@dataclass(frozen=True, slots=True)
class Prepared:
    """One segment, ready for the producer: the records and blocks it takes, the convert
    step it calls on each record, and what this segment's steps found — complete once the
    producer has converted every record."""

    items: Sequence[Outgoing]
    """What the producer queues, in order."""
    convert: Convert
    """The convert step, bound to :attr:`found`."""
    dropped: int
    """Records the transforms dropped (their offsets still commit)."""
    blocks: bool
    """Whether :attr:`items` hold blocks (their rows are counted one by one)."""
    found: Collected

    def dead_letters(self) -> list[SourceRecord]:
        """The dead letters of the records skipped, to send right after the items."""
        return self.found.dead

    def written(self) -> int:
        """Records the producer queued (rows counted, skipped ones not)."""
        queued = count_records(self.items) if self.blocks else len(self.items)
        return queued - self.found.skipped

    def committed(self, sent: list[tuple[SourceRecord, Sent]]) -> list[tuple[SourceRecord, Sent]]:
        """``commit_record``'s arguments: the records as polled, written or not."""
        origins, lost = self.found.origins, self.found.lost
        records = [(origins.get(r) or r, s) for r, s in sent] if origins else sent
        if lost:
            records = [*records, *((r, cast(Sent, NOT_WRITTEN)) for r in lost)]
        return records


class _Segment:
    """The steps of one segment between its poll and its producer: the transforms and
    the encoding of typed blocks, and the one rule for a block that cannot stay columnar
    (:meth:`as_records`)."""

    def __init__(self, path: RecordPath, found: Collected) -> None:
        self.path = path
        self.chain = path.chain
        self.found = found
        self.folded = Folded()
        self.dropped = 0

    def expand(self, items: Sequence[Outgoing]) -> list[Outgoing]:
        """``items`` with every block taken apart into its rows, each remembered."""
        out: list[Outgoing] = []
        for item in items:
            if isinstance(item, RecordBlock):
                out += self._rows(item, item.records())
            else:
                out.append(item)
        return out

    def _rows(self, block: RecordBlock, rows: list[SourceRecord]) -> list[SourceRecord]:
        remember = self.found.rows.put
        for i, row in enumerate(rows):
            remember(row, (block, i))
        return rows

    def as_records(self, block: RecordBlock, *, transformed: bool) -> list[Outgoing]:
        """The rule, written once: a block that cannot stay columnar (a step that needs
        single rows, a failing row, a column no converter encodes at once) becomes records,
        which join the record pipeline where the block left it — each then named, skipped
        or dead-lettered alone. A block folded from records becomes those records again,
        through every step (``transformed``: its drops were counted, and are counted again
        record by record); any other block becomes its rows (decoded where the chain still
        has to read them), through the chain unless it has been through it."""
        records = self.folded.pop(block)
        if records is not None:
            if transformed:
                self.dropped -= len(records) - len(block)
            return self._records_through_chain(records)
        if transformed:
            return list(self._rows(block, block.records()))
        decoder = self.path.decoder
        if block.encoded and self.chain is not None and self.chain.reads_values and decoder:
            rows = decoder.decode(block)
        else:
            rows = block.records()
        return self._records_through_chain(self._rows(block, rows))

    # --------------------------------------------------------------- transforms

    def transform(self, items: Sequence[Outgoing]) -> list[Outgoing]:
        out: list[Outgoing] = []
        run: list[SourceRecord] = []  # records in a row, transformed as one batch
        for item in items:
            if type(item) is SourceRecord:
                run.append(item)
                continue
            assert isinstance(item, RecordBlock)
            if run:
                out += self._records_through_chain(run)
                run = []
            out += self._block_through_chain(item)
        if run:
            out += self._records_through_chain(run)
        return out

    def _records_through_chain(self, records: list[SourceRecord]) -> list[Outgoing]:
        """``records`` through the chain (as one batch, or one by one where the chain
        cannot batch them or a record fails)."""
        chain = self.chain
        if chain is None:
            return list(records)
        results = chain.apply_all(records)
        skipped: set[int] = set()  # ids of the records a failure skipped
        if results is None:
            results = []
            for item in records:
                try:
                    results.append(chain.apply(item))
                except TransformError as exc:
                    self._transform_failed(item, exc)
                    results.append(None)
                    skipped.add(id(item))
        out: list[Outgoing] = []
        origins = self.found.origins
        for item, result in zip(records, results, strict=True):
            if result is None:
                if skipped and id(item) in skipped:
                    continue
                self.dropped += 1
                if origins is not None:
                    self.found.lost.append(item)
            else:
                if origins is not None and result is not item:
                    origins.put(result, item)
                out.append(result)
        return out

    def _block_through_chain(self, block: RecordBlock) -> list[Outgoing]:
        assert self.chain is not None
        records = self.folded.pop(block)
        try:
            result = self.chain.apply_block(block, self.path.decoder)
        except TransformError:
            if records is not None:
                self.folded.keep(block, records)
            return self.as_records(block, transformed=False)
        if result is None:
            self.dropped += len(block)
            return []
        if records is not None:
            if not isinstance(result, RecordBlock):  # a step needs rows: records from now on
                self.path.folding = False
                self.folded.keep(block, records)
                return self.as_records(block, transformed=False)
            self.folded.keep(result, records)
        self.dropped += len(block) - len(result)
        return [result] if isinstance(result, RecordBlock) else list(result)

    def _transform_failed(self, record: SourceRecord, exc: TransformError) -> None:
        cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
        step = exc.type_name or exc.alias
        fatal = TransformError(
            f"transforms.{exc.alias} ({step}) failed on {self.found.where(record)}: {cause}",
            exc.alias,
            step,
        )
        if cause is exc:
            fatal = exc
        letter = self.path.errors.failed(Failure(record, "TRANSFORMATION", step, cause), fatal)
        self.found.skip(record, letter)

    # ------------------------------------------------------------------- blocks

    def encode(self, items: list[Outgoing]) -> list[Outgoing]:
        """Typed blocks encoded (as records where a whole column cannot be); the topics of
        every block checked."""
        path = self.path
        out: list[Outgoing] = []
        for item in items:
            if type(item) is not RecordBlock:
                out.append(item)
                continue
            if not item.encoded:
                if item.topics is not None and path.registry:  # a subject per row's topic
                    out += self.as_records(item, transformed=True)
                    continue
                try:
                    item = encode_block(item, path.keys, path.values)
                except Exception:  # the convert step names the failing row
                    out += self.as_records(item, transformed=True)
                    continue
            for topic in {item.topic} if item.topics is None else set(item.topics):
                path.check_topic(topic)
            out.append(item)
        return out


class _ByIdentity(Generic[K, V]):
    """A mapping keyed by object identity (records are dataclasses, unhashable), which
    holds its keys so that no id is reused while it lives."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[int, tuple[K, V]] = {}

    def __bool__(self) -> bool:
        return bool(self._items)

    def put(self, key: K, value: V) -> None:
        self._items[id(key)] = (key, value)

    def get(self, key: K) -> V | None:
        found = self._items.get(id(key)) if self._items else None
        return None if found is None else found[1]

    def pop(self, key: K) -> V | None:
        found = self._items.pop(id(key), None) if self._items else None
        return None if found is None else found[1]


def _typed(converter: Converter) -> Callable[..., bytes | None]:
    found = getattr(converter, "from_connect_data", None)
    if callable(found):
        return cast(Callable[..., bytes | None], found)
    return lambda topic, schema, value, headers: converter.convert(topic, value)


def _header_bytes(
    convert: Callable[[str, str, Any, Any], bytes | None],
    topic: str,
    headers: Sequence[tuple[str, Any]],
) -> list[tuple[str, bytes | None]]:
    """Headers with the values a connector gave as Connect values converted (a Struct
    with its schema, anything else without one); bytes and None as they are."""
    out: list[tuple[str, bytes | None]] = []
    for name, value in headers:
        if value is None or type(value) is bytes:
            out.append((name, value))
        else:
            schema = value.schema if isinstance(value, Struct) else None
            out.append((name, convert(topic, name, schema, value)))
    return out


def _encoded(record: SourceRecord) -> Pair:
    key, value = record.key, record.value
    if (key is None or type(key) is bytes) and (value is None or type(value) is bytes):
        return key, value
    raise ConversionError(
        f"{where(record)} is marked encoded but its key or value is not bytes "
        f"(key {type(key).__name__}, value {type(value).__name__})"
    )


def _writer(converter: RegistryConverter, topic: str, schema: Any) -> None:
    """Register ``schema`` (a worker thread); only a retriable failure is raised."""
    try:
        converter.writer(topic, schema)
    except EosError as exc:
        if exc.retriable:
            raise
